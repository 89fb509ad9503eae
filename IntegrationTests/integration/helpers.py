"""Raw-socket HTTP/1.1 client, process wrappers and the upstream's record reader.

Everything here speaks bytes: tests send exactly what they mean (malformed on purpose, for the
smuggling suite) and read responses with a parser that is itself strict, so a malformed response
from the proxy fails the test that received it.
"""

import base64
import http.server
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
import upstream as upstream_mod  # noqa: E402  (pattern helpers shared with the server)

pattern_slice = upstream_mod.pattern_slice
pattern_bytes = upstream_mod.pattern_bytes
pattern_matches = upstream_mod.pattern_matches
PATTERN_MAX_SLICE = upstream_mod.PATTERN_MAX_SLICE

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB


class ProtocolError(AssertionError):
    """The proxy sent something that is not valid HTTP/1.1."""


class ClosedEarly(AssertionError):
    """The connection ended before a complete response arrived."""

    def __init__(self, msg, reason, partial):
        super().__init__(f"{msg} ({reason}); received so far: {bytes(partial[:600])!r}")
        self.reason = reason
        self.partial = bytes(partial)


class ResponseTimeout(AssertionError):
    def __init__(self, msg, partial):
        super().__init__(f"{msg}; received so far: {bytes(partial[:600])!r}")
        self.partial = bytes(partial)


# ---------------------------------------------------------------------------------------------
# Ports and processes

def free_port():
    """A free loopback TCP port below the ephemeral range (so no outgoing connection takes it)."""
    for _ in range(200):
        port = random.randint(20000, 32000)
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            s.bind(("127.0.0.1", port))
            return port
        except OSError:
            continue
        finally:
            s.close()
    raise RuntimeError("no free port found")


def terminate_all(procs, timeout=5):
    """Stops processes a fixture started (nginx and the like): SIGTERM, then SIGKILL after `timeout`."""
    for p in procs:
        p.terminate()
        try:
            p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def closed_port():
    """A port on which nothing listens (connections are refused)."""
    return free_port()


def proc_status(pid, key):
    """A /proc/PID/status field in KiB (e.g. VmHWM, VmRSS), or None."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except FileNotFoundError:
        return None
    return None


def http_get_status(port, path, timeout=1.0):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def wait_port_refused(port, timeout=2.0):
    """True when connecting to port is refused (nothing accepts there any more)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        s = socket.socket()
        s.settimeout(0.5)
        try:
            s.connect(("127.0.0.1", port))
        except ConnectionRefusedError:
            return True
        except OSError:
            pass
        finally:
            s.close()
        time.sleep(0.05)
    return False


class UpstreamRecord:
    """Reads the upstream's JSON-lines record."""

    def __init__(self, path):
        self.path = path

    def events(self, ev=None):
        out = []
        try:
            # One read, and only the whole lines in it: the upstream may be writing a line right
            # now (a long one in several writes). Iterating the file instead skipped the torn
            # line's first part at EOF, then read on and met its rest as a line of its own.
            with open(self.path) as f:
                text = f.read()
        except FileNotFoundError:
            return out
        for line in text[:text.rfind("\n") + 1].splitlines():
            e = json.loads(line)
            if ev is None or e["ev"] == ev:
                out.append(e)
        return out

    def raw(self, conn=None):
        """All bytes received (on one connection, or on all in connection order)."""
        by_conn = {}
        for e in self.events("data"):
            by_conn.setdefault(e["conn"], bytearray()).extend(base64.b64decode(e["b64"]))
        if conn is not None:
            return bytes(by_conn.get(conn, b""))
        return b"".join(bytes(by_conn[c]) for c in sorted(by_conn))

    def total_received(self):
        return len(self.raw())

    def requests(self):
        return self.events("request")

    def violations(self):
        return self.events("violation")

    def closes(self):
        return self.events("close")

    def conns(self):
        return sorted({e["conn"] for e in self.events("open")})

    def notes(self, what=None):
        return [e for e in self.events("event") if what is None or e["what"] == what]

    def wait_for(self, predicate, timeout=3.0, interval=0.02):
        """Polls until predicate(self) is truthy; returns its last value."""
        deadline = time.monotonic() + timeout
        while True:
            v = predicate(self)
            if v or time.monotonic() >= deadline:
                return v
            time.sleep(interval)

    def describe(self):
        lines = []
        for e in self.events():
            e = dict(e)
            if e["ev"] == "data":
                e["bytes"] = base64.b64decode(e.pop("b64"))[:300]
            e.pop("t", None)
            lines.append(repr(e))
        return "\n".join(lines[-40:]) or "(nothing recorded)"


class Upstream:
    def __init__(self, tmpdir, unix=False, name="upstream", host="127.0.0.1", port=0):
        self.record_path = os.path.join(tmpdir, f"{name}.record.jsonl")
        ready = os.path.join(tmpdir, f"{name}.ready")
        self.unix_path = os.path.join(tmpdir, f"{name}.sock") if unix else None
        args = [sys.executable, os.path.join(HERE, "upstream.py"), "--record", self.record_path,
                "--ready-file", ready]
        if unix:
            args += ["--unix", self.unix_path]
        else:
            args += ["--host", host, "--port", str(port)]
        self.log = open(os.path.join(tmpdir, f"{name}.log"), "wb")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 10
        while not os.path.exists(ready):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"upstream did not start (exit {self.proc.poll()})")
            time.sleep(0.01)
        with open(ready) as f:
            where = f.read().strip()
        self.port = None if unix else int(where)
        self.host = host
        self.url = f"unix:{self.unix_path}" if unix else f"http://{host}:{self.port}"
        self.record = UpstreamRecord(self.record_path)

    stopped = False

    def stop(self):
        self.stopped = True
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if not self.log.closed:
            self.log.close()


class Proxy:
    DEFAULTS = {
        "--loops": "1",
        "--upstream-timeout": "3s",
        "--upstream-connect-timeout": "2s",
        "--client-header-timeout": "3s",
        "--client-body-timeout": "3s",
        "--keepalive-timeout": "10s",
        "--drain-timeout": "5s",
    }

    def __init__(self, binary, tmpdir, upstream_url, opts=None, extra=(), name="proxy",
                 wait=True, env=None):
        self.port = free_port()
        self.internal_port = free_port()
        while self.internal_port == self.port:
            self.internal_port = free_port()
        merged = dict(self.DEFAULTS)
        merged.update(opts or {})
        # upstream_url None: the upstream comes from the configuration file (reload tests)
        self.args = [binary, "--listen", f"127.0.0.1:{self.port}",
                     *(["--upstream", upstream_url] if upstream_url else []),
                     "--internal-listen", f"127.0.0.1:{self.internal_port}"]
        for k, v in merged.items():
            if v is not None:
                self.args += [k, v]
        self.args += list(extra)
        self.stdout_path = os.path.join(tmpdir, f"{name}.stdout")
        self.stderr_path = os.path.join(tmpdir, f"{name}.stderr")
        self._out = open(self.stdout_path, "wb")
        self._err = open(self.stderr_path, "wb")
        self.proc = subprocess.Popen(self.args, stdout=self._out, stderr=self._err,
                                     stdin=subprocess.DEVNULL,
                                     env=None if env is None else {**os.environ, **env})
        self.stopped_on_purpose = False
        if wait:
            self.wait_ready()

    @property
    def pid(self):
        return self.proc.pid

    def wait_ready(self, timeout=10.0):
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(
                    f"proxy exited with {self.proc.returncode} before becoming ready; "
                    f"args={self.args}\nstderr: {self.stderr_text()[-3000:]}")
            try:
                status, body = http_get_status(self.internal_port, "/healthz", timeout=0.5)
                if status == 200:
                    return
                last = status
            except (OSError, urllib.error.URLError) as e:
                last = e
            time.sleep(0.02)
        raise AssertionError(f"proxy not ready after {timeout}s (last: {last!r}); "
                             f"stderr: {self.stderr_text()[-3000:]}")

    def signal(self, sig=signal.SIGTERM):
        self.stopped_on_purpose = True
        self.proc.send_signal(sig)

    def wait_exit(self, timeout):
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._out.close()
        self._err.close()

    def stdout_text(self):
        self._out.flush()
        with open(self.stdout_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def stderr_text(self):
        self._err.flush()
        with open(self.stderr_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def access_log(self, path=None):
        """The access-log lines parsed as JSON (stdout unless path is given), without the lines
        for the fixture's own readiness polls of the internal /healthz."""
        if path is None:
            text = self.stdout_text()
        else:
            with open(path, "rb") as f:
                text = f.read().decode("utf-8", "replace")
        out = []
        for line in text.splitlines():
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except ValueError:
                raise AssertionError(f"access log line is not JSON: {line[:300]!r}")
            if entry.get("path") != "/healthz":
                out.append(entry)
        return out

    def wait_access_log(self, n, timeout=3.0, path=None):
        deadline = time.monotonic() + timeout
        while True:
            lines = self.access_log(path)
            if len(lines) >= n or time.monotonic() > deadline:
                return lines
            time.sleep(0.02)

    def providers_up(self):
        """{provider: 0 or 1} from callback_proxy_provider_up: the background probes answered so far."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.internal_port}/metrics", timeout=3) as r:
            text = r.read().decode()
        return {m.group(1): int(m.group(2))
                for m in re.finditer(r'^callback_proxy_provider_up\{provider="([^"]+)"\} (\d+)$', text, re.M)}

    def wait_providers_probed(self, names, timeout=5.0):
        """Waits until every provider in `names` has been probed once (at start-up or a reload)."""
        deadline = time.monotonic() + timeout
        while not set(names) <= set(self.providers_up()):
            assert time.monotonic() < deadline, f"providers {sorted(names)} not probed: {self.providers_up()}"
            time.sleep(0.02)
        return self.providers_up()

    def vm_kib(self, key="VmHWM"):
        return proc_status(self.pid, key)

    def conn(self, **kw):
        return HTTPConn(self.port, **kw)


# ---------------------------------------------------------------------------------------------
# The raw client

class Response:
    def __init__(self, version, status, reason, headers, raw_head):
        self.version = version
        self.status = status
        self.reason = reason
        self.headers = headers
        self.raw_head = raw_head
        self.body = b""
        self.body_len = 0
        self.framing = None
        self.interim = []
        self.trailers = []

    def header(self, name):
        return [v for n, v in self.headers if n.lower() == name.lower()]

    def one(self, name):
        vals = self.header(name)
        assert len(vals) <= 1, f"more than one {name}: {vals}"
        return vals[0] if vals else None

    def tokens(self, name):
        out = []
        for v in self.header(name):
            out += [t.strip().lower() for t in v.split(",") if t.strip()]
        return out

    def closes(self):
        return "close" in self.tokens("connection")

    def json(self):
        try:
            return json.loads(self.body)
        except ValueError:
            raise AssertionError(f"body is not JSON: status {self.status}, {self.body[:300]!r}")

    def __repr__(self):
        return f"<Response {self.status} {self.headers} body={self.body[:200]!r}>"


def _check_head_lines(raw):
    for i, b in enumerate(raw):
        if b == 0x0A and (i == 0 or raw[i - 1] != 0x0D):
            raise ProtocolError(f"bare LF in response head: {raw[:400]!r}")
        if b == 0x0D and (i + 1 >= len(raw) or raw[i + 1] != 0x0A):
            raise ProtocolError(f"bare CR in response head: {raw[:400]!r}")


STATUS_LINE = re.compile(rb"^(HTTP/1\.[01]) ([0-9]{3}) ([^\r\n]*)$")


class HTTPConn:
    def __init__(self, port, host="127.0.0.1", source=None, timeout=5.0, unix=None):
        if unix:
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.settimeout(timeout)
            self.sock.connect(unix)
        else:
            self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            if source:
                self.sock.bind((source, 0))
            self.sock.settimeout(timeout)
            self.sock.connect((host, port))
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.timeout = timeout
        self.buf = bytearray()
        self.eof = None  # None, "eof" or "reset"

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def send(self, data):
        self.sock.sendall(data)

    def request(self, method="GET", target="/echo", headers=None, body=b"", version="HTTP/1.1",
                host="test.local"):
        """Sends a well-formed request; headers is a list of (name, value)."""
        hdrs = []
        if host is not None:
            hdrs.append(("Host", host))
        hdrs += list(headers or [])
        if body and not any(n.lower() in ("content-length", "transfer-encoding") for n, _ in hdrs):
            hdrs.append(("Content-Length", str(len(body))))
        head = f"{method} {target} {version}\r\n" + "".join(f"{n}: {v}\r\n" for n, v in hdrs)
        self.send(head.encode("latin-1") + b"\r\n" + body)

    # ---- reading -------------------------------------------------------------------------------
    def _fill(self, deadline):
        if self.eof:
            return False
        left = deadline - time.monotonic()
        if left <= 0:
            raise socket.timeout()
        self.sock.settimeout(left)
        try:
            data = self.sock.recv(1 << 20)
        except ConnectionResetError:
            self.eof = "reset"
            return False
        if not data:
            self.eof = "eof"
            return False
        self.buf += data
        return True

    def _deadline(self, timeout):
        return time.monotonic() + (self.timeout if timeout is None else timeout)

    def read_head(self, timeout=None):
        deadline = self._deadline(timeout)
        try:
            while True:
                i = self.buf.find(b"\r\n\r\n")
                if i >= 0:
                    break
                if len(self.buf) > 256 * 1024:
                    raise ProtocolError("response head larger than 256 KiB")
                if not self._fill(deadline):
                    raise ClosedEarly("connection closed before a response head", self.eof,
                                      self.buf)
        except socket.timeout:
            raise ResponseTimeout("timed out waiting for a response head", self.buf)
        raw = bytes(self.buf[:i + 4])
        del self.buf[:i + 4]
        _check_head_lines(raw)
        lines = raw[:-4].split(b"\r\n")
        m = STATUS_LINE.match(lines[0])
        if not m:
            raise ProtocolError(f"malformed status line: {lines[0][:200]!r}")
        headers = []
        for ln in lines[1:]:
            name, sep, value = ln.partition(b":")
            if not sep or not upstream_mod.TCHAR.match(name):
                raise ProtocolError(f"malformed response header line: {ln[:200]!r}")
            headers.append((name.decode("latin-1"), value.strip(b" \t").decode("latin-1")))
        return Response(m.group(1).decode(), int(m.group(2)), m.group(3).decode("latin-1"),
                        headers, raw)

    def read_response(self, method="GET", timeout=None, sink=None, stop_at_interim=False):
        """Reads one final response (1xx interim responses are collected in .interim).

        sink(piece) receives the body instead of .body when given (for huge bodies)."""
        interim = []
        while True:
            r = self.read_head(timeout)
            if 100 <= r.status < 200 and r.status != 101:
                interim.append(r)
                if stop_at_interim:
                    return r
                continue
            break
        r.interim = interim
        deadline = self._deadline(timeout)
        chunks = []
        out = sink if sink is not None else chunks.append
        try:
            self._read_body(r, method, deadline, out)
        except socket.timeout:
            raise ResponseTimeout(f"timed out reading the body of {r.status} "
                                  f"({r.framing}, {r.body_len} bytes so far)", r.raw_head)
        if sink is None:
            r.body = b"".join(chunks)
        return r

    def _take(self, n, deadline, out, r):
        left = n
        while left > 0:
            if not self.buf and left >= 65536 and getattr(out, "zero_copy", False):
                # large streamed bodies: receive in place and hand the sink a view (no copies)
                if not hasattr(self, "_rx"):
                    self._rx = bytearray(1 << 20)
                    self._rxv = memoryview(self._rx)
                left_t = deadline - time.monotonic()
                if left_t <= 0:
                    raise socket.timeout()
                self.sock.settimeout(left_t)
                try:
                    k = self.sock.recv_into(self._rxv[:min(left, len(self._rx))])
                except ConnectionResetError:
                    self.eof = "reset"
                    k = 0
                if k == 0:
                    self.eof = self.eof or "eof"
                    raise ClosedEarly(f"connection closed with {left} of {n} body bytes missing",
                                      self.eof, r.raw_head)
                out(self._rxv[:k])
                r.body_len += k
                left -= k
                continue
            if not self.buf:
                if not self._fill(deadline):
                    raise ClosedEarly(f"connection closed with {left} of {n} body bytes missing",
                                      self.eof, r.raw_head)
            k = min(left, len(self.buf))
            out(bytes(self.buf[:k]))
            del self.buf[:k]
            r.body_len += k
            left -= k

    def _line(self, deadline, r):
        while True:
            i = self.buf.find(b"\r\n")
            if i >= 0:
                line = bytes(self.buf[:i])
                del self.buf[:i + 2]
                if b"\n" in line or b"\r" in line:
                    raise ProtocolError(f"bare CR/LF in chunked framing {line[:100]!r}")
                return line
            if len(self.buf) > 64 * 1024:
                raise ProtocolError("chunk line too long")
            if not self._fill(deadline):
                raise ClosedEarly("connection closed inside chunked framing", self.eof,
                                  r.raw_head)

    def _read_body(self, r, method, deadline, out):
        te = r.tokens("transfer-encoding")
        cls = r.header("content-length")
        if method == "HEAD" or r.status in (204, 304, 101) or 100 <= r.status < 200:
            r.framing = "none"
            if r.status in (204,) and (te or cls):
                # RFC 9110 §8.6 / 9112 §6.1: a 204 carries neither
                raise ProtocolError(f"204 response with framing headers: {r.headers}")
            return
        if te:
            if cls:
                raise ProtocolError(f"response with both Transfer-Encoding and Content-Length: "
                                    f"{r.headers}")
            if te[-1] != "chunked":
                r.framing = "close"
                self._until_close(deadline, out, r)
                return
            r.framing = "chunked"
            while True:
                line = self._line(deadline, r)
                size_s = line.split(b";", 1)[0].strip(b" \t")
                if not re.fullmatch(rb"[0-9A-Fa-f]{1,16}", size_s):
                    raise ProtocolError(f"bad chunk size line from proxy: {line[:100]!r}")
                size = int(size_s, 16)
                if size == 0:
                    while True:
                        t = self._line(deadline, r)
                        if not t:
                            return
                        r.trailers.append(t)
                self._take(size, deadline, out, r)
                crlf = self._line(deadline, r)
                if crlf != b"":
                    raise ProtocolError(f"missing CRLF after chunk data: {crlf[:50]!r}")
        if cls:
            if len(set(cls)) != 1 or not re.fullmatch(r"[0-9]+", cls[0]):
                raise ProtocolError(f"bad Content-Length in response: {cls}")
            r.framing = "content-length"
            self._take(int(cls[0]), deadline, out, r)
            return
        r.framing = "close"
        self._until_close(deadline, out, r)

    def _until_close(self, deadline, out, r):
        while True:
            if self.buf:
                out(bytes(self.buf))
                r.body_len += len(self.buf)
                self.buf.clear()
            if not self._fill(deadline):
                return

    def read_until_close(self, timeout=None):
        """Everything until the peer closes; raises ResponseTimeout if it does not."""
        deadline = self._deadline(timeout)
        try:
            while self._fill(deadline):
                pass
        except socket.timeout:
            raise ResponseTimeout("connection still open", self.buf)
        data = bytes(self.buf)
        self.buf.clear()
        return data

    def wait_closed(self, timeout=2.0):
        """True if the peer closes (EOF or RST) within timeout; False if it is still open.

        Bytes that arrive meanwhile are kept in self.buf (and make this return False only if the
        connection then stays open)."""
        deadline = time.monotonic() + timeout
        try:
            while self._fill(deadline):
                pass
            return True
        except socket.timeout:
            return False

    def still_open(self, wait=0.2):
        return not self.wait_closed(wait)


def exchange(port, data, timeout=5.0, methods=("GET",), **kw):
    """Sends raw bytes on a new connection and reads len(methods) responses."""
    with HTTPConn(port, timeout=timeout, **kw) as c:
        c.send(data)
        return [c.read_response(m) for m in methods]


def serve_http(handler, port=0, tls=None):
    """A ThreadingHTTPServer for `handler` on 127.0.0.1:`port` (0: any), wrapped in `tls` (an
    ssl.SSLContext) when given, serving from a daemon thread. Stop it with shutdown() and
    server_close()."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
    server.daemon_threads = True
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server
