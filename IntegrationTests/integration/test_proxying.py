"""Plain forwarding: what the upstream receives and what the client gets back — Host, targets,
HTTP/1.0 clients, hop-by-hop removal, X-Forwarded-*, header fidelity, unix-socket upstreams."""

import hashlib
import re
import time

import pytest

from helpers import HTTPConn, KiB, http_get_status


def hdr(echo, name):
    """All values of a header as the upstream received it, in order."""
    return [v for n, v in echo["headers"] if n.lower() == name.lower()]


def test_healthz_on_internal_listener(proxy):
    status, body = http_get_status(proxy.internal_port, "/healthz")
    assert status == 200 and body.strip() == b"ok"


def test_get_round_trip_and_query_is_forwarded_verbatim(proxy, upstream):
    with proxy.conn() as c:
        c.request("GET", "/echo/a%2Fb?x=1&y=%20z&empty=&x=2")
        r = c.read_response()
    assert r.status == 200
    e = r.json()
    assert e["method"] == "GET"
    assert e["target"] == "/echo/a%2Fb?x=1&y=%20z&empty=&x=2"
    assert e["version"] == "HTTP/1.1"
    assert e["body_len"] == 0
    assert r.one("content-type") == "application/json"


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE", "OPTIONS"])
def test_methods_and_bodies_are_forwarded(proxy, method):
    body = b"method body \x00\xff" * 100
    with proxy.conn() as c:
        c.request(method, "/echo", body=body)
        e = c.read_response().json()
    assert e["method"] == method
    assert e["body_len"] == len(body)
    assert e["body_sha256"] == hashlib.sha256(body).hexdigest()


def test_host_is_preserved_exactly(proxy):
    with proxy.conn() as c:
        c.request("GET", "/echo", host="App.Example.com:8443")
        e = c.read_response().json()
    assert hdr(e, "host") == ["App.Example.com:8443"]


def test_absolute_form_target_becomes_origin_form_and_its_authority_is_the_host(proxy):
    with proxy.conn() as c:
        c.send(b"GET http://abs.example:8080/echo?q=1 HTTP/1.1\r\nHost: other.example\r\n\r\n")
        r = c.read_response()
    assert r.status == 200, r
    e = r.json()
    assert e["target"] == "/echo?q=1"
    # RFC 9112 §3.2.2: with absolute-form the target's authority replaces the Host field
    assert hdr(e, "host") == ["abs.example:8080"]


def test_http10_client_without_host_gets_a_closed_non_chunked_response(proxy, upstream):
    with proxy.conn() as c:
        c.send(b"GET /chunked?n=4&size=100 HTTP/1.0\r\n\r\n")
        r = c.read_response()
        assert r.status == 200
        assert "chunked" not in r.tokens("transfer-encoding"), \
            "chunked sent to an HTTP/1.0 client"
        assert len(r.body) == 400
        assert c.wait_closed(2), "HTTP/1.0 connection without keep-alive left open"
    req = upstream.record.requests()[0]
    assert req["version"] == "HTTP/1.1"  # the proxy speaks its own version upstream


def test_http10_echo_forwarded_with_a_host(proxy):
    with proxy.conn() as c:
        c.send(b"GET /echo HTTP/1.0\r\nHost: ten.example\r\n\r\n")
        r = c.read_response()
    assert r.status == 200
    e = r.json()
    assert e["version"] == "HTTP/1.1"
    assert hdr(e, "host") == ["ten.example"]


def test_http10_keepalive_is_honoured_or_refused_consistently(proxy):
    with proxy.conn() as c:
        c.send(b"GET /echo HTTP/1.0\r\nHost: ten.example\r\nConnection: keep-alive\r\n\r\n")
        r = c.read_response()
        assert r.status == 200
        if "keep-alive" in r.tokens("connection"):
            c.send(b"GET /echo?second=1 HTTP/1.0\r\nHost: ten.example\r\n"
                   b"Connection: keep-alive\r\n\r\n")
            assert c.read_response().json()["target"] == "/echo?second=1"
        else:
            assert c.wait_closed(2), "no keep-alive promised to the 1.0 client, yet left open"


def test_hop_by_hop_request_headers_are_removed(proxy):
    with proxy.conn() as c:
        c.request("GET", "/echo", [
            ("Connection", "keep-alive, X-Secret-Hop, x-other-hop"),
            ("Keep-Alive", "timeout=5"),
            ("Proxy-Connection", "keep-alive"),
            ("TE", "gzip"),
            ("Upgrade", "h2c"),
            ("X-Secret-Hop", "must not pass"),
            ("X-Other-Hop", "must not pass either"),
            ("X-End-To-End", "kept"),
        ])
        r = c.read_response()
    e = r.json()
    names = [n.lower() for n, _ in e["headers"]]
    for gone in ("keep-alive", "proxy-connection", "x-secret-hop", "x-other-hop"):
        assert gone not in names, f"{gone} reached the upstream: {e['headers']}"
    assert "upgrade" not in names, f"non-websocket Upgrade forwarded: {e['headers']}"
    assert hdr(e, "te") in ([], ["trailers"]), f"TE forwarded: {hdr(e, 'te')}"
    for v in hdr(e, "connection"):
        toks = {t.strip().lower() for t in v.split(",")}
        assert not toks & {"x-secret-hop", "x-other-hop"}, v
    assert hdr(e, "x-end-to-end") == ["kept"]


def test_hop_by_hop_response_headers_are_removed(proxy):
    with proxy.conn() as c:
        c.request("GET", "/hop")
        r = c.read_response()
        assert r.status == 200 and r.body == b"hop\n"
        assert r.header("x-up-hop") == [], f"header listed in upstream Connection passed: {r}"
        assert "timeout=77" not in r.header("keep-alive")
        assert r.header("proxy-connection") == []
        assert "x-up-hop" not in r.tokens("connection")
        assert r.header("x-up-keep") == ["yes"]
        # the client connection is still fine
        c.request("GET", "/echo")
        assert c.read_response().status == 200


def test_end_to_end_headers_keep_order_and_duplicates(proxy):
    with proxy.conn() as c:
        c.request("GET", "/echo", [("X-Dup", "a"), ("X-Middle", "m"), ("X-Dup", "b"),
                                   ("Cookie", "a=1"), ("Cookie", "b=2"),
                                   ("X-Empty", "")])
        e = c.read_response().json()
    assert ", ".join(hdr(e, "x-dup")) == "a, b"
    assert hdr(e, "x-middle") == ["m"]
    assert "; ".join(hdr(e, "cookie")) == "a=1; b=2"
    assert hdr(e, "x-empty") == [""]


def test_obs_text_in_a_header_value_is_forwarded_as_opaque_bytes(proxy, upstream):
    # RFC 9110 §5.5: field values may carry obs-text (0x80-0xFF); recipients treat it as opaque
    with proxy.conn() as c:
        c.send(b"GET /echo HTTP/1.1\r\nHost: test.local\r\nX-Utf8: caf\xc3\xa9\r\n\r\n")
        r = c.read_response()
    assert r.status == 200, r
    assert b"X-Utf8: caf\xc3\xa9\r\n" in upstream.record.raw()


def test_set_cookie_headers_are_never_combined(proxy):
    with proxy.conn() as c:
        c.request("GET", "/set-cookies")
        r = c.read_response()
    assert r.header("set-cookie") == ["a=1; Path=/; HttpOnly", "b=2, c=3; Path=/"]


def test_large_header_value_under_the_head_limit_passes_intact(proxy):
    cookie = "s=" + "x" * (16 * KiB)
    with proxy.conn() as c:
        c.request("GET", "/echo", [("Cookie", cookie)])
        r = c.read_response()
    assert r.status == 200
    assert hdr(r.json(), "cookie") == [cookie]


def test_upstream_status_codes_are_passed_through(proxy):
    with proxy.conn() as c:
        for code in (201, 301, 404, 418, 500, 503):
            c.request("GET", f"/status/{code}")
            r = c.read_response()
            assert r.status == code
            assert r.body == f"status {code}\n".encode()


# --- X-Forwarded-*

def test_x_forwarded_from_untrusted_client_are_replaced(proxy):
    with HTTPConn(proxy.port, source="127.0.0.2") as c:
        c.request("GET", "/echo", [("X-Forwarded-For", "6.6.6.6"),
                                   ("X-Forwarded-Proto", "https"),
                                   ("X-Forwarded-Host", "evil.example"),
                                   ("x-forwarded-for", "7.7.7.7")], host="site.example")
        e = c.read_response().json()
    assert hdr(e, "x-forwarded-for") == ["127.0.0.2"]
    assert hdr(e, "x-forwarded-proto") == ["http"]
    assert hdr(e, "x-forwarded-host") == ["site.example"]


def test_x_forwarded_added_when_client_sent_none(proxy):
    with proxy.conn() as c:
        c.request("GET", "/echo", host="plain.example")
        e = c.read_response().json()
    assert hdr(e, "x-forwarded-for") == ["127.0.0.1"]
    assert hdr(e, "x-forwarded-proto") == ["http"]
    assert hdr(e, "x-forwarded-host") == ["plain.example"]


def test_x_forwarded_from_trusted_proxy_are_appended(proxy_factory, upstream):
    p = proxy_factory(upstream, extra=["--trusted-proxy", "127.0.0.0/30"])
    with HTTPConn(p.port, source="127.0.0.2") as c:
        c.request("GET", "/echo", [("X-Forwarded-For", "203.0.113.9, 10.0.0.1"),
                                   ("X-Forwarded-Proto", "https"),
                                   ("X-Forwarded-Host", "public.example")], host="inner.example")
        e = c.read_response().json()
    assert ", ".join(hdr(e, "x-forwarded-for")) == "203.0.113.9, 10.0.0.1, 127.0.0.2"
    proto = ", ".join(hdr(e, "x-forwarded-proto")).split(",")[0].strip()
    host = ", ".join(hdr(e, "x-forwarded-host")).split(",")[0].strip()
    assert proto == "https", hdr(e, "x-forwarded-proto")
    assert host == "public.example", hdr(e, "x-forwarded-host")


# The `_` spellings of the forwarding fields, in every case: CGI, Rack and WSGI fold `_` into
# `-`, so each would reach the app as the proxy's own field. Shared with test_session/test_relay.
UNDERSCORE_SPOOFS = [
    ("X_Forwarded_For", "6.6.6.1"), ("x_forwarded_for", "6.6.6.2"), ("X_FORWARDED_FOR", "6.6.6.3"),
    ("x-forwarded_for", "6.6.6.4"), ("X_Forwarded_Host", "evil1.example"), ("x_forwarded_host", "evil2.example"),
    ("X_FORWARDED_PROTO", "https-spoofed"), ("X_Forwarded_Proto", "https-spoofed2"), ("X_Real_IP", "6.6.6.5"),
    ("x_forwarded_port", "4433"), ("X_Forwarded_Ssl", "on-spoofed"), ("X_Request_Id", "spoofed-request-id"),
]


def spoofed(echo):
    """What of UNDERSCORE_SPOOFS reached the upstream, by name or by value."""
    values = {v for _, v in UNDERSCORE_SPOOFS}
    return [(n, v) for n, v in echo["headers"] if "_" in n or any(x in v for x in values)]


@pytest.mark.parametrize("extra", [[], ["--allow-underscores-in-headers"], ["--trusted-proxy", "127.0.0.0/8"],
                                   ["--allow-underscores-in-headers", "--trusted-proxy", "127.0.0.0/8"]])
def test_underscore_spellings_of_forwarding_headers_never_reach_the_upstream(proxy_factory, upstream, extra):
    p = proxy_factory(upstream, extra=extra)
    with HTTPConn(p.port, source="127.0.0.2") as c:
        c.request("GET", "/echo", UNDERSCORE_SPOOFS, host="site.example")
        e = c.read_response().json()
    assert spoofed(e) == []
    assert hdr(e, "x-forwarded-for") == ["127.0.0.2"]
    assert hdr(e, "x-forwarded-host") == ["site.example"]
    assert hdr(e, "x-forwarded-proto") == ["http"]


def test_other_underscore_headers_pass_only_when_allowed(proxy_factory, upstream):
    fields = [("My_Header", "one"), ("x_custom", "two"), ("Plain-Header", "three")]
    for extra, expected in [([], ["three"]), (["--allow-underscores-in-headers"], ["one", "two", "three"])]:
        p = proxy_factory(upstream, extra=extra)
        with p.conn() as c:
            c.request("GET", "/echo", fields)
            e = c.read_response().json()
        assert [v for n, v in e["headers"] if v in ("one", "two", "three")] == expected, extra


def test_forwarding_fields_the_proxy_does_not_set_pass_only_from_trusted_peers(proxy_factory, upstream):
    fields = [("Forwarded", "for=6.6.6.6;host=evil.example;proto=https"), ("X-Real-IP", "6.6.6.7"),
              ("X-Forwarded-Port", "443"), ("X-Forwarded-Ssl", "on"), ("X-Forwarded-Scheme", "https"),
              ("X-Forwarded-Prefix", "/evil")]
    p = proxy_factory(upstream, extra=["--trusted-proxy", "127.0.0.1/32"])
    with HTTPConn(p.port, source="127.0.0.2") as c:
        c.request("GET", "/echo", fields)
        untrusted = c.read_response().json()
    with HTTPConn(p.port, source="127.0.0.1") as c:
        c.request("GET", "/echo", fields)
        trusted = c.read_response().json()
    names = [n for n, _ in fields]
    assert [n for n, _ in untrusted["headers"] if n in names] == []
    assert [n for n, _ in trusted["headers"] if n in names] == names


def test_trusted_cidr_does_not_cover_other_peers(proxy_factory, upstream):
    p = proxy_factory(upstream, extra=["--trusted-proxy", "127.0.0.1/32"])
    with HTTPConn(p.port, source="127.0.0.2") as c:
        c.request("GET", "/echo", [("X-Forwarded-For", "203.0.113.9")])
        e = c.read_response().json()
    assert hdr(e, "x-forwarded-for") == ["127.0.0.2"]
    with HTTPConn(p.port, source="127.0.0.1") as c:
        c.request("GET", "/echo", [("X-Forwarded-For", "203.0.113.9")])
        e = c.read_response().json()
    assert ", ".join(hdr(e, "x-forwarded-for")) == "203.0.113.9, 127.0.0.1"


def test_unix_socket_upstream(proxy_factory, upstream_factory):
    u = upstream_factory(unix=True)
    p = proxy_factory(u)
    with p.conn() as c:
        c.request("POST", "/echo?unix=1", body=b"over a unix socket")
        r = c.read_response()
        assert r.status == 200
        e = r.json()
        assert e["target"] == "/echo?unix=1" and e["body_len"] == 18
        c.request("GET", "/bytes?n=100000")
        r = c.read_response()
        assert r.body_len == 100000


def test_the_proxys_own_responses_carry_a_date(proxy):
    """RFC 9110 §6.6.1: a server with a clock sends Date — on the responses the proxy writes
    itself too (errors, local answers), in IMF-fixdate."""
    import email.utils
    with proxy.conn() as c:
        c.send(b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n")
        r = c.read_response()
    assert r.status == 400
    date = r.one("date")
    assert re.fullmatch(r"(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d\d (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) "
                        r"\d{4} \d\d:\d\d:\d\d GMT", date), date
    assert abs(email.utils.parsedate_to_datetime(date).timestamp() - time.time()) < 5
