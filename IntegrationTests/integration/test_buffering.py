"""Responses read ahead of a slow client (`buffering:`), through the real binary, in front of an
app server with one worker that closes after each response (as Unicorn does): with buffering the
worker has written a response larger than all socket buffers long before the client reads any of
it, and is free for the next request; without, it waits for the client. Past `max_memory`, for `X-Accel-Buffering: no`
and for event streams the response streams as before. The client gets every byte either way."""

import hashlib
import socket
import threading
import time

import pytest

from helpers import HTTPConn
from test_observability import samples, scrape, value



def streamed_bytes_the_kernel_may_hold():
    """What a streamed response can leave in socket buffers between the worker and a client that
    reads nothing, so the worker finishes writing without any read-ahead: the worker's send buffer
    and the proxy's to the client (autotuned up to tcp_wmem's maximum), the proxy's receive buffer
    from the worker (up to tcp_rmem's maximum: 32 MiB on some hosts), the client's 64 KiB."""
    def maximum(name):
        with open(f"/proc/sys/net/ipv4/{name}") as f:
            return int(f.read().split()[2])
    return 2 * maximum("tcp_wmem") + maximum("tcp_rmem") + (128 << 10)


# The response: larger than the kernel can hold, or "the worker waits for the client" could pass
# by kernel buffering alone (it did, once, on a host with a 32 MiB tcp_rmem and a 32 MiB body).
SIZE = max(32 << 20, (streamed_bytes_the_kernel_may_hold() + (8 << 20)) & ~((8 << 20) - 1))
MIB = SIZE >> 20


def config(responses, max_memory):
    """A `buffering:` section with sizes in MiB."""
    return f"buffering: {{ responses: {responses}m, max_memory: {max_memory}m }}\n"


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
                head, _, rest = data.partition(b"\r\n\r\n")
                if path.startswith("/upload"):
                    # Reads the body (Content-Length or chunked) and answers with its digest.
                    try:
                        body = read_body(conn, head, rest)
                    except OSError:
                        continue
                    digest = hashlib.sha256(body).hexdigest().encode()
                    conn.sendall(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: %d\r\n\r\n" % len(digest) + digest)
                    self.done[path] = time.monotonic()
                    continue
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


def read_body(conn, head, rest):
    lower = head.lower()
    if b"content-length:" in lower:
        n = int(lower.split(b"content-length:")[1].split(b"\r\n")[0])
        while len(rest) < n:
            chunk = conn.recv(65536)
            if not chunk:
                raise OSError("short body")
            rest += chunk
        return rest[:n]
    # chunked: read to the last chunk, then decode
    while not rest.endswith(b"0\r\n\r\n"):
        chunk = conn.recv(65536)
        if not chunk:
            raise OSError("short body")
        rest += chunk
    body, pos = b"", 0
    while True:
        end = rest.index(b"\r\n", pos)
        size = int(rest[pos:end], 16)
        if size == 0:
            return body
        body += rest[end + 2:end + 2 + size]
        pos = end + 2 + size + 2


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
    data = bytearray()
    end = -1
    while True:
        chunk = c.recv(1 << 20)
        if not chunk:
            break
        data += chunk
        if end < 0:
            end = data.find(b"\r\n\r\n")
        if end >= 0 and len(data) - end - 4 >= expected:
            break
    c.close()
    head, body = bytes(data[:end]), bytes(data[end + 4:])
    assert head.startswith(b"HTTP/1.1 200"), head[:200]
    return body


def worker_free_after(worker, path, seconds):
    deadline = time.monotonic() + seconds
    while path not in worker.done and time.monotonic() < deadline:
        time.sleep(0.01)
    return path in worker.done


def test_a_buffered_response_frees_the_worker_before_the_client_reads(proxy_factory, worker, tmp_path):
    p = proxy_with(proxy_factory, worker, tmp_path, config(MIB * 3 // 2, MIB * 2))
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
    (config(MIB * 3 // 2, MIB * 2), "/noaccel"),   # the app says no
    (config(MIB * 3 // 2, MIB * 2), "/events"),    # an event stream
    (config(MIB // 2, MIB * 2), "/download"),      # larger than `responses`
])
def test_otherwise_the_worker_waits_for_the_client(proxy_factory, worker, tmp_path, config, path):
    p = proxy_with(proxy_factory, worker, tmp_path, config or "log: { level: info }\n")
    slow = slow_request(p, path)
    assert not worker_free_after(worker, path, 2), "the response was read ahead"
    assert read_all(slow, SIZE) == worker.body


def test_past_max_memory_a_response_streams(proxy_factory, worker, tmp_path):
    p = proxy_with(proxy_factory, worker, tmp_path, config(MIB + 8, MIB * 3 // 2))
    first = slow_request(p, "/download?1")
    assert worker_free_after(worker, "/download?1", 10)
    # SIZE of 1.5 SIZE is taken: the second response does not fit and streams.
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


UPLOAD = bytes(range(256)) * 4096   # 1 MiB


def slow_upload(p, path, pieces=8, pause=0.25, chunked=False, expect=False, results=None):
    """A phone uploading 1 MiB over two seconds; puts (status, body) into `results`."""
    c = socket.create_connection(("127.0.0.1", p.port))
    framing = b"Transfer-Encoding: chunked\r\n" if chunked else b"Content-Length: %d\r\n" % len(UPLOAD)
    c.sendall(b"POST " + path.encode() + b" HTTP/1.1\r\nHost: site\r\n" + framing
              + (b"Expect: 100-continue\r\n" if expect else b"") + b"\r\n")
    if expect:
        c.settimeout(1)
        interim = c.recv(100)
        results.append(("interim", interim))
    size = len(UPLOAD) // pieces
    for i in range(pieces):
        piece = UPLOAD[i * size:(i + 1) * size]
        c.sendall(b"%x\r\n" % len(piece) + piece + b"\r\n" if chunked else piece)
        time.sleep(pause)
    if chunked:
        c.sendall(b"0\r\n\r\n")
    c.settimeout(10)
    data = b""
    while True:
        chunk = c.recv(65536)
        if not chunk:
            break
        data += chunk
        if b"\r\n\r\n" in data and len(data.partition(b"\r\n\r\n")[2]) >= 64:
            break
    c.close()
    head, _, body = data.partition(b"\r\n\r\n")
    results.append((head.split(b" ")[1], body))


def latency_during_upload(p, path, **kw):
    """How long a short request takes while another client uploads slowly to the one worker."""
    results = []
    t = threading.Thread(target=slow_upload, args=(p, path), kwargs={**kw, "results": results})
    t.start()
    time.sleep(0.4)
    started = time.monotonic()
    with HTTPConn(p.port, timeout=10) as c:
        c.request("GET", "/small")
        assert c.read_response().body == b"small"
    took = time.monotonic() - started
    t.join(15)
    return took, results


@pytest.mark.parametrize("chunked", [False, True])
def test_a_buffered_upload_leaves_the_worker_free_until_it_is_all_there(proxy_factory, worker, tmp_path, chunked):
    p = proxy_with(proxy_factory, worker, tmp_path, "buffering: { requests: 4m }\n")
    took, results = latency_during_upload(p, "/upload", chunked=chunked)
    assert results[-1] == (b"200", hashlib.sha256(UPLOAD).hexdigest().encode()), results
    # The upload takes two seconds; the other request did not wait for it.
    assert took < 1.0, f"{took:.2f} s"
    print(f"a short request during a slow upload: {took * 1000:.0f} ms")


def test_without_request_buffering_the_worker_waits_for_the_upload(proxy_factory, worker, tmp_path):
    p = proxy_with(proxy_factory, worker, tmp_path, "log: { level: info }\n")
    took, results = latency_during_upload(p, "/upload")
    assert results[-1] == (b"200", hashlib.sha256(UPLOAD).hexdigest().encode()), results
    assert took > 1.0, f"{took:.2f} s: the worker was not held by the upload"


def test_a_client_waiting_for_100_continue_gets_it_from_the_proxy(proxy_factory, worker, tmp_path):
    p = proxy_with(proxy_factory, worker, tmp_path, "buffering: { requests: 4m }\n")
    results = []
    slow_upload(p, "/upload", pieces=2, pause=0.05, expect=True, results=results)
    assert results[0] == ("interim", b"HTTP/1.1 100 Continue\r\n\r\n"), results
    assert results[-1] == (b"200", hashlib.sha256(UPLOAD).hexdigest().encode())


def test_a_body_larger_than_requests_streams(proxy_factory, worker, tmp_path):
    p = proxy_with(proxy_factory, worker, tmp_path, "buffering: { requests: 256k }\n")
    took, results = latency_during_upload(p, "/upload")
    assert results[-1] == (b"200", hashlib.sha256(UPLOAD).hexdigest().encode()), results
    assert took > 1.0, "1 MiB does not fit in 256 KiB: it streamed, holding the worker"


def test_an_http2_upload_larger_than_its_stream_window_is_read_ahead_whole(proxy_factory, worker, tmp_path):
    """The body waits in a buffer of its own, so the stream's window (256 KiB) keeps opening."""
    import subprocess
    p = proxy_with(proxy_factory, worker, tmp_path, "http2: { cleartext: true }\nbuffering: { requests: 4m }\n")
    body = tmp_path / "upload.bin"
    body.write_bytes(UPLOAD)
    out = subprocess.run(["curl", "-s", "--http2-prior-knowledge", "--data-binary", f"@{body}", "-w", " %{http_version}",
                          f"http://127.0.0.1:{p.port}/upload"], capture_output=True, text=True, timeout=20)
    assert out.stdout == hashlib.sha256(UPLOAD).hexdigest() + " 2", out
