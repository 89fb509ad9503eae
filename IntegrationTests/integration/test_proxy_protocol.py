"""`--proxy-protocol`: behind a layer-4 load balancer every connection starts with a PROXY
protocol header (v1 text or v2 binary) naming the client. Its source address becomes the
client's (X-Forwarded-For, access log); a connection without a valid header is closed before
anything reaches the upstream; the header comes before TLS on a TLS listener; the internal
listener never expects one."""

import json
import socket
import ssl
import struct
import time

import pytest

from helpers import HTTPConn, http_get_status
from test_tls import client_context, pki, tls_files  # noqa: F401 (fixtures: the test CA and server files)

V2_SIGNATURE = b"\r\n\r\n\x00\r\nQUIT\n"
REQUEST = b"GET /echo HTTP/1.1\r\nHost: site.example\r\n\r\n"


def v1(src="203.0.113.9", dst="10.0.0.1", family="TCP4"):
    return f"PROXY {family} {src} {dst} 51234 443\r\n".encode()


def v2_tcp4(src="203.0.113.9", dst="10.0.0.1", command=0x21, tlv=b""):
    payload = socket.inet_aton(src) + socket.inet_aton(dst) + struct.pack("!HH", 51234, 443) + tlv
    return V2_SIGNATURE + bytes([command, 0x11]) + struct.pack("!H", len(payload)) + payload


def v2_tcp6(src, dst="2001:db8::1"):
    payload = socket.inet_pton(socket.AF_INET6, src) + socket.inet_pton(socket.AF_INET6, dst) + struct.pack("!HH", 1, 2)
    return V2_SIGNATURE + bytes([0x21, 0x21]) + struct.pack("!H", len(payload)) + payload


def v2_local():
    return V2_SIGNATURE + bytes([0x20, 0x00, 0x00, 0x00])


def forwarded_for(response):
    return [v for k, v in response.json()["headers"] if k.lower() == "x-forwarded-for"]


@pytest.fixture
def pp_proxy(proxy_factory, upstream):
    return proxy_factory(upstream, extra=["--proxy-protocol"])


@pytest.mark.parametrize("header, client", [
    (v1(), "203.0.113.9"),
    (v1("2001:db8::7", "2001:db8::1", "TCP6"), "2001:db8::7"),
    (v2_tcp4(), "203.0.113.9"),
    (v2_tcp4(tlv=b"\xea\x00\x03abc"), "203.0.113.9"),
    (v2_tcp6("2001:db8::7"), "2001:db8::7"),
    (v2_local(), "127.0.0.1"),
    (b"PROXY UNKNOWN\r\n", "127.0.0.1"),
])
def test_the_headers_source_is_the_client(pp_proxy, header, client):
    with HTTPConn(pp_proxy.port) as c:
        c.send(header + REQUEST)
        r = c.read_response()
        assert r.status == 200
        assert forwarded_for(r) == [client]
        # Keep-alive: the header came once, the next request on the connection needs none.
        c.send(REQUEST)
        r = c.read_response()
        assert r.status == 200 and forwarded_for(r) == [client]
    lines = pp_proxy.wait_access_log(2)
    assert {l["remote"] for l in lines} == {client}


def test_a_header_arriving_a_byte_at_a_time_works(pp_proxy):
    with HTTPConn(pp_proxy.port) as c:
        for b in v1() + REQUEST[:10]:
            c.send(bytes([b]))
            time.sleep(0.002)
        c.send(REQUEST[10:])
        r = c.read_response()
    assert r.status == 200 and forwarded_for(r) == ["203.0.113.9"]


@pytest.mark.parametrize("opening", [
    REQUEST,                                                  # no header: a direct client
    b"PROXY TCP4 203.0.113.9 10.0.0.1 51234\r\n" + REQUEST,   # a field missing
    b"PROXY TCP4 999.0.113.9 10.0.0.1 1 2\r\n" + REQUEST,     # not an address
    b"PROXY TCP4 1.2.3.4\x00junk 5.6.7.8 1 2\r\n" + REQUEST,  # a NUL inside (it once read as 1.2.3.4)
    V2_SIGNATURE[:8] + b"XXXX" + REQUEST,                     # broken v2 signature
])
def test_a_connection_without_a_valid_header_is_closed_before_the_upstream(pp_proxy, upstream, opening):
    with HTTPConn(pp_proxy.port) as c:
        c.send(opening)
        assert c.wait_closed(3), "the connection stayed open"
        assert c.buf == b"", "nothing is answered: the peer does not speak the protocol we expect"
    assert upstream.record.total_received() == 0
    line = next(json.loads(l) for l in pp_proxy.stderr_text().splitlines() if "bad PROXY protocol header" in l)
    assert line["peer"] == "127.0.0.1" and line["reason"]


def test_a_header_that_never_completes_is_dropped_at_the_header_timeout(proxy_factory, upstream):
    p = proxy_factory(upstream, extra=["--proxy-protocol"], opts={"--client-header-timeout": "500ms"})
    with HTTPConn(p.port) as c:
        c.send(b"PROXY TCP4 203.0.113.9")
        t0 = time.monotonic()
        assert c.wait_closed(3)
        assert 0.3 < time.monotonic() - t0 < 2.5
    assert upstream.record.total_received() == 0


def test_only_trusted_balancers_may_connect_when_some_are_listed(proxy_factory, upstream):
    p = proxy_factory(upstream, extra=["--proxy-protocol", "--trusted-proxy", "10.9.9.9/32"])
    with HTTPConn(p.port) as c:
        c.send(v1() + REQUEST)
        assert c.wait_closed(3) and c.buf == b""
    q = proxy_factory(upstream, extra=["--proxy-protocol", "--trusted-proxy", "127.0.0.1/32"])
    with HTTPConn(q.port) as c:
        c.send(v1() + REQUEST)
        assert forwarded_for(c.read_response()) == ["203.0.113.9"]
    assert upstream.record.total_received() > 0


def test_the_internal_listener_needs_no_header(pp_proxy):
    assert http_get_status(pp_proxy.internal_port, "/healthz")[0] == 200


def test_the_header_comes_before_tls_on_a_tls_listener(proxy_factory, upstream, pki, tls_files):
    cert, key = tls_files
    p = proxy_factory(upstream, extra=["--proxy-protocol", "--tls-cert", cert, "--tls-key", key])
    raw = socket.create_connection(("127.0.0.1", p.port), timeout=5)
    raw.sendall(v2_tcp4("198.51.100.4"))
    with client_context(pki).wrap_socket(raw, server_hostname="default.test") as s:
        s.sendall(REQUEST)
        data = b""
        while b"\r\n\r\n" not in data or not data.rstrip().endswith(b"}"):
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    head, body = data.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 200")
    headers = json.loads(body)["headers"]
    assert [v for k, v in headers if k.lower() == "x-forwarded-for"] == ["198.51.100.4"]
    assert [v for k, v in headers if k.lower() == "x-forwarded-proto"] == ["https"]
