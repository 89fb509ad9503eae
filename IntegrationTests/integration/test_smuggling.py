"""Request smuggling and strict parsing (RFC 9112; DESIGN.md §5): every ambiguous or malformed
request is answered by the proxy itself with 400 (501 for an unsupported transfer coding, 505 for
an unsupported version, 414/431 for the limits) and `Connection: close`, the connection is closed,
and **no byte of it reaches the upstream**.

Each vector runs twice: alone on a fresh connection (the upstream must receive nothing at all), and
pipelined right behind a valid GET in the same write (the GET is answered normally, and it is the
only thing the upstream ever receives).
"""

import time

import pytest

from helpers import KiB, ClosedEarly

H = b"Host: test.local\r\n"
SMUGGLED = b"GET /smuggled HTTP/1.1\r\nHost: test.local\r\n\r\n"


def post(headers, body=b"", target=b"/echo", version=b"HTTP/1.1"):
    return b"POST " + target + b" " + version + b"\r\n" + headers + b"\r\n" + body


def get_with(line, target=b"/echo", version=b"HTTP/1.1"):
    return b"GET " + target + b" " + version + b"\r\n" + H + line + b"\r\n"


def chunked(body):
    return post(H + b"Transfer-Encoding: chunked\r\n", body, target=b"/sink")


V400 = {400}
VECTORS = [
    # --- Content-Length / Transfer-Encoding conflicts
    ("cl-then-te", post(H + b"Content-Length: 6\r\nTransfer-Encoding: chunked\r\n",
                        b"0\r\n\r\n" + SMUGGLED), V400),
    ("te-then-cl", post(H + b"Transfer-Encoding: chunked\r\nContent-Length: 6\r\n",
                        b"0\r\n\r\n" + SMUGGLED), V400),
    ("two-differing-cl", post(H + b"Content-Length: 5\r\nContent-Length: 6\r\n", b"hello!"), V400),
    ("cl-plus", post(H + b"Content-Length: +5\r\n", b"hello"), V400),
    ("cl-minus", post(H + b"Content-Length: -5\r\n", b"hello"), V400),
    ("cl-two-numbers", post(H + b"Content-Length: 5 5\r\n", b"hello"), V400),
    ("cl-hex", post(H + b"Content-Length: 0x5\r\n", b"hello"), V400),
    ("cl-list", post(H + b"Content-Length: 5,6\r\n", b"hello!"), V400),
    ("cl-empty", post(H + b"Content-Length: \r\n", b"hello"), V400),
    ("cl-overflow", post(H + b"Content-Length: 99999999999999999999999\r\n", b"hello"),
     {400, 413}),
    ("te-chunked-then-gzip", post(H + b"Transfer-Encoding: chunked, gzip\r\n", b"0\r\n\r\n"),
     {400, 501}),
    ("te-gzip-then-chunked", post(H + b"Transfer-Encoding: gzip, chunked\r\n", b"0\r\n\r\n"),
     {501}),
    ("te-chunked-twice", post(H + b"Transfer-Encoding: chunked, chunked\r\n", b"0\r\n\r\n"), V400),
    ("te-two-headers", post(H + b"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n",
                            b"0\r\n\r\n"), V400),
    ("te-xchunked", post(H + b"Transfer-Encoding: xchunked\r\n", b"0\r\n\r\n"), {400, 501}),
    ("te-identity", post(H + b"Transfer-Encoding: identity\r\n", b"0\r\n\r\n"), {400, 501}),
    ("te-on-http10", post(H + b"Transfer-Encoding: chunked\r\n", b"0\r\n\r\n" + SMUGGLED,
                          version=b"HTTP/1.0"), V400),
    ("te-space-before-colon", post(H + b"Transfer-Encoding : chunked\r\n", b"0\r\n\r\n"), V400),
    ("te-obs-fold", post(H + b"Transfer-Encoding:\r\n chunked\r\n", b"0\r\n\r\n"), V400),
    # --- header syntax
    ("obs-fold", get_with(b"X-Folded: a\r\n b\r\n"), V400),
    ("obs-fold-tab", get_with(b"X-Folded: a\r\n\tb\r\n"), V400),
    ("first-header-indented", b"GET /echo HTTP/1.1\r\n Host: test.local\r\n\r\n", V400),
    ("nul-in-value", get_with(b"X-Bad: a\x00b\r\n"), V400),
    ("ctl-in-value", get_with(b"X-Bad: a\x01b\r\n"), V400),
    ("del-in-value", get_with(b"X-Bad: a\x7fb\r\n"), V400),
    ("bare-cr-in-value", get_with(b"X-Bad: a\rb\r\n"), V400),
    ("bare-lf-header-line", b"GET /echo HTTP/1.1\r\n" + b"Host: test.local\nX-A: b\r\n\r\n", V400),
    ("bare-lf-everywhere", b"GET /echo HTTP/1.1\nHost: test.local\n\n", V400),
    ("bare-lf-request-line", b"GET /echo HTTP/1.1\nHost: test.local\r\n\r\n", V400),
    ("space-in-header-name", get_with(b"X Bad: v\r\n"), V400),
    ("header-without-colon", get_with(b"NoColonHere\r\n"), V400),
    ("empty-header-name", get_with(b": v\r\n"), V400),
    ("host-space-before-colon", b"GET /echo HTTP/1.1\r\nHost : test.local\r\n\r\n", V400),
    # --- chunked body framing
    ("chunk-size-negative", chunked(b"-1\r\nhello\r\n0\r\n\r\n"), V400),
    ("chunk-size-0x", chunked(b"0x5\r\nhello\r\n0\r\n\r\n"), V400),
    ("chunk-size-overflow", chunked(b"ffffffffffffffffff\r\nhello\r\n0\r\n\r\n"), V400),
    ("chunk-size-trailing-space", chunked(b"5 \r\nhello\r\n0\r\n\r\n"), V400),
    ("chunk-size-plus", chunked(b"+5\r\nhello\r\n0\r\n\r\n"), V400),
    ("chunk-size-empty", chunked(b"\r\nhello\r\n0\r\n\r\n"), V400),
    ("chunk-size-bare-lf", chunked(b"5\nhello\r\n0\r\n\r\n"), V400),
    ("chunk-data-missing-crlf", chunked(b"5\r\nhelloXX0\r\n\r\n"), V400),
    # --- Host
    ("two-hosts", b"GET /echo HTTP/1.1\r\nHost: a.example\r\nHost: b.example\r\n\r\n", V400),
    ("missing-host-http11", b"GET /echo HTTP/1.1\r\nX-A: b\r\n\r\n", V400),
    # --- request line
    ("http-1.2", b"GET /echo HTTP/1.2\r\n" + H + b"\r\n", {505}),
    ("http-2.0", b"GET /echo HTTP/2.0\r\n" + H + b"\r\n", {505}),
    ("http-version-lowercase", b"GET /echo http/1.1\r\n" + H + b"\r\n", V400),
    ("http-version-garbage", b"GET /echo HTTP/1.1x\r\n" + H + b"\r\n", V400),
    ("target-with-space", b"GET /a b HTTP/1.1\r\n" + H + b"\r\n", V400),
    ("target-with-fragment", b"GET /echo#frag HTTP/1.1\r\n" + H + b"\r\n", V400),
    ("target-non-ascii", b"GET /caf\xc3\xa9 HTTP/1.1\r\n" + H + b"\r\n", V400),
    ("double-space-request-line", b"GET  /echo HTTP/1.1\r\n" + H + b"\r\n", V400),
    ("method-invalid-char", b"G@T /echo HTTP/1.1\r\n" + H + b"\r\n", V400),
    ("connect-method", b"CONNECT test.local:443 HTTP/1.1\r\n" + H + b"\r\n", {400, 405, 501}),
    # --- limits
    ("request-line-over-8k", b"GET /" + b"a" * (9 * KiB) + b" HTTP/1.1\r\n" + H + b"\r\n", {414}),
    ("head-over-32k", b"GET /echo HTTP/1.1\r\n" + H +
     b"".join(b"X-Filler-%03d: " % i + b"v" * 1000 + b"\r\n" for i in range(40)) + b"\r\n",
     {431}),
]

VALID_FIRST = b"GET /echo?first=1 HTTP/1.1\r\nHost: test.local\r\n\r\n"


def assert_rejected(c, resp, expected, name):
    assert resp.status in expected, \
        f"{name}: expected {sorted(expected)}, got {resp.status} {resp.reason}: {resp.body[:300]!r}"
    assert resp.closes(), f"{name}: {resp.status} without Connection: close: {resp.headers}"
    assert c.wait_closed(2.0), f"{name}: the proxy left the connection open after {resp.status}"


def read_rejection(c, name):
    try:
        return c.read_response(timeout=5)
    except ClosedEarly as e:
        raise AssertionError(f"{name}: connection ended with no response ({e.reason}) — "
                             f"an RST here usually means the proxy closed with unread input "
                             f"instead of a lingering close") from None


@pytest.mark.parametrize("name, raw, expected", VECTORS, ids=[v[0] for v in VECTORS])
def test_vector_alone_is_rejected_and_nothing_reaches_upstream(proxy, upstream, name, raw,
                                                               expected):
    with proxy.conn() as c:
        c.send(raw)
        resp = read_rejection(c, name)
        assert_rejected(c, resp, expected, name)
    time.sleep(0.2)  # anything the proxy forwarded in parallel would have arrived by now
    rec = upstream.record
    assert not rec.requests(), f"{name}: the upstream received a request head: {rec.requests()}"
    assert rec.total_received() == 0, \
        f"{name}: the upstream received bytes: {rec.raw()[:400]!r}"


@pytest.mark.parametrize("name, raw, expected", VECTORS, ids=[v[0] for v in VECTORS])
def test_vector_after_valid_request_only_valid_request_reaches_upstream(proxy, upstream, name,
                                                                        raw, expected):
    with proxy.conn() as c:
        c.send(VALID_FIRST + raw)
        first = c.read_response(timeout=5)
        assert first.status == 200, f"{name}: the valid request before the vector got {first}"
        assert first.json()["target"] == "/echo?first=1"
        resp = read_rejection(c, name)
        assert_rejected(c, resp, expected, name)
    time.sleep(0.2)
    rec = upstream.record
    reqs = rec.requests()
    assert [r["target"] for r in reqs] == ["/echo?first=1"], \
        f"{name}: the upstream received {[(r['method'], r['target']) for r in reqs]}"
    assert rec.total_received() == reqs[0]["head_len"], \
        f"{name}: bytes beyond the valid request reached the upstream: " \
        f"{rec.raw()[reqs[0]['head_len']:][:400]!r}"
    assert b"smuggled" not in rec.raw()


def test_smuggled_request_in_cl_te_body_is_never_seen_even_on_new_connections(proxy, upstream):
    """The classic CL.TE desync: whatever the proxy does, /smuggled must never reach the upstream,
    and a following normal request from another client must get its own response."""
    raw = post(H + b"Content-Length: 4\r\nTransfer-Encoding: chunked\r\n",
               b"0\r\n\r\n" + SMUGGLED)
    with proxy.conn() as c:
        c.send(raw)
        try:
            c.read_until_close(3)
        except AssertionError:
            pass
    with proxy.conn() as c2:
        c2.request("GET", "/echo?victim=1")
        r = c2.read_response()
        assert r.status == 200 and r.json()["target"] == "/echo?victim=1"
    assert b"/smuggled" not in upstream.record.raw()


# --- positive controls: strict must not mean wrong. These are valid and must pass through.

CONTROLS = [
    ("te-mixed-case", post(H + b"Transfer-Encoding: Chunked\r\n", b"5\r\nhello\r\n0\r\n\r\n",
                           target=b"/sink"), 5),
    ("chunk-extension", chunked(b"5;name=value\r\nhello\r\n0\r\n\r\n"), 5),
    ("chunk-extension-quoted", chunked(b'5;a="b c"\r\nhello\r\n0\r\n\r\n'), 5),
    ("chunk-size-uppercase-hex-leading-zeros", chunked(b"000A\r\n0123456789\r\n0\r\n\r\n"), 10),
    ("chunked-with-trailer", chunked(b"5\r\nhello\r\n0\r\nX-Trailer: t\r\n\r\n"), 5),
    ("cl-leading-zeros", post(H + b"Content-Length: 005\r\n", b"hello", target=b"/sink"), 5),
    ("tab-in-value", post(H + b"X-Tab: a\tb\r\nContent-Length: 5\r\n", b"hello",
                          target=b"/sink"), 5),
    ("ows-around-value", post(H + b"Content-Length: \t5 \r\n", b"hello", target=b"/sink"), 5),
]


@pytest.mark.parametrize("name, raw, length", CONTROLS, ids=[v[0] for v in CONTROLS])
def test_valid_framing_variants_are_accepted(proxy, upstream, name, raw, length):
    with proxy.conn() as c:
        c.send(raw)
        r = c.read_response()
        assert r.status == 200, f"{name}: {r.status} {r.body[:200]!r}"
        assert r.json()["len"] == length
        # and the connection is still usable
        c.request("GET", "/echo")
        assert c.read_response().status == 200
