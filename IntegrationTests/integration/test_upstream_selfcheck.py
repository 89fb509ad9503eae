"""Self-checks of the test upstream, without the proxy: the harness must be right before its
verdicts about the proxy mean anything."""

import hashlib

import pytest

from helpers import HTTPConn, ClosedEarly, pattern_slice, pattern_matches


def test_echo_reports_request_and_keeps_connection(upstream):
    with HTTPConn(upstream.port) as c:
        c.request("POST", "/echo?a=1", [("X-A", "1"), ("X-A", "2")], body=b"hello")
        r1 = c.read_response()
        c.request("GET", "/echo")
        r2 = c.read_response()
    j1, j2 = r1.json(), r2.json()
    assert r1.status == 200
    assert j1["target"] == "/echo?a=1" and j1["body_len"] == 5
    assert j1["body_sha256"] == hashlib.sha256(b"hello").hexdigest()
    assert ["X-A", "1"] in j1["headers"] and ["X-A", "2"] in j1["headers"]
    assert j1["conn"] == j2["conn"] and j2["index"] == 2
    raw = upstream.record.raw()
    assert raw.startswith(b"POST /echo?a=1 HTTP/1.1\r\nHost: test.local\r\n")


@pytest.mark.parametrize("raw, reason", [
    (b"GET /echo HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", "Host"),
    (b"GET /echo HTTP/1.1\r\n\r\n", "Host"),
    (b"GET /echo HTTP/1.1\r\nHost: a\nX: y\r\n\r\n", "bare"),
    (b"GET /echo HTTP/1.1\r\nHost: a\r\nX: y\r\n z\r\n\r\n", "obs-fold"),
    (b"POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
     "both"),
    (b"GET http://a/echo HTTP/1.1\r\nHost: a\r\n\r\n", "origin-form"),
    (b"GET /echo HTTP/1.1\r\nHost: a\r\nX: a\x01b\r\n\r\n", "CTL"),
    (b"POST /sink HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5 x\r\nhello\r\n0\r\n\r\n",
     "chunk size"),
])
def test_upstream_answers_599_to_malformed_requests(upstream_factory, raw, reason):
    u = upstream_factory()
    with HTTPConn(u.port) as c:
        c.send(raw)
        r = c.read_response()
        assert r.status == 599 and r.closes()
        assert c.wait_closed(2)
    assert any(reason in v["reason"] for v in u.record.violations()), u.record.violations()
    # the fixture teardown would fail on these violations: they were the point here
    open(u.record_path, "w").close()


def test_chunked_response_and_chunked_upload(upstream):
    with HTTPConn(upstream.port) as c:
        c.request("GET", "/chunked?n=5&size=1000&trailer=1")
        r = c.read_response()
        assert r.framing == "chunked" and r.body == pattern_slice(0, 5000).tobytes()
        c.send(b"POST /sink?pattern=1 HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
               b"3;ext=1\r\n" + pattern_slice(0, 3).tobytes() + b"\r\n"
               b"a\r\n" + pattern_slice(3, 10).tobytes() + b"\r\n0\r\nT: v\r\n\r\n")
        j = c.read_response().json()
        assert j["len"] == 13 and j["pattern_ok"] is True


def test_bytes_and_head_and_status(upstream):
    with HTTPConn(upstream.port) as c:
        c.request("GET", "/bytes?n=3000000")
        r = c.read_response()
        assert r.body_len == 3000000 and pattern_matches(0, r.body)
        c.request("HEAD", "/head-cl")
        r = c.read_response("HEAD")
        assert r.one("content-length") == "1234" and r.body == b""
        c.request("GET", "/status/304?cl=42")
        r = c.read_response()
        assert r.status == 304 and r.body == b""
        c.request("GET", "/status/204")
        assert c.read_response().status == 204
        c.request("GET", "/echo")
        assert c.read_response().status == 200


def test_failure_routes(upstream):
    with HTTPConn(upstream.port) as c:
        c.request("GET", "/close")
        with pytest.raises(ClosedEarly):
            c.read_response()
    with HTTPConn(upstream.port) as c:
        c.request("GET", "/reset")
        with pytest.raises(ClosedEarly) as e:
            c.read_response()
        assert e.value.reason == "reset"
    with HTTPConn(upstream.port) as c:
        c.request("GET", "/until-close?n=5000")
        r = c.read_response()
        assert r.framing == "close" and r.body == pattern_slice(0, 5000).tobytes()
    with HTTPConn(upstream.port) as c:
        c.request("GET", "/garbage")
        assert b"NOT HTTP" in c.read_until_close(2)


def test_poison_and_idle_close(upstream):
    with HTTPConn(upstream.port) as c:
        c.request("GET", "/echo?poison=1")
        assert c.read_response().status == 200
        c.request("POST", "/echo", body=b"x")
        with pytest.raises(ClosedEarly):
            c.read_response()
    assert upstream.record.wait_for(lambda r: r.notes("poison-drop"))
    with HTTPConn(upstream.port) as c:
        c.request("GET", "/echo?idle_close_ms=100")
        assert c.read_response().status == 200
        assert c.wait_closed(2)


def test_expect_and_slow_and_watch(upstream):
    with HTTPConn(upstream.port) as c:
        c.send(b"POST /expect HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\n"
               b"Content-Length: 4\r\n\r\n")
        r = c.read_response(stop_at_interim=True)
        assert r.status == 100
        c.send(b"abcd")
        j = c.read_response().json()
        assert j["saw_expect"] and j["body_len"] == 4
    with HTTPConn(upstream.port) as c:
        c.request("GET", "/slow?ms=3000")
    assert upstream.record.wait_for(lambda r: r.notes("peer-closed-while-waiting"), timeout=2)


def test_websocket_echo(upstream):
    from test_websocket import ws_handshake, ws_send, ws_recv
    with HTTPConn(upstream.port) as c:
        r, key = ws_handshake(c)
        assert r.status == 101
        ws_send(c, 0x1, b"hi there")
        assert ws_recv(c) == (0x1, b"hi there")
        big = pattern_slice(0, 200000).tobytes()
        ws_send(c, 0x2, big)
        assert ws_recv(c) == (0x2, big)


def test_unix_socket(upstream_factory):
    u = upstream_factory(unix=True)
    with HTTPConn(None, unix=u.unix_path) as c:
        c.request("GET", "/echo")
        assert c.read_response().json()["method"] == "GET"
