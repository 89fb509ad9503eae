"""Limits (414 request line, 431 head, 413 body) and client-side timeouts (slowloris header,
stalled body). Every refusal closes the connection and forwards nothing it should not."""

import os
import resource
import select
import socket
import time

import pytest

from helpers import KiB, MiB, ClosedEarly, pattern_slice


def assert_refused(c, r, status):
    assert r.status == status, f"expected {status}, got {r.status} {r.reason} {r.body[:200]!r}"
    assert r.closes(), f"{status} without Connection: close: {r.headers}"
    assert c.wait_closed(2), f"connection left open after {status}"


def test_request_line_just_under_8k_is_accepted(proxy):
    target = "/echo?" + "a" * (8 * KiB - 100)
    with proxy.conn() as c:
        c.request("GET", target)
        r = c.read_response()
    assert r.status == 200 and r.json()["target"] == target


def test_request_line_over_8k_gives_414(proxy, upstream):
    with proxy.conn() as c:
        c.request("GET", "/echo?" + "a" * (8 * KiB + 10))
        assert_refused(c, c.read_response(), 414)
    assert upstream.record.total_received() == 0


def test_request_line_over_8k_sent_slowly_gives_414_before_it_ends(proxy, upstream):
    """The limit is enforced while reading, not after buffering an unbounded line."""
    with proxy.conn() as c:
        c.send(b"GET /" + b"a" * (8 * KiB))
        try:
            for _ in range(64):
                c.send(b"a" * KiB)
                time.sleep(0.005)
        except OSError:
            pass  # the proxy may have answered and closed already
        r = c.read_response(timeout=3)
        assert r.status == 414 and r.closes()
    assert upstream.record.total_received() == 0


def test_head_just_under_32k_is_accepted(proxy):
    headers = [(f"X-Fill-{i:02d}", "v" * 900) for i in range(30)]  # ~28 KiB
    with proxy.conn() as c:
        c.request("GET", "/echo", headers)
        r = c.read_response()
    assert r.status == 200
    assert len([h for h in r.json()["headers"] if h[0].startswith("X-Fill-")]) == 30


def test_head_over_32k_gives_431(proxy, upstream):
    headers = [(f"X-Fill-{i:02d}", "v" * 1000) for i in range(40)]
    with proxy.conn() as c:
        c.request("GET", "/echo", headers)
        assert_refused(c, c.read_response(), 431)
    assert upstream.record.total_received() == 0


def test_one_huge_header_line_gives_431(proxy, upstream):
    with proxy.conn() as c:
        c.request("GET", "/echo", [("X-Huge", "h" * (40 * KiB))])
        assert_refused(c, c.read_response(), 431)
    assert upstream.record.total_received() == 0


def test_endless_headers_are_cut_off_with_431(proxy, upstream):
    with proxy.conn() as c:
        c.send(b"GET /echo HTTP/1.1\r\nHost: test.local\r\n")
        try:
            for i in range(2000):
                c.send(b"X-Endless-%d: %s\r\n" % (i, b"e" * 100))
        except OSError:
            pass
        r = c.read_response(timeout=3)
        assert r.status == 431 and r.closes()
    assert upstream.record.total_received() == 0


def test_body_at_the_limit_is_accepted(proxy_factory, upstream):
    p = proxy_factory(upstream, opts={"--max-body-size": "1m"})
    with p.conn() as c:
        c.request("POST", "/sink", body=pattern_slice(0, MiB).tobytes())
        r = c.read_response()
    assert r.status == 200 and r.json()["len"] == MiB


def test_content_length_over_the_limit_gives_413_before_any_body(proxy_factory, upstream):
    p = proxy_factory(upstream, opts={"--max-body-size": "1m"})
    with p.conn() as c:
        c.send(b"POST /sink HTTP/1.1\r\nHost: test.local\r\nContent-Length: %d\r\n\r\n"
               % (MiB + 1))
        assert_refused(c, c.read_response(timeout=3), 413)
    assert upstream.record.total_received() == 0


def read_refusal(c, cause):
    """The response after a refused body; a close before it fails the test naming `cause`."""
    try:
        return c.read_response(timeout=3)
    except ClosedEarly as e:
        pytest.fail(f"no response reached the client ({e.reason}): {cause}")


def test_content_length_over_the_limit_with_body_already_sent(proxy_factory, upstream):
    p = proxy_factory(upstream, opts={"--max-body-size": "100k"})
    with p.conn() as c:
        c.send(b"POST /sink HTTP/1.1\r\nHost: test.local\r\nContent-Length: 200000\r\n\r\n" +
               b"z" * 200000)
        assert_refused(c, read_refusal(c, "the proxy closed with unread input instead of a lingering close"), 413)
    assert upstream.record.total_received() == 0


def test_a_client_still_sending_after_a_refusal_gets_it_however_long_it_sends(proxy_factory, upstream):
    """A phone uploading a large body at a few hundred KiB/s reads the 413 only when it is done
    sending. The lingering close waits while bytes keep coming (each read gives it another
    second, ten in all: nginx's lingering_timeout/lingering_time): a fixed one-second linger
    reset the connection after a second, and the reset destroyed the 413 at the client."""
    p = proxy_factory(upstream, opts={"--max-body-size": "100k"})
    total = 3 * 1024 * 1024
    with p.conn() as c:
        c.send(b"POST /sink HTTP/1.1\r\nHost: test.local\r\nContent-Length: %d\r\n\r\n" % total)
        start = time.monotonic()
        sent = 0
        while sent < total:  # about 1 MiB/s: 3 s of sending
            c.send(b"u" * 32768)
            sent += 32768
            time.sleep(max(0.0, start + sent / (1024 * 1024) - time.monotonic()))
        assert time.monotonic() - start > 2.5
        assert_refused(c, read_refusal(c, "the lingering close gave up while the client was still sending"), 413)
    assert upstream.record.total_received() == 0


def test_chunked_body_over_the_limit_gives_413_and_upstream_never_completes(proxy_factory,
                                                                            upstream):
    p = proxy_factory(upstream, opts={"--max-body-size": "64k"})
    with p.conn() as c:
        c.send(b"POST /sink HTTP/1.1\r\nHost: test.local\r\nTransfer-Encoding: chunked\r\n\r\n")
        try:
            for _ in range(8):
                c.send(b"4000\r\n" + b"c" * 0x4000 + b"\r\n")
            c.send(b"0\r\n\r\n")
        except OSError:
            pass
        r = c.read_response(timeout=3)
        assert_refused(c, r, 413)
    time.sleep(0.3)
    assert not upstream.record.events("body_done"), \
        "the upstream received a complete body larger than --max-body-size"
    assert not [e for e in upstream.record.events("response") if e["status"] == 200]


# --- client timeouts

def test_slowloris_head_is_cut_off_by_the_header_timeout(proxy_factory, upstream):
    """The header timeout bounds the whole head, not the gap between bytes."""
    p = proxy_factory(upstream, opts={"--client-header-timeout": "500ms"})
    with p.conn() as c:
        t0 = time.monotonic()
        c.send(b"GET /echo HTTP/1.1\r\nHost: test.local\r\nX-Slow: ")
        answered_at = None
        for _ in range(60):  # one byte every 50 ms keeps any per-read idle timer happy
            r, _, _ = select.select([c.sock], [], [], 0.05)
            if r:
                answered_at = time.monotonic()
                break
            try:
                c.send(b"x")
            except OSError:
                answered_at = time.monotonic()
                break
        assert answered_at is not None, "slowloris head still being accepted after 3 s"
        elapsed = answered_at - t0
        data = c.read_until_close(timeout=3)
    assert elapsed < 1.5, f"slowloris connection lived {elapsed:.2f}s with a 500ms header timeout"
    if data:
        assert data.startswith(b"HTTP/1.1 408 "), f"expected 408 or a silent close, got {data[:200]!r}"
        assert b"\r\nconnection: close\r\n" in data.lower()
    assert upstream.record.total_received() == 0


def test_idle_new_connection_is_closed_by_the_header_timeout(proxy_factory):
    p = proxy_factory(opts={"--client-header-timeout": "500ms"}, upstream_url="http://127.0.0.1:9")
    with p.conn() as c:
        t0 = time.monotonic()
        data = c.read_until_close(timeout=3)
        dt = time.monotonic() - t0
    assert dt < 2.0, f"idle connection closed after {dt:.2f}s"
    assert data == b"" or data.startswith(b"HTTP/1.1 408 "), data[:200]


def test_stalled_request_body_is_cut_off_by_the_body_timeout(proxy_factory, upstream):
    p = proxy_factory(upstream, opts={"--client-body-timeout": "500ms"})
    with p.conn() as c:
        t0 = time.monotonic()
        c.send(b"POST /sink HTTP/1.1\r\nHost: test.local\r\nContent-Length: 100\r\n\r\n" +
               b"x" * 10)
        data = c.read_until_close(timeout=5)
        dt = time.monotonic() - t0
    assert dt < 2.0, f"stalled body connection lived {dt:.2f}s with a 500ms body timeout " \
                     f"(then got {data[:40]!r})"
    if data:
        assert data.startswith(b"HTTP/1.1 408 "), data[:200]
    assert upstream.record.wait_for(lambda r: [e for e in r.closes() if e["phase"] == "body"],
                                    timeout=2), \
        f"the upstream connection was not closed: {upstream.record.closes()}"
    assert not upstream.record.events("body_done")


def test_slow_but_steady_body_within_the_body_timeout_succeeds(proxy_factory, upstream):
    p = proxy_factory(upstream, opts={"--client-body-timeout": "800ms"})
    with p.conn() as c:
        c.send(b"POST /sink HTTP/1.1\r\nHost: test.local\r\nContent-Length: 10\r\n\r\n")
        for i in range(10):
            time.sleep(0.2)   # total 2 s > timeout, but never idle for 800 ms
            c.send(b"%d" % i)
        r = c.read_response()
    assert r.status == 200 and r.json()["len"] == 10


def _cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_running_out_of_descriptors_pauses_accepting_instead_of_spinning(proxy_factory, upstream):
    p = proxy_factory(upstream, opts={"--client-header-timeout": "30s"})
    # Leave the proxy 12 descriptors beyond what it holds now.
    in_use = len(os.listdir(f"/proc/{p.pid}/fd"))
    resource.prlimit(p.pid, resource.RLIMIT_NOFILE, (in_use + 12, in_use + 12))
    flood = []
    try:
        # Idle connections: the proxy accepts a dozen, the rest wait in its backlog.
        for _ in range(60):
            flood.append(socket.create_connection(("127.0.0.1", p.port)))
        time.sleep(0.3)
        before = _cpu_seconds(p.pid)
        time.sleep(1.5)
        used = _cpu_seconds(p.pid) - before
        # Retrying accept at once on a readable listener would burn ~1.5 s of CPU here.
        assert used < 0.3, f"the proxy used {used:.2f} s of CPU in 1.5 s while out of descriptors"
        paused = [l for l in p.stderr_text().splitlines() if "accepting paused" in l]
        assert paused and "Too many open files" in paused[0], p.stderr_text()[-2000:]
        assert len(paused) <= 4, f"{len(paused)} log lines in ~2 s: the pause log is not rate-limited"
    finally:
        for s in flood:
            s.close()
    # Descriptors free again: the next pause ends and clients are served, without a restart.
    deadline = time.monotonic() + 5
    status = None
    while time.monotonic() < deadline and status != 200:
        try:
            with p.conn(timeout=1) as c:
                c.request("GET", "/echo")
                status = c.read_response(timeout=1).status
        except (OSError, AssertionError):
            time.sleep(0.1)
    assert status == 200
    from test_observability import samples, scrape, value
    assert value(samples(scrape(p)), "callback_proxy_accept_pauses_total", listener="public") >= 1
