"""Large bodies are spliced through a pipe (`splice:`), responses from the upstream's socket to
the client's and request bodies the other way: every byte arrives in order, a slow reader holds
the sender back, a body cut on either side closes its pipe, and nothing that needs the bytes in
memory (TLS, compression, small bodies, splice off, no pipe free) is spliced (TLS and
compression: BodySpliceTests). The uploads of test_large.py are spliced too."""

import os
import socket
import time
import zlib

import pytest

from helpers import ClosedEarly, MiB, pattern_matches, pattern_slice
from test_large import PatternChecker, send_pattern
from test_observability import samples, scrape, value


def metrics(p):
    s = samples(scrape(p))
    counted = "callback_proxy_spliced_responses_total"
    return {"spliced": value(s, counted, outcome="spliced"), "no_pipe": value(s, counted, outcome="no_pipe"),
            "splice_pipes": value(s, "callback_proxy_splice_pipes")}


def open_fds(p):
    """The proxy's open sockets and pipes, counted apart: (sockets, pipe descriptors)."""
    sockets = pipes = 0
    for fd in os.listdir(f"/proc/{p.pid}/fd"):
        try:
            target = os.readlink(f"/proc/{p.pid}/fd/{fd}")
        except OSError:
            continue
        sockets += target.startswith("socket:")
        pipes += target.startswith("pipe:")
    return sockets, pipes


def assert_nothing_left_open(p, sockets_before):
    """The sockets are back to what they were, and at most one empty pipe is kept (one body
    at a time on one loop: the pool holds no more)."""
    deadline = time.monotonic() + 5
    while open_fds(p)[0] > sockets_before and time.monotonic() < deadline:
        time.sleep(0.05)
    sockets, pipes = open_fds(p)
    assert sockets <= sockets_before, f"{sockets - sockets_before} sockets of cut bodies stayed open"
    assert pipes <= 2, f"{pipes // 2} pipes open: the pipes of cut bodies stayed open"


def leave_repeatedly(proxy, leave_once, times=10):
    """A client that leaves mid-body, `times` over, one at a time (its access line is written
    when the proxy has let it go): the pool then keeps the one empty pipe, and any other pipe
    or socket still open is a leak. Returns the access lines."""
    leave_once()
    proxy.wait_access_log(1)
    sockets, _ = open_fds(proxy)
    for i in range(times):
        leave_once()
        proxy.wait_access_log(i + 2)
    assert_nothing_left_open(proxy, sockets)
    return proxy.wait_access_log(times + 1)


def with_config(proxy_factory, upstream, tmp_path, text, opts=None):
    cfg = tmp_path / "splice.yaml"
    cfg.write_text(text)
    return proxy_factory(upstream, opts=opts, extra=["--config", str(cfg)])


def get_checked(c, n, extra=""):
    c.request("GET", f"/bytes?n={n}{extra}")
    check = PatternChecker()
    r = c.read_response(sink=check, timeout=30)
    assert r.status == 200, r
    assert check.off == n and check.bad_at is None, f"{check.off} of {n} bytes, bad at {check.bad_at}"
    return r


def test_a_large_response_is_spliced_whole_and_the_connection_goes_on(proxy):
    before = metrics(proxy)
    with proxy.conn(timeout=30) as c:
        get_checked(c, 5 * MiB + 123)
        get_checked(c, 3 * MiB)
        # The connection is in step after the pipe: a small request and its answer follow.
        c.request("GET", "/echo?after=1")
        r = c.read_response()
        assert r.status == 200 and r.json()["target"] == "/echo?after=1"
    after = metrics(proxy)
    assert after["spliced"] - before["spliced"] == 2, after
    assert after["splice_pipes"] >= 1, "the empty pipe is kept for the next body"
    lines = proxy.wait_access_log(3)
    big = [l for l in lines if l["path"].startswith("/bytes")]
    assert [l["bytes_out"] >= n for l, n in zip(big, (5 * MiB + 123, 3 * MiB))] == [True, True], big
    assert all("error" not in l for l in lines), lines


def test_a_unix_socket_upstream_is_spliced_too(proxy_factory, upstream_factory):
    u = upstream_factory(unix=True)
    p = proxy_factory(upstream_url=u.url)
    with p.conn(timeout=30) as c:
        get_checked(c, 4 * MiB + 7)
    assert metrics(p)["spliced"] == 1


def test_pipelined_requests_behind_a_spliced_body_are_answered_in_order(proxy):
    with proxy.conn(timeout=30) as c:
        c.send(b"GET /bytes?n=2097152 HTTP/1.1\r\nHost: t\r\n\r\n"
               b"GET /echo?second=1 HTTP/1.1\r\nHost: t\r\n\r\n"
               b"GET /bytes?n=1048576 HTTP/1.1\r\nHost: t\r\n\r\n")
        for n in (2 * MiB, None, 1 * MiB):
            if n is None:
                r = c.read_response()
                assert r.json()["target"] == "/echo?second=1"
                continue
            check = PatternChecker()
            r = c.read_response(sink=check, timeout=30)
            assert r.status == 200 and check.off == n and check.bad_at is None


def test_small_bodies_and_splice_off_are_copied(proxy_factory, upstream, tmp_path):
    p = with_config(proxy_factory, upstream, tmp_path, "splice: { min_size: 256k }\n")
    with p.conn(timeout=30) as c:
        get_checked(c, 200 * 1024)
    assert metrics(p)["spliced"] == 0, "a body under splice.min_size is copied"
    off = with_config(proxy_factory, upstream, tmp_path, "splice: { enabled: false }\n")
    with off.conn(timeout=30) as c:
        get_checked(c, 4 * MiB)
    assert metrics(off)["spliced"] == 0 and metrics(off)["splice_pipes"] == 0


def test_a_compressed_body_is_not_spliced(proxy_factory, upstream, tmp_path):
    # The bytes must pass through the encoder: a spliced one would reach the client raw,
    # inside chunked framing that says gzip.
    p = with_config(proxy_factory, upstream, tmp_path, "compression: { enabled: true, codings: [gzip] }\n")
    with p.conn(timeout=30) as c:
        c.request("GET", "/page?n=300000", headers=[("Accept-Encoding", "gzip")])
        r = c.read_response(timeout=30)
        assert r.one("content-encoding") == "gzip"
        assert len(zlib.decompress(r.body, 31)) == 300000
        get_checked(c, 2 * MiB)
    assert metrics(p)["spliced"] == 1, "the octet-stream body (not compressed) is spliced"


def test_a_slow_reader_gets_every_byte(proxy):
    n = 6 * MiB
    s = socket.create_connection(("127.0.0.1", proxy.port))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32 * 1024)
    s.sendall(b"GET /bytes?n=%d HTTP/1.1\r\nHost: t\r\n\r\n" % n)
    s.settimeout(20)
    data = bytearray()
    head_end = -1
    while head_end < 0 or len(data) - head_end < n:
        piece = s.recv(48 * 1024)
        assert piece, f"closed after {len(data)} bytes"
        data += piece
        if head_end < 0 and b"\r\n\r\n" in data:
            head_end = data.index(b"\r\n\r\n") + 4
        time.sleep(0.002)
    s.close()
    assert len(data) - head_end == n and pattern_matches(0, memoryview(data)[head_end:])
    assert metrics(proxy)["spliced"] == 1


def test_an_upstream_that_dies_mid_body_cuts_the_response_and_leaks_no_pipe(proxy, upstream):
    def cut_once(reset):
        with proxy.conn(timeout=10) as c:
            c.request("GET", f"/bytes?n={8 * MiB}&cut={2 * MiB}&reset={reset}")
            check = PatternChecker()
            with pytest.raises(ClosedEarly):
                c.read_response(sink=check, timeout=10)
            assert check.bad_at is None and check.off <= 2 * MiB
    cut_once(0)
    sockets, _ = open_fds(proxy)
    for i in range(10):
        cut_once(i % 2)
    assert_nothing_left_open(proxy, sockets)
    lines = proxy.wait_access_log(11)
    errors = {l.get("error") for l in lines if l["path"].startswith("/bytes")}
    assert errors <= {"upstream_closed_mid_response", "upstream_failed_mid_response"} and errors, lines
    assert metrics(proxy)["spliced"] == 11
    with proxy.conn(timeout=30) as c:
        get_checked(c, 2 * MiB)


def reset_after_body(p, upstream, n):
    """Asks for n bytes that the upstream sends whole and then resets; reads nothing until the
    reset, then all of it. The body read."""
    s = socket.socket()
    # Before connecting, so that the window the proxy sees stays small: the body waits in the
    # proxy (its pipe, and the socket it splices from), not in the client's buffers.
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", p.port))
    s.sendall(b"GET /bytes?n=%d&reset_after_ms=3000 HTTP/1.1\r\nHost: t\r\n\r\n" % n)
    assert upstream.record.wait_for(lambda r: r.notes("reset"), timeout=5)
    if not upstream.record.notes("reset")[0]["acked"]:
        pytest.skip("the body did not fit in this machine's socket buffers before the reset")
    time.sleep(0.2)
    s.settimeout(10)
    data = bytearray()
    while b"\r\n\r\n" not in data or len(data) - data.index(b"\r\n\r\n") - 4 < n:
        piece = s.recv(65536)
        if not piece:
            break
        data += piece
    s.close()
    return data[data.index(b"\r\n\r\n") + 4:]


@pytest.mark.parametrize("n", [96 * 1024, 3 * MiB])
def test_a_reset_after_the_whole_body_was_sent_loses_nothing(proxy_factory, upstream, tmp_path, n):
    # The upstream resets once the proxy's kernel holds the whole body, while the client reads
    # nothing: 96 KiB fit in the client's socket buffers; of 3 MiB, the last bytes wait in the
    # pipe and in the socket it splices from (without reading that socket after the reset, the
    # proxy cut the body). Bytes that reached the proxy are the client's.
    p = with_config(proxy_factory, upstream, tmp_path, "splice: { min_size: 4k }\n")
    body = reset_after_body(p, upstream, n)
    assert len(body) == n and pattern_matches(0, memoryview(body)), f"{len(body)} of {n} bytes"
    line = p.wait_access_log(1)[0]
    assert line["status"] == 200 and "error" not in line, line
    assert metrics(p)["spliced"] == 1


@pytest.mark.parametrize("config", ["", "splice: { min_size: 1g }\n"], ids=["spliced", "copied"])
def test_a_client_that_leaves_mid_body_takes_the_upstream_and_the_pipe_with_it(proxy_factory, upstream, tmp_path, config):
    # Copied: splicing on, the body under min_size; a write that fails while the body is
    # copied let the request's state go before the splice check read it (a crash).
    proxy = with_config(proxy_factory, upstream, tmp_path, config)
    def leave_once():
        c = socket.create_connection(("127.0.0.1", proxy.port))
        c.sendall(b"GET /bytes?n=%d HTTP/1.1\r\nHost: t\r\n\r\n" % (64 * MiB))
        got = 0
        try:
            while got < 1 * MiB:
                got += len(c.recv(65536))
        except ConnectionResetError:
            # Seen once in a full run, on the copying path: a reset while the client read,
            # with the proxy's access log saying its write had failed first (so not the proxy
            # closing a live client; cause not found). Whichever side ends the connection, the
            # proxy must let go of everything: that is what is checked below.
            pass
        c.close()
    lines = leave_repeatedly(proxy, leave_once)
    # A client that closes with bytes unread resets: the proxy sees a close, a failed write or
    # the socket's error, whichever comes first.
    errors = {l.get("error") for l in lines if l["path"].startswith("/bytes")}
    assert errors <= {"client_closed", "client_write_failed", "client_socket_error"}, lines
    with proxy.conn(timeout=30) as c:
        get_checked(c, 1 * MiB)


def test_with_no_pipe_free_a_body_is_copied(proxy_factory, upstream, tmp_path):
    p = with_config(proxy_factory, upstream, tmp_path, "splice: { max_pipes: 1 }\n")
    # Two downloads at once, neither read for a while: the first holds the only pipe (32 MiB
    # do not fit in the sockets' buffers), the second is copied.
    n = 32 * MiB
    socks = []
    for _ in range(2):
        s = socket.create_connection(("127.0.0.1", p.port))
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32 * 1024)
        s.sendall(b"GET /bytes?n=%d HTTP/1.1\r\nHost: t\r\n\r\n" % n)
        socks.append(s)
    time.sleep(0.5)
    m = metrics(p)
    assert m["spliced"] == 1 and m["no_pipe"] == 1 and m["splice_pipes"] == 1, m
    for s in socks:
        s.settimeout(20)
        data = bytearray()
        while b"\r\n\r\n" not in data or len(data) - data.index(b"\r\n\r\n") - 4 < n:
            piece = s.recv(1 << 20)
            assert piece, f"closed after {len(data)} bytes"
            data += piece
        s.close()
        start = data.index(b"\r\n\r\n") + 4
        assert len(data) - start == n and pattern_matches(0, memoryview(data)[start:])


# ---------------------------------------------------------------------------------------------
# Request bodies


def request_metrics(p):
    s = samples(scrape(p))
    counted = "callback_proxy_spliced_requests_total"
    return {"spliced": value(s, counted, outcome="spliced"), "no_pipe": value(s, counted, outcome="no_pipe"),
            "splice_pipes": value(s, "callback_proxy_splice_pipes")}


def upload_head(n, target="/sink?pattern=1&nosha=1"):
    return b"POST %s HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n" % (target.encode(), n)


def assert_upload_arrived(r, n):
    assert r.status == 200, r
    j = r.json()
    assert j["len"] == n and j["pattern_ok"] is True, j


def test_a_large_upload_is_spliced_whole_and_a_request_behind_it_is_answered(proxy):
    before = request_metrics(proxy)
    n = 5 * MiB + 123
    with proxy.conn(timeout=30) as c:
        c.send(upload_head(n))
        send_pattern(c, n - 1000)
        # The body's last bytes and the next request in one write: the proxy must take no
        # more than the body from the client's socket into the pipe.
        c.send(bytes(pattern_slice(n - 1000, 1000)) + b"GET /echo?after=1 HTTP/1.1\r\nHost: t\r\n\r\n")
        assert_upload_arrived(c.read_response(timeout=30), n)
        r = c.read_response()
        assert r.status == 200 and r.json()["target"] == "/echo?after=1"
        # And the connection goes on with a second upload.
        c.send(upload_head(2 * MiB))
        send_pattern(c, 2 * MiB)
        assert_upload_arrived(c.read_response(timeout=30), 2 * MiB)
    after = request_metrics(proxy)
    assert after["spliced"] - before["spliced"] == 2, after
    lines = proxy.wait_access_log(3)
    sizes = [l["bytes_in"] for l in lines if l["path"] == "/sink"]
    assert sizes[0] > n and sizes[1] > 2 * MiB, lines
    assert all("error" not in l for l in lines), lines


def test_small_chunked_and_splice_off_uploads_are_copied(proxy_factory, upstream, tmp_path):
    p = with_config(proxy_factory, upstream, tmp_path, "splice: { min_size: 4m }\n")
    with p.conn(timeout=30) as c:
        c.send(upload_head(3 * MiB))
        send_pattern(c, 3 * MiB)
        assert_upload_arrived(c.read_response(timeout=30), 3 * MiB)
        # Chunked: the proxy must read the framing.
        c.send(b"POST /sink?pattern=1&nosha=1 HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n")
        for off in range(0, 8 * MiB, MiB):
            c.send(b"%x\r\n" % MiB + bytes(pattern_slice(off, MiB)) + b"\r\n")
        c.send(b"0\r\n\r\n")
        assert_upload_arrived(c.read_response(timeout=30), 8 * MiB)
    assert request_metrics(p)["spliced"] == 0, "a body under splice.min_size, or chunked, is copied"
    off = with_config(proxy_factory, upstream, tmp_path, "splice: { enabled: false }\n")
    with off.conn(timeout=30) as c:
        c.send(upload_head(4 * MiB))
        send_pattern(c, 4 * MiB)
        assert_upload_arrived(c.read_response(timeout=30), 4 * MiB)
    assert request_metrics(off) == {"spliced": 0, "no_pipe": 0, "splice_pipes": 0}


def test_an_upstream_that_reads_slowly_holds_the_client_back_and_gets_every_byte(proxy_factory, upstream):
    # The upstream reads nothing for 1.5 s: the pipe and the sockets' buffers fill, the client
    # is not read meanwhile, and every byte still arrives in order.
    p = proxy_factory(upstream, opts={"--max-body-size": "1g", "--upstream-timeout": "30s"})
    n = 48 * MiB
    with p.conn(timeout=30) as c:
        c.send(upload_head(n, "/sink?delay_ms=1500&pattern=1&nosha=1"))
        send_pattern(c, n)
        assert_upload_arrived(c.read_response(timeout=30), n)
    assert request_metrics(p)["spliced"] == 1


def test_a_client_that_leaves_mid_upload_takes_the_upstream_and_the_pipe_with_it(proxy_factory, upstream):
    proxy = proxy_factory(upstream, opts={"--max-body-size": "1g"})

    def leave_once():
        c = socket.create_connection(("127.0.0.1", proxy.port))
        c.sendall(upload_head(64 * MiB, "/sink?nosha=1"))
        for off in range(0, 2 * MiB, MiB):
            c.sendall(pattern_slice(off, MiB))
        c.close()
    lines = leave_repeatedly(proxy, leave_once)
    assert all(l.get("error") for l in lines), lines
    assert request_metrics(proxy)["spliced"] >= 11
    with proxy.conn(timeout=30) as c:
        c.send(upload_head(1 * MiB))
        send_pattern(c, 1 * MiB)
        assert_upload_arrived(c.read_response(timeout=30), 1 * MiB)


def test_an_answer_that_comes_during_a_spliced_upload_reaches_the_client(proxy, upstream):
    """The upstream answers 413 while the body streams (none of it read): the pipe holds bytes
    that will never go up. The client gets the answer with Connection: close (more than the
    proxy reads only to drop remains), and the pipe is not kept."""
    sockets, _ = open_fds(proxy)
    n = 32 * MiB
    c = proxy.conn(timeout=10)
    c.send(upload_head(n, "/early?wait_ms=300"))
    try:
        send_pattern(c, 4 * MiB)  # more than the sockets and the pipe hold: the client waits
    except OSError:
        pass
    r = c.read_response(timeout=5)
    assert r.status == 413 and r.body == b"refused early\n"
    assert r.closes(), r.headers
    c.close()
    assert request_metrics(proxy)["spliced"] == 1
    assert_nothing_left_open(proxy, sockets)
    with proxy.conn(timeout=30) as c2:
        c2.send(upload_head(1 * MiB))
        send_pattern(c2, 1 * MiB)
        assert_upload_arrived(c2.read_response(timeout=30), 1 * MiB)


def test_with_no_pipe_free_an_upload_is_copied(proxy_factory, upstream, tmp_path):
    p = with_config(proxy_factory, upstream, tmp_path, "splice: { max_pipes: 1 }\n")
    n = 16 * MiB
    conns = []
    for _ in range(2):
        c = p.conn(timeout=30)
        c.send(upload_head(n, "/sink?delay_ms=800&pattern=1&nosha=1"))
        c.send(pattern_slice(0, MiB))
        conns.append(c)
    time.sleep(0.4)
    m = request_metrics(p)
    assert m["spliced"] == 1 and m["no_pipe"] == 1 and m["splice_pipes"] == 1, m
    for c in conns:
        send_pattern(c, n, start=MiB)
    for c in conns:
        assert_upload_arrived(c.read_response(timeout=30), n)
        c.close()
