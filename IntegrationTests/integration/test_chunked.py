"""Chunked transfer coding both ways: uploads of any chunk shape arrive intact and re-framed
validly upstream; chunked responses arrive intact; HTTP/1.0 clients never see chunked."""

import hashlib
import random
import time

from helpers import MiB, pattern_slice, pattern_matches


def chunk_stream(sizes, ext=False):
    out, off = [], 0
    for n in sizes:
        out.append(b"%x%s\r\n" % (n, b";x=y" if ext else b"") + pattern_slice(off, n).tobytes()
                   + b"\r\n")
        off += n
    out.append(b"0\r\n\r\n")
    return b"".join(out), off


def test_chunked_upload_of_varied_chunk_sizes(proxy, upstream):
    rnd = random.Random(7)
    sizes = [1, 2, 15, 16, 17, 255, 4096, 65535, 65536, 100_000] + \
        [rnd.randint(1, 50_000) for _ in range(50)]
    body, total = chunk_stream(sizes, ext=True)
    with proxy.conn() as c:
        c.send(b"POST /sink?pattern=1 HTTP/1.1\r\nHost: test.local\r\n"
               b"Transfer-Encoding: chunked\r\n\r\n" + body)
        r = c.read_response()
    assert r.status == 200, r
    j = r.json()
    assert j["len"] == total
    assert j["pattern_ok"] is True, f"body corrupted at offset {j['bad_at']}"


def test_chunked_upload_sent_in_small_pieces(proxy):
    body, total = chunk_stream([3, 1000, 7, 20000, 1])
    with proxy.conn() as c:
        c.send(b"POST /sink?pattern=1 HTTP/1.1\r\nHost: test.local\r\n"
               b"Transfer-Encoding: chunked\r\n\r\n")
        for i in range(0, len(body), 997):
            c.send(body[i:i + 997])
        j = c.read_response().json()
    assert j["len"] == total and j["pattern_ok"] is True


def test_chunked_upload_with_trailers_then_next_request(proxy):
    with proxy.conn() as c:
        c.send(b"POST /sink HTTP/1.1\r\nHost: test.local\r\nTransfer-Encoding: chunked\r\n\r\n"
               b"5\r\nhello\r\n0\r\nX-Trailer-One: 1\r\nX-Trailer-Two: 2\r\n\r\n"
               b"GET /echo?after-trailers=1 HTTP/1.1\r\nHost: test.local\r\n\r\n")
        j = c.read_response().json()
        assert j["len"] == 5 and j["sha256"] == hashlib.sha256(b"hello").hexdigest()
        assert c.read_response().json()["target"] == "/echo?after-trailers=1"


def test_empty_chunked_upload(proxy):
    with proxy.conn() as c:
        c.send(b"POST /sink HTTP/1.1\r\nHost: test.local\r\nTransfer-Encoding: chunked\r\n\r\n"
               b"0\r\n\r\n")
        j = c.read_response().json()
    assert j["len"] == 0


def test_chunked_upload_of_32_mib(proxy):
    sizes = [1 * MiB - 3] * 32 + [96]
    with proxy.conn(timeout=30) as c:
        c.send(b"POST /sink?pattern=1 HTTP/1.1\r\nHost: test.local\r\n"
               b"Transfer-Encoding: chunked\r\n\r\n")
        off = 0
        for n in sizes:
            c.send(b"%x\r\n" % n)
            c.send(pattern_slice(off, n))
            c.send(b"\r\n")
            off += n
        c.send(b"0\r\n\r\n")
        j = c.read_response(timeout=30).json()
    assert j["len"] == off and j["pattern_ok"] is True


def test_chunked_response_is_relayed_intact(proxy):
    with proxy.conn() as c:
        c.request("GET", "/chunked?n=200&size=999")
        r = c.read_response()
        assert r.status == 200
        assert r.body_len == 200 * 999
        assert pattern_matches(0, r.body)
        c.request("GET", "/echo")
        assert c.read_response().status == 200


def test_chunked_response_with_trailers_is_relayed_intact(proxy):
    with proxy.conn() as c:
        c.request("GET", "/chunked?n=3&size=10&trailer=1")
        r = c.read_response()
        assert r.body == pattern_slice(0, 30).tobytes()
        c.request("GET", "/echo")
        assert c.read_response().status == 200


def test_slow_chunked_response_is_streamed_not_buffered(proxy):
    with proxy.conn() as c:
        c.request("GET", "/chunked?n=4&size=10&delay_ms=400")
        t0 = time.monotonic()
        r = c.read_head()
        # buffering the body would take >= 1.6 s (4 chunks, 400 ms apart)
        assert time.monotonic() - t0 < 1.0, "response head held back until the body finished"
        assert r.status == 200


def test_http10_client_gets_chunked_response_unchunked(proxy):
    with proxy.conn() as c:
        c.send(b"GET /chunked?n=50&size=1000 HTTP/1.0\r\nHost: test.local\r\n\r\n")
        r = c.read_response()
        assert r.status == 200
        assert r.header("transfer-encoding") == []
        assert r.body == pattern_slice(0, 50_000).tobytes()
        assert c.wait_closed(2)


def test_until_close_response_is_rechunked_for_an_http11_client_whose_connection_stays(proxy):
    with proxy.conn() as c:
        c.request("GET", "/until-close?n=300000")
        r = c.read_response()
        assert r.status == 200
        assert r.body == pattern_slice(0, 300_000).tobytes()
        assert r.framing == "chunked", r.framing
        assert not r.closes()
        # the upstream's close ended its body, not the client's connection
        c.request("GET", "/echo")
        assert c.read_response().status == 200


def test_until_close_response_to_an_http10_client_ends_with_the_close(proxy):
    with proxy.conn() as c:
        c.send(b"GET /until-close?n=5000 HTTP/1.0\r\nHost: a\r\n\r\n")
        r = c.read_response()
        assert r.status == 200 and r.framing == "close"
        assert r.body == pattern_slice(0, 5000).tobytes()
        assert c.wait_closed(2)


def test_an_until_close_body_cut_by_a_reset_is_not_passed_off_as_complete(proxy):
    with proxy.conn() as c:
        c.request("GET", "/until-close?n=20000&reset=1")
        head = c.read_head()
        assert head.status == 200
        data = c.read_until_close(timeout=3)
    # the chunks that arrived, but never the last chunk: the client knows the body is cut
    assert not data.endswith(b"0\r\n\r\n"), data[-40:]
