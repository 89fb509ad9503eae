"""An upstream given by host name (`http://app.test:PORT`): looked up with the C library's
resolver at start, on SIGHUP and every `--upstream-resolve-interval`; a name's addresses are
tried in turn when one refuses; a name that does not resolve is a 502 and a not-ready /readyz,
never a crash, and it starts working as soon as it resolves.

The proxy gets its own hosts file through nss_wrapper (Debian's libnss-wrapper: an LD_PRELOAD
that makes getaddrinfo read NSS_WRAPPER_HOSTS instead of /etc/hosts), so the names are real
lookups through glibc and the test can change what they resolve to. nss_wrapper notices a new
file (inode), not an edit in place within the same second: hosts are replaced with os.replace.
Addresses are loopback ones (127.0.0.0/8 is all local on Linux): an upstream bound to
127.0.0.2:P alone refuses connections to 127.0.0.1:P and the other way round.
"""

import json
import os
import signal
import socket
import subprocess
import time

import pytest

from helpers import free_port, http_get_status
from test_tls import pki, tls_upstream  # noqa: F401 (fixtures: the test CA, an HTTPS upstream)

NSS_WRAPPER = "libnss_wrapper.so"


def _nss_wrapper_present():
    # The package ships an unversioned .so that ldconfig does not list: look for the file.
    return any(os.path.exists(os.path.join(d, NSS_WRAPPER))
               for d in ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib"))


class Hosts:
    """The proxy's hosts file."""

    def __init__(self, tmp_path):
        self.path = str(tmp_path / "hosts")
        self.set({})

    def set(self, names):
        """names: {name: [address, ...]} in the order getaddrinfo should return them."""
        tmp = self.path + ".new"
        with open(tmp, "w") as f:
            for name, addresses in names.items():
                for a in addresses:
                    f.write(f"{a} {name}\n")
        os.replace(tmp, self.path)

    @property
    def env(self):
        return {"LD_PRELOAD": NSS_WRAPPER, "NSS_WRAPPER_HOSTS": self.path}


@pytest.fixture
def hosts(tmp_path):
    # Not a skip: scripts/setup installs it, and a silently skipped suite would hide that.
    assert _nss_wrapper_present(), "libnss-wrapper is not installed (scripts/setup installs it)"
    return Hosts(tmp_path)


def log_lines(proxy, msg):
    out = []
    for line in proxy.stderr_text().splitlines():
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if obj.get("msg") == msg:
            out.append(obj)
    return out


def wait_until(predicate, timeout=5.0, interval=0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    return predicate()


def get(proxy, path="/echo"):
    with proxy.conn() as c:
        c.request("GET", path, host="site.example")
        return c.read_response()


def test_an_upstream_given_by_name_is_looked_up_and_proxied(proxy_factory, upstream_factory, hosts):
    up = upstream_factory()
    hosts.set({"app.test": ["127.0.0.1"]})
    p = proxy_factory(upstream_url=f"http://app.test:{up.port}", env=hosts.env)
    r = get(p)
    assert r.status == 200, r.body[:200]
    seen = r.json()
    # Host is the client's, not the upstream's name.
    assert [v for k, v in seen["headers"] if k.lower() == "host"] == ["site.example"]
    resolved = log_lines(p, "upstream addresses")
    assert resolved and resolved[0]["name"] == "app.test"
    assert resolved[0]["addresses"] == f"127.0.0.1:{up.port}"
    ready = [json.loads(l) for l in p.stderr_text().splitlines() if '"ready"' in l]
    assert ready and ready[0]["upstream"] == f"app.test:{up.port}"
    status, body = http_get_status(p.internal_port, "/readyz")
    assert status == 200, body


def test_an_address_that_refuses_is_skipped_and_then_passed_over(proxy_factory, upstream_factory, hosts):
    up = upstream_factory(host="127.0.0.1")
    # The name's first address has nothing listening on the port: connections there are refused.
    hosts.set({"app.test": ["127.0.0.2", "127.0.0.1"]})
    p = proxy_factory(upstream_url=f"http://app.test:{up.port}", env=hosts.env)
    # /keepalive-close ends every upstream connection, so each request opens a new one and
    # round robin would start every other one at the refusing address.
    for _ in range(6):
        r = get(p, "/keepalive-close")
        assert r.status == 200, r.body[:200]
        assert r.body == b"bye\n"
    assert len(up.record.requests()) == 6
    # Refused once: the request moved on to the next address, and the refusing one is passed
    # over from then on (one line, not one per request).
    failed = log_lines(p, "upstream address failed; passed over for 10 s")
    assert len(failed) == 1, failed
    assert failed[0]["address"] == f"127.0.0.2:{up.port}" and failed[0]["name"] == "app.test"


@pytest.fixture
def blackhole_on_127_0_0_2():
    """127.0.0.2:PORT accepts no connection: its backlog is full, further SYNs are dropped, a
    connect hangs. The same PORT on 127.0.0.1 is free for a real upstream."""
    for _ in range(20):
        port = free_port()
        lsock = socket.socket()
        try:
            lsock.bind(("127.0.0.2", port))
            break
        except OSError:
            lsock.close()
    lsock.listen(0)
    filler = socket.create_connection(("127.0.0.2", port))
    yield port
    filler.close()
    lsock.close()


def test_an_address_that_hangs_costs_one_connect_timeout_not_one_per_request(proxy_factory, upstream_factory, hosts,
                                                                            blackhole_on_127_0_0_2):
    port = blackhole_on_127_0_0_2
    up = upstream_factory(host="127.0.0.1", port=port)
    hosts.set({"app.test": ["127.0.0.2", "127.0.0.1"]})
    p = proxy_factory(upstream_url=f"http://app.test:{port}", env=hosts.env,
                      opts={"--upstream-connect-timeout": "500ms"})
    times = []
    for _ in range(6):
        t0 = time.monotonic()
        r = get(p, "/keepalive-close")
        times.append(time.monotonic() - t0)
        # Nothing was sent to the hanging address: the request moves on instead of a 504.
        assert r.status == 200, r.body[:200]
    assert len(up.record.requests()) == 6
    # Round robin starts at the name's first address: the first request waits for the
    # timeout, then moves on; the hanging address is passed over by the rest.
    slow = [t for t in times if t >= 0.45]
    assert len(slow) == 1 and times[0] >= 0.45, f"one request, the first, waits for the connect timeout: {times}"
    failed = log_lines(p, "upstream address failed; passed over for 10 s")
    assert len(failed) == 1 and failed[0]["reason"] == "connect timed out", failed


def test_when_every_address_refuses_the_client_gets_502(proxy_factory, hosts):
    port = free_port()
    hosts.set({"app.test": ["127.0.0.2", "127.0.0.1"]})
    p = proxy_factory(upstream_url=f"http://app.test:{port}", env=hosts.env)
    r = get(p)
    assert r.status == 502
    # Both addresses were tried, once each, and the proxy still serves the next request.
    assert get(p).status == 502


def test_a_name_that_does_not_resolve_is_502_and_not_ready_until_it_does(proxy_factory, upstream_factory, hosts):
    up = upstream_factory()
    p = proxy_factory(upstream_url=f"http://late.test:{up.port}", env=hosts.env)
    r = get(p)
    assert r.status == 502
    assert b"late.test" not in r.body, "the client's page names no internals"
    warned = log_lines(p, "upstream name does not resolve")
    assert len(warned) == 1 and warned[0]["name"] == "late.test" and warned[0]["keeping"] == "none"
    status, body = http_get_status(p.internal_port, "/readyz")
    assert status == 503
    assert "does not resolve" in json.loads(body)["failed"]["upstream"]
    # The name appears: within about a second (an unresolved name is retried every second).
    hosts.set({"late.test": ["127.0.0.1"]})
    assert wait_until(lambda: get(p).status == 200, timeout=5), "the name resolves now but requests still fail"
    assert http_get_status(p.internal_port, "/readyz")[0] == 200
    assert log_lines(p, "upstream addresses")[-1]["addresses"] == f"127.0.0.1:{up.port}"
    # Logged once when it started failing, not on every retry.
    assert len(log_lines(p, "upstream name does not resolve")) == 1


def two_upstreams_behind_one_name(proxy_factory, upstream_factory, hosts, interval):
    """`old` on 127.0.0.1:PORT, `new` on 127.0.0.2:PORT; app.test names `old`."""
    port = free_port()
    old = upstream_factory(name="old", host="127.0.0.1", port=port)
    new = upstream_factory(name="new", host="127.0.0.2", port=port)
    hosts.set({"app.test": ["127.0.0.1"]})
    p = proxy_factory(upstream_url=f"http://app.test:{port}", env=hosts.env,
                      opts={"--upstream-resolve-interval": interval})
    return port, old, new, p


def test_new_addresses_take_new_traffic_and_a_lookup_failure_keeps_the_old(proxy_factory, upstream_factory, hosts):
    port, old, new, p = two_upstreams_behind_one_name(proxy_factory, upstream_factory, hosts, "200ms")
    with p.conn() as c:
        # A keep-alive client: its requests share one pooled upstream connection to `old`.
        c.request("GET", "/echo", host="site.example")
        assert c.read_response().status == 200
        # A request in flight while the name moves finishes where it started.
        c.request("GET", "/slow?ms=800", host="site.example")
        time.sleep(0.1)
        hosts.set({"app.test": ["127.0.0.2"]})
        r = c.read_response(timeout=5)
        assert r.status == 200 and r.body == b"slow done\n"
        assert wait_until(lambda: log_lines(p, "upstream addresses")[-1]["addresses"] == f"127.0.0.2:{port}")
        # The pooled connection to the old address is dropped: the next request goes to `new`.
        c.request("GET", "/echo", host="site.example")
        assert c.read_response().status == 200
    assert len(old.record.requests()) == 2
    assert len(new.record.requests()) == 1
    # The name stops resolving: the last good address is kept.
    hosts.set({})
    assert wait_until(lambda: log_lines(p, "upstream name does not resolve"))
    assert log_lines(p, "upstream name does not resolve")[0]["keeping"] == f"127.0.0.2:{port}"
    assert get(p).status == 200
    assert len(new.record.requests()) == 2


def test_sighup_looks_the_name_up_again(proxy_factory, upstream_factory, hosts):
    # 0: no periodic lookups; only start and reloads.
    port, old, new, p = two_upstreams_behind_one_name(proxy_factory, upstream_factory, hosts, "0")
    assert get(p, "/keepalive-close").status == 200
    hosts.set({"app.test": ["127.0.0.2"]})
    time.sleep(1.2)
    assert get(p, "/keepalive-close").status == 200
    assert len(new.record.requests()) == 0, "looked up again without a reload"
    p.proc.send_signal(signal.SIGHUP)
    assert wait_until(lambda: any(l["addresses"] == f"127.0.0.2:{port}" for l in log_lines(p, "upstream addresses")))
    assert get(p, "/keepalive-close").status == 200
    assert len(old.record.requests()) == 2
    assert len(new.record.requests()) == 1


@pytest.mark.parametrize("url", ["http://my_app:3000", "http://1.2.3:3000", "http://0x7f:3000", "http://app:0"])
def test_what_is_not_a_host_name_is_refused_at_start(proxy_bin, url):
    r = subprocess.run([proxy_bin, "--upstream", url], capture_output=True, text=True, timeout=10)
    assert r.returncode == 2
    assert "--upstream" in r.stderr and url in r.stderr


@pytest.mark.parametrize("name, status", [("up.test", 200), ("other.test", 502)])
def test_an_https_upstream_by_name_is_verified_against_that_name(proxy_factory, tls_upstream, pki, hosts, name, status):
    # The upstream's certificate names up.test only; both names lead to it.
    up = tls_upstream("upname")
    hosts.set({"up.test": ["127.0.0.1"], "other.test": ["127.0.0.1"]})
    p = proxy_factory(upstream_url=f"https://{name}:{up.port}", env=hosts.env,
                      extra=["--upstream-ca", pki.path("ca.pem")])
    r = get(p, "/x")
    assert r.status == status
    # The name is the SNI and the name checked, without --upstream-server-name.
    assert up.sni == [name]
    if status == 502:
        assert "hostname mismatch" in "".join(l["reason"] for l in log_lines(p, "request failed"))


def test_check_accepts_a_name_that_does_not_resolve_here_and_says_so(proxy_bin, hosts):
    # A build machine may not see the production DNS: not a problem, but worth a note.
    r = subprocess.run([proxy_bin, "check", "--upstream", "http://web.test:3000"], capture_output=True, text=True,
                       timeout=10, env={**os.environ, **hosts.env})
    assert r.returncode == 0, r
    assert "upstream web.test:3000" in r.stdout
    assert "note: the upstream name 'web.test' does not resolve here" in r.stdout
    hosts.set({"web.test": ["127.0.0.1"]})
    r = subprocess.run([proxy_bin, "check", "--upstream", "http://web.test:3000"], capture_output=True, text=True,
                       timeout=10, env={**os.environ, **hosts.env})
    assert r.returncode == 0 and "note:" not in r.stdout, r
