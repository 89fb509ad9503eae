"""Graceful shutdown: on SIGTERM/SIGINT the proxy stops accepting at once, lets in-flight requests
finish (up to --drain-timeout), closes idle connections, and exits 0."""

import signal
import time
import urllib.error
import urllib.request

from helpers import MiB, pattern_bytes, wait_port_refused


def test_sigterm_lets_the_in_flight_request_finish_and_refuses_new_connections(proxy_factory,
                                                                              upstream):
    p = proxy_factory(upstream, opts={"--drain-timeout": "10s"})
    n = 2 * MiB
    with p.conn(timeout=10) as c:
        c.request("GET", f"/slow?ms=1500&n={n}")
        assert upstream.record.wait_for(lambda r: r.requests(), timeout=2)
        time.sleep(0.2)
        t0 = time.monotonic()
        p.signal(signal.SIGTERM)
        assert wait_port_refused(p.port, timeout=1.0), \
            "new connections are still accepted after SIGTERM"
        assert p.proc.poll() is None, "exited before the in-flight request finished"
        r = c.read_response(timeout=8)
        assert r.status == 200
        assert r.body == pattern_bytes(0, n), "the in-flight response was truncated"
        assert c.wait_closed(2), "connection kept open after the drained request"
    code = p.wait_exit(3)
    assert code == 0, f"exit code {code} after SIGTERM"
    assert time.monotonic() - t0 < 4


def test_every_internal_request_after_sigterm_gets_its_503(proxy_factory, upstream):
    # Two loops, one busy with the request in flight: a loop with nothing to finish stops at
    # once, and a connection the busy loop accepted used to be handed to it (to balance the
    # loops) and never answered.
    p = proxy_factory(upstream, opts={"--loops": "2", "--drain-timeout": "10s"})
    with p.conn(timeout=10) as c:
        c.request("GET", "/slow?ms=2500&n=10")
        assert upstream.record.wait_for(lambda r: r.requests(), timeout=2)
        p.signal(signal.SIGTERM)
        time.sleep(0.2)
        for i in range(8):   # each on a new connection: the kernel spreads them over both loops
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{p.internal_port}/readyz", timeout=2)
                raise AssertionError("ready while draining")
            except urllib.error.HTTPError as e:
                assert e.code == 503 and b'"listeners":"draining"' in e.read(), i
        assert c.read_response(timeout=8).status == 200
    assert p.wait_exit(5) == 0


def test_sigint_is_a_graceful_shutdown_too(proxy_factory, upstream):
    p = proxy_factory(upstream)
    with p.conn(timeout=10) as c:
        c.request("GET", "/slow?ms=800")
        assert upstream.record.wait_for(lambda r: r.requests(), timeout=2)
        p.signal(signal.SIGINT)
        r = c.read_response(timeout=5)
        assert r.status == 200 and r.body == b"slow done\n"
    assert p.wait_exit(3) == 0


def test_idle_keepalive_connections_do_not_delay_shutdown(proxy_factory, upstream):
    p = proxy_factory(upstream, opts={"--drain-timeout": "10s", "--keepalive-timeout": "60s"})
    idle = [p.conn() for _ in range(3)]
    for c in idle:
        c.request("GET", "/echo")
        assert c.read_response().status == 200
    t0 = time.monotonic()
    p.signal(signal.SIGTERM)
    code = p.wait_exit(3)
    assert code is not None, "idle keep-alive connections held the process for the drain timeout"
    assert code == 0
    assert time.monotonic() - t0 < 2
    for c in idle:
        assert c.wait_closed(1)
        c.close()


def test_idle_process_exits_promptly(proxy_factory, upstream):
    p = proxy_factory(upstream, opts={"--drain-timeout": "10s"})
    t0 = time.monotonic()
    p.signal(signal.SIGTERM)
    assert p.wait_exit(3) == 0
    assert time.monotonic() - t0 < 1.5


def test_drain_timeout_bounds_the_shutdown(proxy_factory, upstream):
    p = proxy_factory(upstream, opts={"--drain-timeout": "500ms", "--upstream-timeout": "30s"})
    c = p.conn(timeout=10)
    c.request("GET", "/slow?ms=8000")
    assert upstream.record.wait_for(lambda r: r.requests(), timeout=2)
    t0 = time.monotonic()
    p.signal(signal.SIGTERM)
    code = p.wait_exit(4)
    dt = time.monotonic() - t0
    assert code is not None, "still running 4s after SIGTERM with a 500ms drain timeout"
    assert code == 0, f"exit code {code}"
    assert 0.3 < dt < 2.5, f"exited {dt:.2f}s after SIGTERM with a 500ms drain timeout"
    assert c.wait_closed(1)
    c.close()


def test_new_request_on_a_draining_keepalive_connection_is_not_lost(proxy_factory, upstream):
    """During the drain a keep-alive client may still send its next request: it must get either
    a real response (marked Connection: close) or a clean close before any byte of a response —
    never a hang."""
    p = proxy_factory(upstream, opts={"--drain-timeout": "5s"})
    busy = p.conn(timeout=10)
    busy.request("GET", "/slow?ms=1200")
    with p.conn(timeout=5) as c:
        c.request("GET", "/echo")
        assert c.read_response().status == 200
        assert upstream.record.wait_for(lambda r: len(r.requests()) >= 2, timeout=2)
        p.signal(signal.SIGTERM)
        time.sleep(0.2)
        try:
            c.request("GET", "/echo?during-drain=1")
            data = c.read_until_close(timeout=4)
        except OSError:
            data = b""
        if data:
            assert data.startswith(b"HTTP/1.1 "), data[:200]
            assert b"\r\nconnection: close\r\n" in data.lower()
    assert busy.read_response(timeout=5).status == 200
    busy.close()
    assert p.wait_exit(4) == 0
