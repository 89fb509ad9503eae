#!/usr/bin/env python3
"""A strict HTTP/1.1 upstream for the proxy's loopback integration tests (stdlib only).

It records every raw byte it receives, per connection, as JSON lines in the file given by
--record, so a test can prove what did or did not reach it. It is deliberately strict about
what the proxy sends it: anything malformed (bare LF, two Hosts, CL+TE, obs-fold, a CTL in a
value, a non-origin-form target...) is answered with 599, recorded as a "violation", and the
connection is closed, so the test that caused it fails.

Record events (one JSON object per line, "conn" is the connection id, "t" the time):
  open      {"peer"}
  data      {"b64"}                       raw received bytes, up to --record-limit per connection
  request   {"method","target","version","index","head_len"}
  body_done {"index","len"}               the request body was read completely
  response  {"index","status"}            the response head was sent
  violation {"reason"}
  event     {"what", ...}                 route-specific notes (poison drop, ws frames, ...)
  close     {"reason","phase","received","sent"}

Routes: /echo /chunked /bytes /sink /slow /garbage /close /reset /until-close /ws /status/N[?h=Name:value]
/head-cl /expect /keepalive-close /hop /set-cookies. See handle() for their parameters.
"""

import argparse
import base64
import fcntl
import hashlib
import json
import os
import random
import re
import select
import socket
import struct
import sys
import termios
import threading
import time
from urllib.parse import parse_qs, urlsplit

# ---------------------------------------------------------------------------------------------
# The deterministic byte stream used for large bodies. It has a prime period so that chunks of
# any power-of-two size start at a different phase: reordering or duplicating chunks is caught.
PATTERN_PERIOD = 1_000_003
_PATTERN_BLOCK = random.Random(0xC0FFEE).randbytes(PATTERN_PERIOD)
PATTERN_BUF = _PATTERN_BLOCK * 3          # any slice of up to 2 * PERIOD is contiguous here
PATTERN_MAX_SLICE = 2 * PATTERN_PERIOD


def page_text(seed, n):
    """n bytes of text that compresses about as HTML does (seed 0), or only about twice
    (seed 1: hex digits of random bytes, for tests where the compressed size must stay large)."""
    if seed == 1:
        return os.urandom((n + 1) // 2).hex().encode()[:n]
    line = b'<li class="entry"><a href="/items/%d">Item number %d</a> <span>in stock</span></li>\n'
    out = bytearray()
    i = 0
    while len(out) < n:
        out += line % (i, i * 7)
        i += 1
    return bytes(out[:n])


def pattern_slice(offset, n):
    """Bytes [offset, offset+n) of the infinite pattern stream, n <= PATTERN_MAX_SLICE."""
    assert n <= PATTERN_MAX_SLICE
    o = offset % PATTERN_PERIOD
    return memoryview(PATTERN_BUF)[o:o + n]


def pattern_bytes(offset, n):
    """Bytes [offset, offset+n) of the pattern stream as one object, any n (for small bodies)."""
    out = bytearray()
    while len(out) < n:
        k = min(PATTERN_MAX_SLICE, n - len(out))
        out += pattern_slice(offset + len(out), k)
    return bytes(out)


def pattern_matches(offset, data):
    """True when data equals the pattern stream at offset (data of any length)."""
    mv = memoryview(data)
    pos = 0
    while pos < len(mv):
        n = min(len(mv) - pos, PATTERN_PERIOD)
        # startswith compares buffers in place: no copy of either side
        if not PATTERN_BUF.startswith(mv[pos:pos + n], (offset + pos) % PATTERN_PERIOD):
            return False
        pos += n
    return True


WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
TCHAR = re.compile(rb"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
REQUEST_LINE = re.compile(rb"^([!#$%&'*+\-.^_`|~0-9A-Za-z]+) ([^ ]+) (HTTP/1\.[01])$")
HOP_BY_HOP = {"connection", "keep-alive", "proxy-connection", "te", "transfer-encoding", "upgrade",
              "trailer"}
MAX_HEAD = 256 * 1024
REASONS = {100: "Continue", 101: "Switching Protocols", 200: "OK", 201: "Created", 204: "No Content",
           206: "Partial Content", 301: "Moved Permanently", 302: "Found", 304: "Not Modified",
           400: "Bad Request", 403: "Forbidden", 404: "Not Found", 417: "Expectation Failed",
           500: "Internal Server Error", 502: "Bad Gateway", 503: "Service Unavailable",
           599: "Upstream Saw A Malformed Request"}


class Recorder:
    def __init__(self, path, limit):
        self.f = open(path, "a", buffering=1)
        self.lock = threading.Lock()
        self.limit = limit

    def write(self, conn, ev, **fields):
        fields.update({"t": round(time.time(), 6), "conn": conn, "ev": ev})
        line = json.dumps(fields)
        with self.lock:
            self.f.write(line + "\n")
            self.f.flush()


class Closed(Exception):
    """The peer closed (or reset) the connection; .phase says when."""

    def __init__(self, reason, phase):
        super().__init__(f"{reason} during {phase}")
        self.reason = reason
        self.phase = phase


class Violation(Exception):
    pass


class Request:
    def __init__(self, method, target, version, headers, head_len, index):
        self.method = method
        self.target = target
        self.version = version
        self.headers = headers            # list of (name, value) as str, order kept
        self.head_len = head_len
        self.index = index
        split = urlsplit(target)
        self.path = split.path
        self.query = {k: v[-1] for k, v in parse_qs(split.query, keep_blank_values=True).items()}

    def header(self, name):
        vals = [v for n, v in self.headers if n.lower() == name.lower()]
        return vals

    def one(self, name, default=None):
        vals = self.header(name)
        return vals[0] if vals else default

    def connection_tokens(self):
        toks = set()
        for v in self.header("connection"):
            toks.update(t.strip().lower() for t in v.split(",") if t.strip())
        return toks

    def wants_close(self):
        toks = self.connection_tokens()
        if "close" in toks:
            return True
        if self.version == "HTTP/1.0" and "keep-alive" not in toks:
            return True
        return False

    def qint(self, name, default):
        v = self.query.get(name)
        return int(v) if v not in (None, "") else default


class Conn(threading.Thread):
    def __init__(self, server, sock, cid, peer):
        super().__init__(daemon=True)
        self.server = server
        self.sock = sock
        self.cid = cid
        self.peer = peer
        self.buf = bytearray()
        self.received = 0
        self.sent = 0
        self.recorded = 0
        self.phase = "idle"
        self.index = 0
        self.closed = False
        self.idle_close_ms = None
        self.poisoned = False

    # ---- recording I/O ----------------------------------------------------------------------
    def rec(self, ev, **fields):
        self.server.rec.write(self.cid, ev, **fields)

    def fill(self, n=262144, timeout=None):
        """Receive more bytes into self.buf; raises Closed on EOF/reset, returns False on timeout."""
        if timeout is not None:
            r, _, _ = select.select([self.sock], [], [], timeout)
            if not r:
                return False
        try:
            data = self.sock.recv(n)
        except ConnectionResetError:
            raise Closed("reset", self.phase)
        except OSError as e:
            raise Closed(f"error:{e.errno}", self.phase)
        if not data:
            raise Closed("eof", self.phase)
        self.received += len(data)
        if self.recorded < self.server.rec.limit:
            part = data[: self.server.rec.limit - self.recorded]
            self.recorded += len(part)
            self.rec("data", b64=base64.b64encode(part).decode())
        self.buf += data
        return True

    def sendall(self, data):
        try:
            self.sock.sendall(data)
        except OSError as e:
            raise Closed(f"send-error:{e.errno}", self.phase)
        self.sent += len(data)

    # ---- request parsing (strict) -----------------------------------------------------------
    def read_head(self):
        self.phase = "idle" if not self.buf else "head"
        while True:
            end = self.buf.find(b"\r\n\r\n")
            if end >= 0:
                break
            if b"\n\n" in self.buf:
                raise Violation("bare LF line ending in head")
            if len(self.buf) > MAX_HEAD:
                raise Violation("head too large")
            if self.idle_close_ms is not None and not self.buf:
                if not self.fill(timeout=self.idle_close_ms / 1000.0):
                    self.rec("event", what="idle-close", after_ms=self.idle_close_ms)
                    raise Closed("server-idle-close", "idle")
            else:
                self.fill()
            self.phase = "head"
        head = bytes(self.buf[:end])
        del self.buf[: end + 4]
        self.index += 1
        raw_lines = head.split(b"\r\n")
        for ln in raw_lines:
            if b"\n" in ln or b"\r" in ln:
                raise Violation(f"bare CR or LF inside a head line: {ln[:80]!r}")
        m = REQUEST_LINE.match(raw_lines[0])
        if not m:
            raise Violation(f"malformed request line: {raw_lines[0][:200]!r}")
        method, target, version = (x.decode("latin-1") for x in m.groups())
        if any(b < 0x21 or b > 0x7E for b in m.group(2)) or "#" in target:
            raise Violation(f"invalid target bytes: {m.group(2)[:200]!r}")
        if not (target.startswith("/") or (method == "OPTIONS" and target == "*")):
            raise Violation(f"target is not origin-form: {target[:200]}")
        headers = []
        for ln in raw_lines[1:]:
            if ln[:1] in (b" ", b"\t"):
                raise Violation("obs-fold continuation line")
            name, sep, value = ln.partition(b":")
            if not sep:
                raise Violation(f"header line without colon: {ln[:80]!r}")
            if not TCHAR.match(name):
                raise Violation(f"invalid header name: {name[:80]!r}")
            value = value.strip(b" \t")
            if any((b < 0x20 and b != 0x09) or b == 0x7F for b in value):
                raise Violation(f"CTL in value of {name.decode()}")
            headers.append((name.decode("latin-1"), value.decode("latin-1")))
        req = Request(method, target, version, headers, len(head) + 4, self.index)
        self.rec("request", method=method, target=target, version=version, index=self.index,
                 head_len=req.head_len)
        hosts = req.header("host")
        if version == "HTTP/1.1" and len(hosts) != 1:
            raise Violation(f"expected exactly one Host, got {len(hosts)}")
        if version == "HTTP/1.0" and len(hosts) > 1:
            raise Violation("more than one Host")
        cls = req.header("content-length")
        tes = req.header("transfer-encoding")
        if cls and tes:
            raise Violation("both Content-Length and Transfer-Encoding")
        if len(cls) > 1:
            raise Violation("more than one Content-Length")
        if cls and not re.fullmatch(r"[0-9]+", cls[0]):
            raise Violation(f"invalid Content-Length {cls[0]!r}")
        if len(tes) > 1 or (tes and tes[0].lower() != "chunked"):
            raise Violation(f"unexpected Transfer-Encoding {tes!r}")
        if version == "HTTP/1.0" and tes:
            raise Violation("Transfer-Encoding on HTTP/1.0")
        req.content_length = int(cls[0]) if cls else None
        req.chunked = bool(tes)
        return req

    def read_exact_into(self, n, sink):
        """Consume exactly n body bytes, passing each piece to sink(offset, memoryview)."""
        off = 0
        while off < n:
            if not self.buf:
                # Never read past this body: what follows belongs to the next request.
                self.fill(min(1 << 20, n - off))
            take = min(len(self.buf), n - off)
            piece = bytes(self.buf[:take])
            del self.buf[:take]
            sink(off, piece)
            off += take
        return off

    def read_line(self, limit=4096):
        while True:
            i = self.buf.find(b"\r\n")
            if i >= 0:
                line = bytes(self.buf[:i])
                del self.buf[: i + 2]
                if b"\n" in line or b"\r" in line:
                    raise Violation(f"bare CR/LF in chunked framing: {line[:80]!r}")
                return line
            if len(self.buf) > limit:
                raise Violation("chunked framing line too long")
            self.fill()

    def read_body(self, req, sink):
        """Read the request body per its framing; returns its length."""
        self.phase = "body"
        if req.chunked:
            total = 0
            while True:
                line = self.read_line()
                size_s = line.split(b";", 1)[0].rstrip(b" \t")
                if not re.fullmatch(rb"[0-9A-Fa-f]{1,16}", size_s):
                    raise Violation(f"bad chunk size line {line[:80]!r}")
                size = int(size_s, 16)
                if size == 0:
                    while True:  # trailer section
                        tl = self.read_line()
                        if tl == b"":
                            break
                        if tl[:1] in (b" ", b"\t") or b":" not in tl:
                            raise Violation(f"bad trailer line {tl[:80]!r}")
                    break
                self.read_exact_into(size, lambda o, p, base=total: sink(base + o, p))
                total += size
                while len(self.buf) < 2:
                    self.fill()
                if bytes(self.buf[:2]) != b"\r\n":
                    raise Violation("missing CRLF after chunk data")
                del self.buf[:2]
        elif req.content_length:
            total = self.read_exact_into(req.content_length, sink)
        else:
            total = 0
        self.rec("body_done", index=req.index, len=total)
        self.phase = "handling"
        return total

    def discard_body(self, req):
        h = hashlib.sha256()
        n = self.read_body(req, lambda o, p: h.update(p))
        return n, h.hexdigest()

    # ---- responses ----------------------------------------------------------------------------
    def respond(self, req, status, headers=(), body=b"", close=False, head_only=None):
        if head_only is None:
            head_only = req is not None and req.method == "HEAD"
        lines = [f"HTTP/1.1 {status} {REASONS.get(status, 'Status')}"]
        names = {n.lower() for n, _ in headers}
        bodyless = head_only or status in (204, 304) or 100 <= status < 200
        if "content-length" not in names and "transfer-encoding" not in names and \
                status not in (204, 304) and not (100 <= status < 200):
            lines.append(f"Content-Length: {len(body)}")
        for n, v in headers:
            lines.append(f"{n}: {v}")
        if close:
            lines.append("Connection: close")
        self.rec("response", index=req.index if req else 0, status=status)
        self.phase = "response"
        data = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        if not bodyless:
            data += body
        self.sendall(data)

    def json_response(self, req, obj, status=200, close=False, extra=()):
        body = json.dumps(obj).encode()
        self.respond(req, status, [("Content-Type", "application/json")] + list(extra), body,
                     close=close)

    # ---- main loop ----------------------------------------------------------------------------
    def run(self):
        self.rec("open", peer=str(self.peer))
        reason = "server"
        try:
            while True:
                try:
                    req = self.read_head()
                except Violation as v:
                    self.rec("violation", reason=str(v))
                    self.respond(None, 599, [("Content-Type", "text/plain")],
                                 f"upstream saw a malformed request: {v}\n".encode(), close=True)
                    break
                if self.poisoned:
                    # Simulates the keep-alive race: the connection was "closed by the server" just
                    # as the proxy reused it. The request reached us; it gets no answer.
                    self.rec("event", what="poison-drop", method=req.method, target=req.target)
                    reason = "server-poison-drop"
                    break
                self.idle_close_ms = None
                try:
                    keep = self.handle(req)
                except Violation as v:
                    self.rec("violation", reason=str(v))
                    self.respond(req, 599, [("Content-Type", "text/plain")],
                                 f"upstream saw a malformed request: {v}\n".encode(), close=True)
                    break
                if not keep or req.wants_close():
                    break
        except Closed as c:
            reason = c.reason
        except Exception as e:  # a bug in this server: make it visible in the record
            self.rec("event", what="upstream-exception", error=repr(e))
            reason = "exception"
        finally:
            self.rec("close", reason=reason, phase=self.phase, received=self.received,
                     sent=self.sent)
            try:
                if reason != "reset-by-us":
                    self.sock.close()
            except OSError:
                pass

    def handle(self, req):
        """Serve one request. Returns False when the connection must be closed afterwards."""
        p = req.path
        q = req.query
        if p == "/echo" or p.startswith("/echo/"):
            n, sha = self.discard_body(req)
            if q.get("poison"):
                self.poisoned = True
            if q.get("idle_close_ms"):
                self.idle_close_ms = int(q["idle_close_ms"])
            obj = {"method": req.method, "target": req.target, "version": req.version,
                   "headers": [[a, b] for a, b in req.headers], "body_len": n,
                   "body_sha256": sha, "conn": self.cid, "index": req.index,
                   "peer": str(self.peer)}
            self.json_response(req, obj)
            return True
        if p == "/sink":
            delay = req.qint("delay_ms", 0)
            if delay:
                time.sleep(delay / 1000.0)
            h = None if q.get("nosha") else hashlib.sha256()
            check = bool(q.get("pattern"))
            state = {"ok": True}

            def sink(off, piece):
                if h is not None:
                    h.update(piece)
                if check and state["ok"] and not pattern_matches(off, piece):
                    state["ok"] = False
                    state["bad_at"] = off
            n = self.read_body(req, sink)
            obj = {"len": n, "sha256": h.hexdigest() if h else None, "conn": self.cid}
            if check:
                obj["pattern_ok"] = state["ok"]
                obj["bad_at"] = state.get("bad_at")
            self.json_response(req, obj)
            return True
        if p == "/chunked":
            self.discard_body(req)
            n, size = req.qint("n", 3), req.qint("size", 10)
            delay = req.qint("delay_ms", 0)
            hdrs = [("Content-Type", "application/octet-stream"), ("Transfer-Encoding", "chunked")]
            if q.get("trailer"):
                hdrs.append(("Trailer", "X-Checksum"))
            self.respond(req, 200, hdrs, b"")
            if req.method == "HEAD":
                return True
            off = 0
            for _ in range(n):
                if delay:
                    time.sleep(delay / 1000.0)
                piece = pattern_slice(off, size).tobytes() if size <= PATTERN_MAX_SLICE else None
                if piece is None:
                    self.sendall(b"%x\r\n" % size)
                    sent = 0
                    while sent < size:
                        k = min(1 << 20, size - sent)
                        self.sendall(pattern_slice(off + sent, k))
                        sent += k
                    self.sendall(b"\r\n")
                else:
                    self.sendall(b"%x\r\n" % size + piece + b"\r\n")
                off += size
            self.sendall(b"0\r\nX-Checksum: done\r\n\r\n" if q.get("trailer") else b"0\r\n\r\n")
            return True
        if p == "/bytes":
            self.discard_body(req)
            n = req.qint("n", 0)
            self.respond(req, 200, [("Content-Type", "application/octet-stream"),
                                    ("Content-Length", str(n))], b"")
            if req.method == "HEAD":
                return True
            off = 0
            step = 1 << 20
            # cut=K: the body stops after K of its n bytes and the connection closes (reset=1:
            # with a reset): an app that dies mid-response.
            cut = req.qint("cut", n)
            while off < cut:
                k = min(step, cut - off)
                self.sendall(pattern_slice(off, k))
                off += k
            if req.qint("reset_after_ms", 0):
                # The whole body went out; then a reset (an app server killed right after),
                # once the peer's kernel has acknowledged every byte (nothing unsent or unacked
                # in our queue: TIOCOUTQ) or after reset_after_ms, whichever is first.
                deadline = time.monotonic() + req.qint("reset_after_ms", 0) / 1000
                unacked = -1
                while time.monotonic() < deadline:
                    unacked = struct.unpack("i", fcntl.ioctl(self.sock, termios.TIOCOUTQ, b"\0\0\0\0"))[0]
                    if unacked == 0:
                        break
                    time.sleep(0.01)
                time.sleep(0.05)
                self.rec("event", what="reset", acked=unacked == 0)
                self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                self.sock.close()
                raise Closed("reset-by-us", "handling")
            if cut < n:
                time.sleep(0.05)
                self.rec("event", what="cut")
                if req.qint("reset", 0):
                    self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    self.sock.close()
                    raise Closed("reset-by-us", "handling")
                return False
            return True
        if p == "/slow":
            self.discard_body(req)
            ms = req.qint("ms", 1000)
            n = req.qint("n", 0)
            body = pattern_bytes(0, n) if n else b"slow done\n"
            if q.get("phase") == "body":
                self.respond(req, 200, [("Content-Length", str(len(body)))], b"")
                self.wait_watching_peer(ms)
                self.sendall(body)
                return True
            self.wait_watching_peer(ms)
            self.respond(req, 200, [("Content-Type", "application/octet-stream")], body)
            return True
        if p == "/garbage":
            self.discard_body(req)
            self.rec("response", index=req.index, status=-1)
            self.sendall(b"THIS IS NOT HTTP\x00\x01\x02 at all\r\n\r\nmore garbage\r\n")
            return False
        if p == "/early":
            # Answers before reading any of the body (an app refusing an upload), then closes
            # as a careful server does: half-close, and drop what still arrives.
            self.rec("event", what="early-answer")
            # wait_ms: the answer comes while the body is on its way (none of it read).
            if req.qint("wait_ms", 0):
                time.sleep(req.qint("wait_ms", 0) / 1000.0)
            self.respond(req, req.qint("status", 413), [("Content-Type", "text/plain")],
                         b"refused early\n", close=True)
            try:
                self.sock.shutdown(socket.SHUT_WR)
                self.sock.settimeout(2)
                while self.sock.recv(65536):
                    pass
            except OSError:
                pass
            return False
        if p == "/close":
            self.discard_body(req)
            self.rec("event", what="close-without-answer")
            return False
        if p == "/reset":
            self.discard_body(req)
            self.rec("event", what="reset")
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.sock.close()
            raise Closed("reset-by-us", "handling")
        if p == "/until-close":
            self.discard_body(req)
            n = req.qint("n", 1000)
            self.rec("response", index=req.index, status=200)
            self.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n\r\n")
            off = 0
            while off < n:
                k = min(1 << 20, n - off)
                self.sendall(pattern_slice(off, k))
                off += k
            if req.qint("reset", 0):
                # the body is cut by a reset, not ended by a close
                time.sleep(0.05)
                self.rec("event", what="reset")
                self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                self.sock.close()
                raise Closed("reset-by-us", "handling")
            return False
        if p == "/ws":
            return self.websocket(req)
        if p == "/page" or p.startswith("/page/"):
            return self.page(req)
        if p.startswith("/status/"):
            self.discard_body(req)
            code = int(p[len("/status/"):])
            hdrs = [("Content-Type", "text/plain")]
            if "h" in q:  # one extra response field, `h=Name:value`
                name, _, value = q["h"].partition(":")
                hdrs.append((name, value))
            if "cl" in q:
                hdrs.append(("Content-Length", q["cl"]))
            body = b"" if code in (204, 304) else f"status {code}\n".encode()
            if "cl" in q and code not in (204, 304):
                body = b"x" * int(q["cl"])
            self.respond(req, code, hdrs, body)
            return True
        if p == "/head-cl":
            self.discard_body(req)
            body = pattern_bytes(0, 1234)
            self.respond(req, 200, [("Content-Type", "application/octet-stream")], body)
            return True
        if p == "/expect":
            saw = any(v.lower() == "100-continue" for v in req.header("expect"))
            if q.get("reject"):
                self.respond(req, 403, [("Content-Type", "text/plain")], b"rejected\n", close=True)
                return False
            if saw:
                self.rec("event", what="sent-100-continue")
                self.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
            n, sha = self.discard_body(req)
            self.json_response(req, {"saw_expect": saw, "body_len": n, "body_sha256": sha,
                                     "conn": self.cid})
            return True
        if p == "/early-hints":
            # a 103 before the answer (RFC 8297), with a reason phrase of its own
            self.discard_body(req)
            self.sendall(b"HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n")
            self.respond(req, 200, [("Content-Type", "text/plain"), ("Link", "</a.css>; rel=preload")], b"hinted\n")
            return True
        if p == "/keepalive-close":
            self.discard_body(req)
            self.respond(req, 200, [("Content-Type", "text/plain")], b"bye\n", close=True)
            return False
        if p == "/hop":
            self.discard_body(req)
            self.respond(req, 200, [("Content-Type", "text/plain"),
                                    ("Connection", "X-Up-Hop, keep-alive"),
                                    ("X-Up-Hop", "secret"), ("Keep-Alive", "timeout=77"),
                                    ("Proxy-Connection", "keep-alive"),
                                    ("X-Up-Keep", "yes")], b"hop\n")
            return True
        if p == "/accel":
            # An app handing a download back to the front server (Rack::Sendfile with
            # X-Accel-Redirect): `to` is the field's value as sent; the request's fields are
            # recorded (event "accel"). body=N: an N-byte body instead of Rack's empty one;
            # chunked=1: a chunked one; notype=1: no Content-Type.
            self.discard_body(req)
            self.rec("event", what="accel", headers=[[a, b] for a, b in req.headers])
            hdrs = [("X-Accel-Redirect", q.get("to", "/_files/a.txt")),
                    ("Content-Disposition", 'attachment; filename="report.txt"'),
                    ("Cache-Control", "private, max-age=60"), ("Expires", "Thu, 01 Jan 2037 00:00:00 GMT"),
                    ("Set-Cookie", "s=1; Path=/; HttpOnly"), ("Set-Cookie", "t=2; Path=/"),
                    ("ETag", '"from-the-app"'), ("Last-Modified", "Mon, 01 Jan 2001 00:00:00 GMT"),
                    ("X-Up-Other", "not kept"), ("Vary", "Cookie")]
            if not q.get("notype"):
                hdrs.append(("Content-Type", "application/x-from-app"))
            body = b"x" * req.qint("body", 0)
            if q.get("chunked"):
                self.respond(req, 200, hdrs + [("Transfer-Encoding", "chunked")], b"")
                if req.method != "HEAD":
                    self.sendall(b"5\r\nhello\r\n0\r\n\r\n")
                return True
            self.respond(req, req.qint("status", 200), hdrs, body)
            return True
        if p == "/set-cookies":
            self.discard_body(req)
            self.respond(req, 200, [("Set-Cookie", "a=1; Path=/; HttpOnly"),
                                    ("Set-Cookie", "b=2, c=3; Path=/"),
                                    ("Content-Type", "text/plain")], b"cookies\n")
            return True
        self.discard_body(req)
        self.respond(req, 404, [("Content-Type", "text/plain")], b"no such route\n")
        return True

    def page(self, req):
        """A compressible text body (test_compression): `n` bytes of page_text(seed) as `mode`
        (length, chunked or close) in `pieces` sends `delay_ms` apart, `type`, `status`, and
        extra fields `h`, `h2` (`Name:value`)."""
        self.discard_body(req)
        q = req.query
        n, pieces, delay = req.qint("n", 20000), req.qint("pieces", 1), req.qint("delay_ms", 0)
        body = page_text(req.qint("seed", 0), n)
        mode = q.get("mode", "length")
        status = req.qint("status", 200)
        hdrs = [("Content-Type", q.get("type", "text/html; charset=utf-8"))]
        for key in ("h", "h2"):
            if key in q:
                name, _, value = q[key].partition(":")
                hdrs.append((name, value))
        if mode == "chunked":
            hdrs.append(("Transfer-Encoding", "chunked"))
        elif mode == "length":
            hdrs.append(("Content-Length", str(n)))
        self.rec("response", index=req.index, status=status)
        head = f"HTTP/1.1 {status} X\r\n" + "".join(f"{a}: {b}\r\n" for a, b in hdrs) + "\r\n"
        self.sendall(head.encode("latin-1"))
        if req.method == "HEAD":
            return mode != "close"
        step = max(1, -(-n // pieces))
        for off in range(0, n, step):
            if delay and off:
                time.sleep(delay / 1000.0)
            piece = body[off:off + step]
            self.sendall(b"%x\r\n" % len(piece) + piece + b"\r\n" if mode == "chunked" else piece)
        if mode == "chunked":
            self.sendall(b"0\r\n\r\n")
        return mode != "close"

    def wait_watching_peer(self, ms):
        """Sleep ms, but notice (and raise Closed) if the peer goes away meanwhile."""
        deadline = time.monotonic() + ms / 1000.0
        self.phase = "wait"
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            r, _, _ = select.select([self.sock], [], [], left)
            if r:
                try:
                    peek = self.sock.recv(1, socket.MSG_PEEK)
                except OSError:
                    peek = b""
                if not peek:
                    self.rec("event", what="peer-closed-while-waiting")
                    raise Closed("eof", "wait")
                # pipelined bytes: leave them for the next request
                time.sleep(min(left, 0.05))

    # ---- WebSocket ----------------------------------------------------------------------------
    def websocket(self, req):
        self.discard_body(req)
        key = req.one("sec-websocket-key")
        upgrade = [v.lower() for v in req.header("upgrade")]
        if req.method != "GET" or "websocket" not in upgrade or "upgrade" not in \
                req.connection_tokens() or not key or req.one("sec-websocket-version") != "13":
            self.rec("event", what="ws-bad-handshake",
                     headers=[[a, b] for a, b in req.headers])
            self.respond(req, 400, [("Content-Type", "text/plain")], b"bad websocket handshake\n",
                         close=True)
            return False
        accept = base64.b64encode(hashlib.sha1((key + WS_GUID).encode()).digest()).decode()
        self.rec("response", index=req.index, status=101)
        self.sendall(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                      "Connection: Upgrade\r\nSec-WebSocket-Accept: " + accept +
                      "\r\nX-Upstream-Conn: " + str(self.cid) + "\r\n\r\n").encode())
        self.phase = "websocket"
        close_after = req.qint("close_after", 0)
        frames = 0
        while True:
            while len(self.buf) < 2:
                self.fill()
            b0, b1 = self.buf[0], self.buf[1]
            fin, opcode, masked, ln = b0 & 0x80, b0 & 0x0F, b1 & 0x80, b1 & 0x7F
            hl = 2 + (2 if ln == 126 else 8 if ln == 127 else 0) + (4 if masked else 0)
            while len(self.buf) < hl:
                self.fill()
            if ln == 126:
                ln = struct.unpack(">H", self.buf[2:4])[0]
            elif ln == 127:
                ln = struct.unpack(">Q", self.buf[2:10])[0]
            if not masked:
                self.rec("violation", reason="unmasked client websocket frame")
                self.sendall(bytes([0x88, 2]) + struct.pack(">H", 1002))
                return False
            mask = bytes(self.buf[hl - 4:hl])
            while len(self.buf) < hl + ln:
                self.fill()
            payload = bytes(self.buf[hl:hl + ln])
            del self.buf[:hl + ln]
            if ln:
                m = (mask * (ln // 4 + 1))[:ln]
                payload = (int.from_bytes(payload, "big") ^ int.from_bytes(m, "big")).to_bytes(
                    ln, "big")
            self.rec("event", what="ws-frame", opcode=opcode, fin=bool(fin), len=ln)
            out_op = 0xA if opcode == 0x9 else opcode
            if ln < 126:
                hdr = bytes([(fin | out_op) & 0xFF, ln])
            elif ln < 65536:
                hdr = bytes([(fin | out_op) & 0xFF, 126]) + struct.pack(">H", ln)
            else:
                hdr = bytes([(fin | out_op) & 0xFF, 127]) + struct.pack(">Q", ln)
            self.sendall(hdr + payload)
            if opcode == 0x8:
                return False
            frames += 1
            if close_after and frames >= close_after:
                self.rec("event", what="ws-server-close")
                self.sendall(bytes([0x88, 2]) + struct.pack(">H", 1001))
                return False


class Server:
    def __init__(self, args):
        self.args = args
        self.rec = Recorder(args.record, args.record_limit)
        self.next_id = 0
        if args.unix:
            try:
                os.unlink(args.unix)
            except FileNotFoundError:
                pass
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.bind(args.unix)
            where = args.unix
        else:
            self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self.sock.bind((args.host, args.port))
            where = str(self.sock.getsockname()[1])
        self.sock.listen(256)
        if args.ready_file:
            tmp = args.ready_file + ".tmp"
            with open(tmp, "w") as f:
                f.write(where + "\n")
            os.rename(tmp, args.ready_file)

    def serve(self):
        while True:
            s, peer = self.sock.accept()
            if s.family != socket.AF_UNIX:
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.next_id += 1
            Conn(self, s, self.next_id, peer).start()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--unix", help="listen on this unix socket path instead of TCP")
    ap.add_argument("--record", required=True, help="JSON-lines file of received bytes and events")
    ap.add_argument("--record-limit", type=int, default=4 << 20,
                    help="raw bytes recorded per connection (the rest is only counted)")
    ap.add_argument("--ready-file", help="written with the port (or socket path) once listening")
    Server(ap.parse_args()).serve()


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(0)
