"""The service manager's readiness protocol (systemd `Type=notify`, sd_notify(3)): the proxy
sends READY=1 once its listeners are bound, RELOADING=1 with MONOTONIC_USEC and READY=1 again
around a SIGHUP reload (applied or refused), and STOPPING=1 at SIGTERM — each a datagram to the
unix socket `$NOTIFY_SOCKET` names. Here that socket is a real one the test reads, at a path and
in the abstract namespace (a name starting with '@'), as systemd uses both."""
import os
import signal
import socket
import time

import pytest

from helpers import HTTPConn


class NotifySocket:
    def __init__(self, tmp_path, abstract):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        if abstract:
            name = f"callback-proxy-test-{os.getpid()}-{time.monotonic_ns()}"
            self.sock.bind("\0" + name)
            self.env = "@" + name
        else:
            path = str(tmp_path / "notify.sock")
            self.sock.bind(path)
            self.env = path

    def next(self, timeout=10.0):
        """The next datagram as {KEY: value}, and its arrival on CLOCK_MONOTONIC."""
        self.sock.settimeout(timeout)
        data = self.sock.recv(4096).decode()
        arrived = time.monotonic()
        return dict(line.split("=", 1) for line in data.split("\n") if line), arrived

    def nothing_more(self, wait=0.3):
        self.sock.settimeout(wait)
        try:
            data = self.sock.recv(4096)
        except socket.timeout:
            return True
        raise AssertionError(f"unexpected notification: {data!r}")

    def close(self):
        self.sock.close()


@pytest.fixture(params=["path", "abstract"])
def notify(request, tmp_path):
    s = NotifySocket(tmp_path, abstract=request.param == "abstract")
    yield s
    s.close()


def test_ready_after_the_listeners_are_bound_then_reloading_ready_and_stopping(proxy_factory, upstream, notify, tmp_path):
    config = tmp_path / "proxy.yaml"
    config.write_text("log: { level: info }\nstore_max_memory: 64m\n")
    proxy = proxy_factory(upstream, extra=["--config", str(config)], env={"NOTIFY_SOCKET": notify.env}, wait=False)
    state, _ = notify.next()
    assert state == {"READY": "1"}
    # READY=1 means serving: both listeners accept at once, without waiting
    with HTTPConn(proxy.port) as c:
        c.request("GET", "/echo")
        assert c.read_response().status == 200
    with HTTPConn(proxy.internal_port) as c:
        c.request("GET", "/healthz")
        assert c.read_response().status == 200

    config.write_text("log: { level: debug }\nstore_max_memory: 64m\n")
    before = time.monotonic()
    proxy.signal(signal.SIGHUP)
    reloading, _ = notify.next()
    assert reloading.keys() == {"RELOADING", "MONOTONIC_USEC"} and reloading["RELOADING"] == "1", reloading
    # systemd compares MONOTONIC_USEC with its own CLOCK_MONOTONIC: Python's monotonic is that clock
    assert before * 1e6 - 1000 <= int(reloading["MONOTONIC_USEC"]) <= time.monotonic() * 1e6 + 1000
    assert notify.next()[0] == {"READY": "1"}

    # a refused reload (a restart-only setting changed) is a reload too: it ends READY=1
    config.write_text("log: { level: debug }\nstore_max_memory: 256m\n")
    proxy.signal(signal.SIGHUP)
    assert notify.next()[0]["RELOADING"] == "1"
    assert notify.next()[0] == {"READY": "1"}
    assert "configuration reload refused" in proxy.stderr_text()

    proxy.signal(signal.SIGTERM)
    assert notify.next()[0] == {"STOPPING": "1"}
    assert proxy.wait_exit(10) == 0
    assert notify.nothing_more()


def test_without_notify_socket_nothing_is_sent_and_a_bad_one_is_only_logged(proxy_factory, upstream, tmp_path):
    gone = str(tmp_path / "nobody-listens.sock")
    proxy = proxy_factory(upstream, env={"NOTIFY_SOCKET": gone})
    with HTTPConn(proxy.port) as c:
        c.request("GET", "/echo")
        assert c.read_response().status == 200
    assert "cannot notify the service manager" in proxy.stderr_text()
    proxy.signal(signal.SIGTERM)
    assert proxy.wait_exit(10) == 0
