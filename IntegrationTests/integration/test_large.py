"""Large bodies are streamed, never buffered: 1 GiB up and 1 GiB down through the proxy with its
peak RSS (VmHWM) under 64 MiB, and back-pressure in both directions when the far side stalls.

The data is a generated stream (upstream.pattern_slice) checked on the fly, never held in memory."""

import socket
import threading
import time

from helpers import GiB, MiB, pattern_slice, pattern_matches

RSS_LIMIT_KIB = 64 * 1024
STEP = 1 * MiB


def send_pattern(c, total, start=0):
    off = start
    while off < total:
        n = min(STEP, total - off)
        c.send(pattern_slice(off, n))
        off += n
    return off


class PatternChecker:
    """A body sink that checks the pattern in place (it accepts views: zero_copy)."""
    zero_copy = True

    def __init__(self):
        self.off = 0
        self.bad_at = None

    def __call__(self, piece):
        if self.bad_at is None and not pattern_matches(self.off, piece):
            self.bad_at = self.off
        self.off += len(piece)


def report(name, nbytes, seconds, proxy):
    hwm = proxy.vm_kib("VmHWM")
    print(f"\n[{name}] {nbytes / MiB:.0f} MiB in {seconds:.2f}s = "
          f"{nbytes / MiB / seconds:.0f} MiB/s; proxy VmHWM {hwm} KiB")
    return hwm


def test_1gib_upload_is_streamed(proxy_factory, upstream):
    p = proxy_factory(upstream, opts={"--max-body-size": "2g", "--upstream-timeout": "30s",
                                      "--client-body-timeout": "30s"})
    total = 1 * GiB
    with p.conn(timeout=60) as c:
        t0 = time.monotonic()
        c.send(b"POST /sink?pattern=1&nosha=1 HTTP/1.1\r\nHost: test.local\r\n"
               b"Content-Length: %d\r\n\r\n" % total)
        send_pattern(c, total)
        r = c.read_response(timeout=60)
        dt = time.monotonic() - t0
    assert r.status == 200, r
    j = r.json()
    assert j["len"] == total
    assert j["pattern_ok"] is True, f"upload corrupted at offset {j['bad_at']}"
    hwm = report("upload 1 GiB", total, dt, p)
    assert hwm < RSS_LIMIT_KIB, f"proxy peak RSS {hwm} KiB: the upload was buffered"


def test_1gib_download_is_streamed(proxy_factory, upstream):
    p = proxy_factory(upstream, opts={"--upstream-timeout": "30s"})
    total = 1 * GiB
    check = PatternChecker()
    with p.conn(timeout=60) as c:
        t0 = time.monotonic()
        c.request("GET", f"/bytes?n={total}")
        r = c.read_response(timeout=120, sink=check)
        dt = time.monotonic() - t0
    assert r.status == 200
    assert r.body_len == total
    assert check.bad_at is None, f"download corrupted at offset {check.bad_at}"
    hwm = report("download 1 GiB", total, dt, p)
    assert hwm < RSS_LIMIT_KIB, f"proxy peak RSS {hwm} KiB: the download was buffered"


def test_download_to_a_stalled_client_applies_back_pressure(proxy_factory, upstream):
    p = proxy_factory(upstream, opts={"--upstream-timeout": "30s"})
    total = 512 * MiB
    with p.conn(timeout=30) as c:
        c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        c.request("GET", f"/bytes?n={total}")
        time.sleep(2.0)  # the client reads nothing; the upstream keeps writing
        rss = p.vm_kib("VmRSS")
        assert rss < RSS_LIMIT_KIB, f"proxy RSS {rss} KiB while the client stalls: no back-pressure"
        check = PatternChecker()
        r = c.read_response(timeout=60, sink=check)
    assert r.body_len == total and check.bad_at is None
    assert p.vm_kib("VmHWM") < RSS_LIMIT_KIB


def test_upload_to_a_stalled_upstream_applies_back_pressure(proxy_factory, upstream):
    p = proxy_factory(upstream, opts={"--max-body-size": "1g", "--upstream-timeout": "30s",
                                      "--client-body-timeout": "30s"})
    total = 512 * MiB
    c = p.conn(timeout=30)
    sent = {"n": 0, "error": None}

    def sender():
        try:
            c.send(b"POST /sink?delay_ms=2500&pattern=1&nosha=1 HTTP/1.1\r\nHost: test.local\r\n"
                   b"Content-Length: %d\r\n\r\n" % total)
            off = 0
            while off < total:
                n = min(STEP, total - off)
                c.send(pattern_slice(off, n))
                off += n
                sent["n"] = off
        except OSError as e:
            sent["error"] = e

    t = threading.Thread(target=sender, daemon=True)
    t.start()
    time.sleep(2.0)  # the upstream reads nothing for 2.5 s
    rss = p.vm_kib("VmRSS")
    in_flight = sent["n"]
    assert rss < RSS_LIMIT_KIB, f"proxy RSS {rss} KiB while the upstream stalls: no back-pressure"
    assert in_flight < 128 * MiB, f"{in_flight} bytes accepted from the client while the " \
                                  f"upstream read nothing"
    t.join(60)
    assert sent["error"] is None, sent["error"]
    r = c.read_response(timeout=60)
    c.close()
    j = r.json()
    assert j["len"] == total and j["pattern_ok"] is True
    assert p.vm_kib("VmHWM") < RSS_LIMIT_KIB


def test_a_large_body_to_a_slow_reader_arrives_whole_and_counted_and_the_connection_goes_on(proxy_factory, upstream):
    """While nothing waits in the proxy's output, sized body bytes go to the client straight from
    the upstream's buffer, and what the socket does not take is copied: with a small receive
    buffer read in bursts, both paths alternate (the test sees only the outcome, not which path
    a byte took). The body must arrive whole, the connection must carry the next request, and
    the access log must count every byte."""
    p = proxy_factory(upstream, opts={"--upstream-timeout": "30s"})
    total = 8 * MiB
    with p.conn(timeout=30) as c:
        c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32 * 1024)
        c.request("GET", f"/bytes?n={total}")
        received = bytearray()
        while True:
            # a burst, then a pause: the proxy meets a full socket over and over
            chunk = c.sock.recv(256 * 1024)
            assert chunk, "closed mid-body"
            received += chunk
            head_end = received.find(b"\r\n\r\n")
            if head_end >= 0 and len(received) - head_end - 4 >= total:
                break
            time.sleep(0.002)
        head, body = bytes(received[:head_end + 4]), memoryview(received)[head_end + 4:]
        assert head.startswith(b"HTTP/1.1 200") and f"content-length: {total}".encode() in head.lower(), head
        assert len(body) == total and pattern_matches(0, body)
        c.buf = bytearray()
        c.request("GET", "/bytes?n=100")
        r = c.read_response()
        assert r.status == 200 and r.body_len == 100
    big = p.wait_access_log(2)[0]
    assert big["bytes_out"] == len(head) + total, (big["bytes_out"], len(head), total)


def test_an_until_close_body_to_a_slow_http10_client_arrives_whole(proxy_factory, upstream):
    p = proxy_factory(upstream, opts={"--upstream-timeout": "30s"})
    n = 3 * MiB
    with socket.create_connection(("127.0.0.1", p.port), timeout=30) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32 * 1024)
        s.sendall(f"GET /until-close?n={n} HTTP/1.0\r\nHost: a\r\n\r\n".encode())
        data = bytearray()
        while chunk := s.recv(256 * 1024):
            data += chunk
            time.sleep(0.001)
    head_end = data.find(b"\r\n\r\n")
    assert data.startswith(b"HTTP/1.1 200") and len(data) - head_end - 4 == n, (bytes(data[:200]), len(data))
