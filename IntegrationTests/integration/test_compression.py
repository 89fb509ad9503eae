"""Response compression (`compression:`) through the real binary: gzip and Brotli decoded by
Python's and curl's own decoders over HTTP/1.1 and HTTP/2, every exclusion, the head's edits
(Vary, weak ETag, no Content-Length), bytes flushed as the upstream sends them, and a 32 MiB
body to a slow reader with the proxy's memory bounded."""

import socket
import subprocess
import time
import zlib

import brotli
import pytest

from upstream import page_text

CONFIG = "compression: { exclude_paths: [/page/private] }\n"


@pytest.fixture
def zproxy(proxy_factory, upstream, tmp_path):
    cfg = tmp_path / "compression.yaml"
    cfg.write_text(CONFIG)
    return proxy_factory(upstream, extra=["--http2-cleartext", "--config", str(cfg)])


def get(proxy, target, accept="gzip", method="GET", version="HTTP/1.1", conn=None):
    headers = [] if accept is None else [("Accept-Encoding", accept)]
    c = conn or proxy.conn()
    try:
        c.request(method, target, headers=headers, version=version)
        return c.read_response(method=method)
    finally:
        if conn is None:
            c.close()


def decode(r):
    coding = r.one("content-encoding")
    if coding == "gzip":
        return zlib.decompress(r.body, 31)
    if coding == "br":
        return brotli.decompress(r.body)
    assert coding is None, coding
    return r.body


@pytest.mark.parametrize("mode", ["length", "chunked", "close"])
@pytest.mark.parametrize("accept,coding", [("gzip", "gzip"), ("br", "br"), ("gzip, deflate, br", "br"),
                                          ("br;q=0.5, gzip", "gzip")])
def test_a_page_is_compressed_with_the_coding_the_client_prefers(zproxy, mode, accept, coding):
    with zproxy.conn() as c:
        r = get(zproxy, f"/page?n=50000&mode={mode}", accept=accept, conn=c)
        assert r.status == 200
        assert r.one("content-encoding") == coding
        assert "accept-encoding" in r.tokens("vary")
        assert r.one("content-length") is None
        assert r.one("transfer-encoding") == "chunked"
        assert decode(r) == page_text(0, 50000)
        assert len(r.body) < 50000 / 5
        # The connection outlives the body, whatever ended it upstream.
        again = get(zproxy, "/page?n=2000", accept=accept, conn=c)
        assert decode(again) == page_text(0, 2000)


def test_curl_decodes_gzip_and_brotli_over_http1_and_http2(zproxy):
    want = page_text(0, 30000)
    for coding in ("gzip", "br"):
        for proto in (["--http1.1"], ["--http2-prior-knowledge"]):
            out = subprocess.run(["curl", "-sS", "--compressed", "-H", f"Accept-Encoding: {coding}", *proto,
                                  "-D", "-", "-o", "/dev/stderr", f"http://127.0.0.1:{zproxy.port}/page?n=30000"],
                                 capture_output=True, timeout=10)
            head = out.stdout.decode().lower()
            assert out.returncode == 0, out.stderr[-300:]
            assert f"content-encoding: {coding}" in head, (proto, head)
            assert "vary: accept-encoding" in head
            assert out.stderr == want, (coding, proto)


@pytest.mark.parametrize("target,accept,method,version,vary", [
    ("/page?n=5000", None, "GET", "HTTP/1.1", True),                          # no Accept-Encoding
    ("/page?n=5000", "gzip;q=0, br;q=0", "GET", "HTTP/1.1", True),            # both refused
    ("/page?n=5000", "deflate", "GET", "HTTP/1.1", True),                     # none we offer
    ("/page?n=5000", "gzip", "HEAD", "HTTP/1.1", False),
    ("/page?n=5000", "gzip", "GET", "HTTP/1.0", False),
    ("/page?n=100", "gzip", "GET", "HTTP/1.1", False),                        # under min_length
    ("/page?n=5000&type=image/png", "gzip", "GET", "HTTP/1.1", False),
    ("/page?n=5000&h=Content-Encoding:x-custom", "gzip", "GET", "HTTP/1.1", False),
    ("/page?n=5000&h=Cache-Control:public,%20no-transform", "gzip", "GET", "HTTP/1.1", False),
    ("/page?n=5000&status=206&h=Content-Range:bytes%200-4999/9000", "gzip", "GET", "HTTP/1.1", False),
    ("/page/private?n=5000", "gzip", "GET", "HTTP/1.1", False),               # exclude_paths
])
def test_what_must_not_be_compressed_goes_as_it_came(zproxy, target, accept, method, version, vary):
    r = get(zproxy, target, accept=accept, method=method, version=version)
    assert r.one("content-encoding") in (None, "x-custom")
    assert ("accept-encoding" in r.tokens("vary")) == vary
    n = int(target.split("n=")[1].split("&")[0])
    assert r.one("content-length") == str(n)
    if method == "GET":
        assert r.body == page_text(0, n)


def test_no_compression_without_the_section(proxy):
    r = get(proxy, "/page?n=5000", accept="gzip, br")
    assert r.one("content-encoding") is None and r.tokens("vary") == []
    assert r.body == page_text(0, 5000)


def test_a_strong_etag_turns_weak_and_vary_is_merged_not_doubled(zproxy):
    r = get(zproxy, '/page?n=5000&h=ETag:%22v1%22&h2=Vary:Cookie')
    assert r.one("content-encoding") == "gzip"
    assert r.one("etag") == 'W/"v1"'
    assert sorted(r.tokens("vary")) == ["accept-encoding", "cookie"]
    r = get(zproxy, '/page?n=5000&h=ETag:W/%22v2%22&h2=Vary:accept-encoding')
    assert r.one("etag") == 'W/"v2"'
    assert r.tokens("vary") == ["accept-encoding"]
    # Sent as it is, the ETag names the bytes sent: it stays strong.
    r = get(zproxy, '/page?n=5000&h=ETag:%22v1%22', accept=None)
    assert r.one("etag") == '"v1"'


def dechunk(buf):
    """The payload of the complete chunks at the start of `buf` (a partial chunked body)."""
    out, i = b"", 0
    while True:
        j = buf.find(b"\r\n", i)
        if j < 0:
            return out
        size = int(buf[i:j], 16)
        if size == 0 or len(buf) < j + 2 + size + 2:
            return out
        out += buf[j + 2:j + 2 + size]
        i = j + 2 + size + 2


def test_what_the_upstream_has_sent_reaches_the_client_before_the_rest(zproxy):
    # Two halves 2 s apart: the first half must be readable without waiting for the second.
    with zproxy.conn() as c:
        c.request("GET", "/page?n=40000&mode=chunked&pieces=2&delay_ms=2000", headers=[("Accept-Encoding", "gzip")])
        r = c.read_head(timeout=5)
        assert r.one("content-encoding") == "gzip"
        deadline = time.monotonic() + 1.5
        while True:
            # (What came with the head is decoded before waiting for more.)
            got = zlib.decompressobj(31).decompress(dechunk(bytes(c.buf)))
            if len(got) >= 20000 or time.monotonic() >= deadline:
                break
            try:
                c._fill(deadline)
            except socket.timeout:
                break
        assert got == page_text(0, 20000), f"{len(got)} bytes readable after 1.5 s; buffer {len(c.buf)}: {bytes(c.buf[:80])!r}"


def test_a_32_mib_body_to_a_slow_reader_keeps_the_proxy_memory_bounded(zproxy):
    # Hex text compresses only about twice: 16 MiB would pile up in the proxy if it read the
    # upstream faster than the client reads.
    get(zproxy, "/page?n=100000")
    before = zproxy.vm_kib("VmHWM")
    total = 32 << 20
    with zproxy.conn(timeout=60) as c:
        c.request("GET", f"/page?n={total}&seed=1&mode=chunked&pieces=64", headers=[("Accept-Encoding", "gzip")])
        time.sleep(2)  # the client reads nothing for a while; the upstream keeps sending
        stalled = zproxy.vm_kib("VmRSS")
        d = zlib.decompressobj(31)
        state = {"n": 0, "hexok": True}

        def sink(piece):
            text = d.decompress(bytes(piece))
            state["n"] += len(text)
            if state["hexok"] and text.strip(b"0123456789abcdef"):
                state["hexok"] = False
            time.sleep(0.0005)

        r = c.read_response(sink=sink, timeout=60)
    state["n"] += len(d.flush())
    assert r.one("content-encoding") == "gzip"
    assert state["n"] == total and state["hexok"]
    grown = zproxy.vm_kib("VmHWM") - before
    assert grown < 8 * 1024, f"peak RSS grew {grown} KiB (RSS while the client read nothing: {stalled} KiB)"


def test_metrics_count_compressed_responses_and_their_bytes(zproxy):
    from test_observability import samples, scrape, value
    get(zproxy, "/page?n=50000", accept="br")
    get(zproxy, "/page?n=50000", accept="gzip")
    get(zproxy, "/page?n=50000", accept="gzip")
    get(zproxy, "/page?n=50000", accept=None)
    s = samples(scrape(zproxy))
    assert value(s, "callback_proxy_compressed_responses_total", coding="gzip") == 2
    assert value(s, "callback_proxy_compressed_responses_total", coding="br") == 1
    assert value(s, "callback_proxy_compression_bytes_total", coding="gzip", side="in") == 100000
    out = value(s, "callback_proxy_compression_bytes_total", coding="gzip", side="out")
    assert 0 < out < 100000 / 5


def test_past_max_memory_brotli_falls_back_to_gzip_then_to_none(proxy_factory, upstream, tmp_path):
    """`compression.max_memory: 1m`: a Brotli encoder's state (about 2 MiB) never fits, a gzip
    one's (about 270 KiB) three times; a slow reader holds its encoder until its response ends."""
    from test_observability import samples, scrape, value
    cfg = tmp_path / "compression.yaml"
    cfg.write_text("compression: { max_memory: 1m }\n")
    p = proxy_factory(upstream, extra=["--config", str(cfg)])
    r = get(p, "/page?n=50000", accept="br, gzip")
    assert r.one("content-encoding") == "gzip" and decode(r) == page_text(0, 50000)
    r = get(p, "/page?n=50000", accept="br")
    assert r.one("content-encoding") is None and "accept-encoding" in r.tokens("vary")
    assert r.body == page_text(0, 50000)
    # Stalled readers of a long page each hold a gzip encoder: three fit, the fourth goes plain.
    stalled = []
    try:
        for _ in range(4):
            s = socket.create_connection(("127.0.0.1", p.port))
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.sendall(b"GET /page?n=30000000&seed=1 HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n")
            stalled.append(s)
            time.sleep(0.2)
        heads = []
        for s in stalled:
            s.settimeout(5)
            data = b""
            while b"\r\n\r\n" not in data:
                data += s.recv(4096)
            heads.append(data.split(b"\r\n\r\n")[0].lower())
        assert [b"content-encoding: gzip" in h for h in heads] == [True, True, True, False], heads
    finally:
        for s in stalled:
            s.close()
    s = samples(scrape(p))
    assert value(s, "callback_proxy_compression_over_memory_total", coding="br") == 2
    assert value(s, "callback_proxy_compression_over_memory_total", coding="gzip") == 1
    # The closed connections gave their encoders back: compression works again.
    deadline = time.monotonic() + 3
    while get(p, "/page?n=50000").one("content-encoding") != "gzip" and time.monotonic() < deadline:
        time.sleep(0.1)
    assert get(p, "/page?n=50000").one("content-encoding") == "gzip"
