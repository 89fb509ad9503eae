"""Responses read ahead of a slow client (`buffering:`), through the real binary, in front of an
app server with one worker that closes after each response (as Unicorn does): with buffering the
worker has written a 32 MiB response long before the client reads any of it, and is free for the
next request; without, it waits for the client. Past `max_memory`, for `X-Accel-Buffering: no`
and for event streams the response streams as before. The client gets every byte either way."""

import hashlib
import socket
import threading
import time

import pytest

from helpers import HTTPConn
from test_observability import samples, scrape, value

SIZE = 32 << 20


class OneWorker:
    """A single-threaded HTTP/1.1 server: one connection at a time, one response, then close.
    Records when each response was completely written (handed to the kernel)."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.done = {}
        self.body = hashlib.sha256(b"seed").digest() * (SIZE // 32)
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    data += chunk
                if not data:
                    continue
                path = data.split(b" ")[1].decode()
                extra = b""
                if "noaccel" in path:
                    extra = b"X-Accel-Buffering: no\r\n"
                if "events" in path:
                    extra = b"Content-Type: text/event-stream\r\n"
                else:
                    extra += b"Content-Type: application/octet-stream\r\n"
                body = b"small" if "small" in path else self.body
                try:
                    conn.sendall(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: %d\r\n" % len(body) + extra
                                 + b"\r\n" + body)
                except OSError:
                    continue
                self.done[path] = time.monotonic()

    def stop(self):
        self.sock.close()


@pytest.fixture
def worker():
    w = OneWorker()
    yield w
    w.stop()


def proxy_with(proxy_factory, worker, tmp_path, text):
    cfg = tmp_path / "buffering.yaml"
    cfg.write_text(text)
    return proxy_factory(upstream_url=worker.url, extra=["--config", str(cfg)])


def slow_request(p, path):
    """Sends the request and reads nothing yet (a phone on a slow network)."""
    c = socket.create_connection(("127.0.0.1", p.port))
    c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    c.sendall(f"GET {path} HTTP/1.1\r\nHost: site\r\n\r\n".encode())
    return c


def read_all(c, expected):
    """Reads the response to its end; returns the body."""
    c.settimeout(30)
    data = b""
    while True:
        chunk = c.recv(1 << 20)
        if not chunk:
            break
        data += chunk
        head, sep, body = data.partition(b"\r\n\r\n")
        if sep and len(body) >= expected:
            break
    c.close()
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), head[:200]
    return body


def worker_free_after(worker, path, seconds):
    deadline = time.monotonic() + seconds
    while path not in worker.done and time.monotonic() < deadline:
        time.sleep(0.01)
    return path in worker.done


def test_a_buffered_response_frees_the_worker_before_the_client_reads(proxy_factory, worker, tmp_path):
    p = proxy_with(proxy_factory, worker, tmp_path, "buffering: { responses: 48m, max_memory: 64m }\n")
    started = time.monotonic()
    slow = slow_request(p, "/download")
    assert worker_free_after(worker, "/download", 10), "the worker is still writing to the proxy"
    freed = worker.done["/download"] - started
    # The worker is free: the next request is served while the first client has read nothing.
    with HTTPConn(p.port) as c:
        c.request("GET", "/small")
        assert c.read_response().body == b"small"
    s = samples(scrape(p))
    assert value(s, "callback_proxy_buffered_responses_total", outcome="buffered") == 1
    assert value(s, "callback_proxy_buffering_bytes") == SIZE
    assert read_all(slow, SIZE) == worker.body
    print(f"worker freed {freed * 1000:.0f} ms after the request, before the client read a byte")
    # Everything sent: the reservation went back.
    deadline = time.monotonic() + 3
    while value(samples(scrape(p)), "callback_proxy_buffering_bytes") != 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert value(samples(scrape(p)), "callback_proxy_buffering_bytes") == 0


@pytest.mark.parametrize("config, path", [
    ("", "/download"),                                                   # off (the default)
    ("buffering: { responses: 48m, max_memory: 64m }\n", "/noaccel"),   # the app says no
    ("buffering: { responses: 48m, max_memory: 64m }\n", "/events"),    # an event stream
    ("buffering: { responses: 16m, max_memory: 64m }\n", "/download"),  # larger than `responses`
])
def test_otherwise_the_worker_waits_for_the_client(proxy_factory, worker, tmp_path, config, path):
    p = proxy_with(proxy_factory, worker, tmp_path, config or "log: { level: info }\n")
    slow = slow_request(p, path)
    assert not worker_free_after(worker, path, 2), "the response was read ahead"
    assert read_all(slow, SIZE) == worker.body


def test_past_max_memory_a_response_streams(proxy_factory, worker, tmp_path):
    p = proxy_with(proxy_factory, worker, tmp_path, "buffering: { responses: 40m, max_memory: 48m }\n")
    first = slow_request(p, "/download?1")
    assert worker_free_after(worker, "/download?1", 10)
    # 32 MiB of 48 are taken: the second response does not fit and streams.
    second = slow_request(p, "/download?2")
    assert not worker_free_after(worker, "/download?2", 2)
    s = samples(scrape(p))
    assert value(s, "callback_proxy_buffered_responses_total", outcome="over_budget") == 1
    assert read_all(first, SIZE) == worker.body
    assert read_all(second, SIZE) == worker.body


def test_a_slow_client_is_not_taken_for_a_stalled_upstream(proxy_factory, worker, tmp_path):
    """Streaming (no buffering), the upstream waits while the client does not read: longer than
    `timeouts.upstream` here. The response was once cut there as `upstream_stalled`."""
    p = proxy_factory(upstream_url=worker.url, opts={"--upstream-timeout": "1s"})
    slow = slow_request(p, "/download")
    time.sleep(2.5)
    assert read_all(slow, SIZE) == worker.body
    assert "upstream_stalled" not in p.stdout_text()
