"""Upstream failures become clean gateway errors: refused / garbage / closed / reset → 502,
connect or response timeout → 504; and a failed request never poisons the client connection or
the pool for the next one."""

import json
import socket
import time

import pytest

from helpers import ClosedEarly, closed_port


def assert_proxy_error(r, status):
    assert r.status == status, f"expected {status}, got {r.status} {r.reason} {r.body[:200]!r}"
    cl = r.header("content-length")
    assert cl or "chunked" in r.tokens("transfer-encoding") or r.closes(), \
        f"proxy error response without framing: {r.headers}"


def test_upstream_refusing_connections_gives_502(proxy_factory):
    port = closed_port()
    p = proxy_factory(upstream_url=f"http://127.0.0.1:{port}")
    with p.conn() as c:
        t0 = time.monotonic()
        c.request("GET", "/echo")
        r = c.read_response()
        assert_proxy_error(r, 502)
        # The client learns the request id, not the upstream's address or the errno text;
        # the operator's log line has both, under the same id.
        assert str(port).encode() not in r.body and b"refused" not in r.body.lower(), r.body
        request_id = r.body.decode().split("request id ")[1].rstrip(")\n")
        failed = [l for l in p.stderr_text().splitlines() if request_id in l and "request failed" in l]
        assert failed and str(port) in failed[0] and "refused" in failed[0].lower(), p.stderr_text()[-2000:]
        assert time.monotonic() - t0 < 1.5
        if not r.closes():
            c.request("GET", "/echo")
            assert_proxy_error(c.read_response(), 502)


@pytest.fixture
def blackhole():
    """A listener whose accept queue is full: further SYNs are dropped, connect() hangs."""
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(0)
    filler = socket.create_connection(lsock.getsockname())
    yield lsock.getsockname()[1]
    filler.close()
    lsock.close()


def test_upstream_connect_timeout_gives_504(proxy_factory, blackhole):
    p = proxy_factory(upstream_url=f"http://127.0.0.1:{blackhole}",
                      opts={"--upstream-connect-timeout": "500ms"})
    with p.conn() as c:
        t0 = time.monotonic()
        c.request("GET", "/echo")
        r = c.read_response(timeout=5)
        dt = time.monotonic() - t0
    assert_proxy_error(r, 504)
    assert 0.4 < dt < 2.5, f"504 after {dt:.2f}s with a 500ms connect timeout"


def test_slow_upstream_beyond_timeout_gives_504(proxy_factory, upstream):
    p = proxy_factory(upstream, opts={"--upstream-timeout": "1s"})
    with p.conn() as c:
        t0 = time.monotonic()
        c.request("GET", "/slow?ms=4000")
        r = c.read_response(timeout=5)
        dt = time.monotonic() - t0
        assert_proxy_error(r, 504)
        assert 0.9 < dt < 2.5, f"504 after {dt:.2f}s with a 1s upstream timeout"
        if not r.closes():
            c.request("GET", "/echo?after-504=1")
            r2 = c.read_response()
            assert r2.status == 200 and r2.json()["target"] == "/echo?after-504=1"
    # the timed-out upstream connection must be abandoned, not returned to the pool
    assert upstream.record.wait_for(
        lambda rec: any(e["phase"] == "wait" for e in rec.closes()), timeout=2), \
        "the proxy kept the timed-out upstream connection open"


def test_slow_upstream_within_timeout_succeeds(proxy_factory, upstream):
    p = proxy_factory(upstream, opts={"--upstream-timeout": "2s"})
    with p.conn() as c:
        c.request("GET", "/slow?ms=800")
        r = c.read_response(timeout=5)
    assert r.status == 200 and r.body == b"slow done\n"


def test_upstream_stalling_mid_body_aborts_the_client_connection(proxy_factory, upstream):
    """Once the head is relayed a 504 is impossible: the client must see the connection end
    before the promised body length, not a hang and not a fake-complete body."""
    p = proxy_factory(upstream, opts={"--upstream-timeout": "1s"})
    with p.conn() as c:
        t0 = time.monotonic()
        c.request("GET", "/slow?ms=4000&phase=body&n=1000")
        try:
            r = c.read_response(timeout=3.5)
        except ClosedEarly:
            r = None
        dt = time.monotonic() - t0
    assert dt < 3.0, f"the client waited {dt:.2f}s; the upstream timeout is 1s"
    if r is not None:
        assert r.status == 504, f"complete response {r.status} although the upstream stalled"


@pytest.mark.parametrize("route", ["/garbage", "/close", "/reset"])
def test_broken_upstream_answers_give_502(proxy, upstream, route):
    with proxy.conn() as c:
        c.request("GET", route)
        r = c.read_response(timeout=5)
        assert_proxy_error(r, 502)
        if not r.closes():
            c.request("GET", "/echo?after=1")
            r2 = c.read_response()
            assert r2.status == 200 and r2.json()["target"] == "/echo?after=1"
    # the upstream saw the broken route once: a non-idempotent retry storm would show here
    n = sum(1 for q in upstream.record.requests() if q["target"] == route)
    assert n in (1, 2), f"{route} requested {n} times"


@pytest.mark.parametrize("route", ["/close", "/reset"])
def test_broken_upstream_post_is_not_retried(proxy, upstream, route):
    with proxy.conn() as c:
        c.request("POST", route, body=b"once")
        r = c.read_response(timeout=5)
    assert_proxy_error(r, 502)
    n = sum(1 for q in upstream.record.requests() if q["target"] == route)
    assert n == 1, f"POST {route} reached the upstream {n} times"


def test_garbage_from_upstream_is_not_relayed(proxy):
    with proxy.conn() as c:
        c.request("GET", "/garbage")
        r = c.read_response(timeout=5)
    assert b"NOT HTTP" not in r.raw_head + r.body


def test_upstream_going_down_after_proxy_start(proxy_factory, upstream):
    p = proxy_factory(upstream)
    with p.conn() as c:
        c.request("GET", "/echo")
        assert c.read_response().status == 200
    upstream.stop()
    with p.conn() as c:
        c.request("GET", "/echo")
        assert_proxy_error(c.read_response(timeout=5), 502)


def test_an_upstream_outage_writes_a_few_lines_not_one_per_request(proxy_factory):
    """1,000 requests against a refusing upstream over about two seconds: the first failure is
    logged at once with its request id, then one summary a second per cause carries the count
    (and the latest request id) — every failure is accounted for, in a handful of lines."""
    port = closed_port()
    p = proxy_factory(upstream_url=f"http://127.0.0.1:{port}")
    ids = []
    started = time.monotonic()
    while len(ids) < 1000:
        with p.conn() as c:
            c.request("GET", "/echo")
            r = c.read_response()
            assert r.status == 502
            ids.append(r.body.decode().split("request id ")[1].rstrip(")\n"))
        if len(ids) % 100 == 0:
            time.sleep(max(0, len(ids) / 500 - (time.monotonic() - started)))   # ~500 requests/s
    time.sleep(1.3)     # the last summary is written a second after the failures it counts
    lines = [json.loads(l) for l in p.stderr_text().splitlines() if '"request failed"' in l]
    assert 2 <= len(lines) <= 6, [(l.get("suppressed"), l["request_id"]) for l in lines]
    assert lines[0]["request_id"] == ids[0] and "suppressed" not in lines[0]
    assert sum(1 if "suppressed" not in l else int(l["suppressed"]) for l in lines) == 1000
    assert all(l["request_id"] in ids and str(port) in l["reason"] for l in lines)
    assert all(l["suppressed_over_ms"] == "1000" for l in lines if "suppressed" in l)
