"""Response framing rules the proxy must know without being told: HEAD, 204 and 304 have no body
whatever their Content-Length says (RFC 9112 §6.3), and Expect: 100-continue is honoured."""

import time

import pytest

from helpers import pattern_slice


def test_head_response_has_length_but_no_body(proxy):
    with proxy.conn() as c:
        c.request("HEAD", "/head-cl")
        r = c.read_response("HEAD")
        assert r.status == 200
        assert r.one("content-length") == "1234"
        assert r.body == b""
        # if the proxy had waited for (or relayed) 1234 body bytes, this would hang or misparse
        c.request("GET", "/head-cl")
        r2 = c.read_response()
        assert r2.body == pattern_slice(0, 1234).tobytes()


def test_head_of_a_chunked_resource(proxy):
    with proxy.conn() as c:
        c.request("HEAD", "/chunked?n=3&size=10")
        r = c.read_response("HEAD")
        assert r.status == 200 and r.body == b""
        c.request("GET", "/echo?after-head=1")
        assert c.read_response().json()["target"] == "/echo?after-head=1"


@pytest.mark.parametrize("target", ["/status/204", "/status/304", "/status/304?cl=42"])
def test_bodiless_statuses_then_next_request(proxy, target):
    with proxy.conn() as c:
        c.request("GET", target)
        r = c.read_response()
        assert r.status == int(target.split("/")[2][:3])
        assert r.body == b""
        assert "chunked" not in r.tokens("transfer-encoding")
        c.request("GET", "/echo?after=1")
        r2 = c.read_response(timeout=3)
        assert r2.status == 200 and r2.json()["target"] == "/echo?after=1"


def test_204_has_no_content_length_or_chunking_added(proxy):
    with proxy.conn() as c:
        c.request("DELETE", "/status/204")
        r = c.read_response()
    assert r.status == 204
    assert r.header("content-length") in ([], ["0"])
    assert r.header("transfer-encoding") == []


# --- Expect: 100-continue

def test_expect_100_continue_is_answered_before_the_body_is_sent(proxy, upstream):
    body = b"b" * 5000
    with proxy.conn() as c:
        c.send(b"POST /expect HTTP/1.1\r\nHost: test.local\r\nExpect: 100-continue\r\n"
               b"Content-Length: 5000\r\n\r\n")
        interim = c.read_response(timeout=3, stop_at_interim=True)
        assert interim.status == 100, f"expected 100 Continue first, got {interim}"
        c.send(body)
        r = c.read_response()
        assert r.status == 200
        assert r.json()["body_len"] == 5000
        # the connection continues normally
        c.request("GET", "/echo")
        assert c.read_response().status == 200


def test_expect_100_continue_with_chunked_body(proxy):
    with proxy.conn() as c:
        c.send(b"POST /expect HTTP/1.1\r\nHost: test.local\r\nExpect: 100-continue\r\n"
               b"Transfer-Encoding: chunked\r\n\r\n")
        interim = c.read_response(timeout=3, stop_at_interim=True)
        assert interim.status == 100
        c.send(b"4\r\nabcd\r\n0\r\n\r\n")
        assert c.read_response().json()["body_len"] == 4


def test_client_not_waiting_for_100_continue_still_works(proxy):
    with proxy.conn() as c:
        c.send(b"POST /expect HTTP/1.1\r\nHost: test.local\r\nExpect: 100-continue\r\n"
               b"Content-Length: 4\r\n\r\nabcd")
        r = c.read_response()
    assert r.status == 200 and r.json()["body_len"] == 4
    assert all(i.status == 100 for i in r.interim)


def test_expect_100_continue_over_the_body_limit_is_refused_without_continue(proxy_factory,
                                                                            upstream):
    p = proxy_factory(upstream, opts={"--max-body-size": "1k"})
    with p.conn() as c:
        c.send(b"POST /expect HTTP/1.1\r\nHost: test.local\r\nExpect: 100-continue\r\n"
               b"Content-Length: 5000\r\n\r\n")
        r = c.read_response(timeout=3, stop_at_interim=True)
        assert r.status == 413, f"expected 413 instead of {r.status}"
        assert r.closes()
    assert upstream.record.total_received() == 0


def test_expect_with_upstream_refusing_the_body(proxy, upstream):
    """The upstream answers 403 without reading the body; the client never has to send it."""
    with proxy.conn() as c:
        c.send(b"POST /expect?reject=1 HTTP/1.1\r\nHost: test.local\r\nExpect: 100-continue\r\n"
               b"Content-Length: 100000\r\n\r\n")
        t0 = time.monotonic()
        r = c.read_response(timeout=3, stop_at_interim=True)
        if r.status == 100:
            pytest.fail("the proxy sent 100 Continue itself instead of forwarding the "
                        "expectation (RFC 9110 §10.1.1); the upstream refused the body")
        assert r.status == 403
        assert time.monotonic() - t0 < 2
        # The client got no 100 Continue, so it may never send the body: its next request
        # would be taken for body bytes. The connection must end, and say so.
        assert r.closes(), f"403 to an unanswered Expect without Connection: close: {r.headers}"
        assert c.wait_closed(2)


def test_http10_expect_is_not_answered_with_100(proxy):
    # RFC 9110 §10.1.1: a server MUST NOT send 100 to an HTTP/1.0 client
    with proxy.conn() as c:
        c.send(b"POST /expect HTTP/1.0\r\nHost: test.local\r\nExpect: 100-continue\r\n"
               b"Content-Length: 4\r\n\r\nabcd")
        r = c.read_response()
    assert r.interim == [], f"interim responses sent to an HTTP/1.0 client: {r.interim}"
    assert r.status == 200
