"""A frame-level HTTP/2 client for the HTTP/2 tests: it sends exactly the frames a test builds —
valid or not — and reads the proxy's frames back (hyperframe for the framing, hpack for header
blocks; both come with the `h2` package). It answers the proxy's SETTINGS and nothing else on its
own, so a test sees every RST_STREAM, GOAWAY and WINDOW_UPDATE the proxy sends."""

import select
import socket
import ssl
import time

import hpack
from hyperframe.frame import (ContinuationFrame, DataFrame, Frame, GoAwayFrame, HeadersFrame, PingFrame,
                              RstStreamFrame, SettingsFrame, WindowUpdateFrame)

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

ERROR_CODES = {0: "NO_ERROR", 1: "PROTOCOL_ERROR", 2: "INTERNAL_ERROR", 3: "FLOW_CONTROL_ERROR",
               5: "STREAM_CLOSED", 6: "FRAME_SIZE_ERROR", 7: "REFUSED_STREAM", 8: "CANCEL",
               9: "COMPRESSION_ERROR", 11: "ENHANCE_YOUR_CALM"}


class Response:
    def __init__(self):
        self.headers = []
        self.informational = []
        self.body = bytearray()
        self.ended = False
        self.reset = None

    @property
    def status(self):
        for k, v in self.headers:
            if k == ":status":
                return int(v)
        return None

    def header(self, name):
        return [v for k, v in self.headers if k == name]


class RawH2:
    def __init__(self, port, tls=True, cafile=None, timeout=5.0, settings=None, window=None):
        raw = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        if tls:
            ctx = ssl.create_default_context(cafile=cafile)
            ctx.check_hostname = False
            if cafile is None:
                ctx.verify_mode = ssl.CERT_NONE
            ctx.set_alpn_protocols(["h2"])
            self.sock = ctx.wrap_socket(raw, server_hostname="localhost")
            assert self.sock.selected_alpn_protocol() == "h2", self.sock.selected_alpn_protocol()
        else:
            self.sock = raw
        self.encoder = hpack.Encoder()
        self.decoder = hpack.Decoder()
        self.buffer = b""
        self.frames = []
        self.responses = {}
        self.goaway = None
        self.server_settings = {}
        self.closed = False
        self.sock.sendall(PREFACE + SettingsFrame(0, settings=settings or {}).serialize())
        if window:
            self.sock.sendall(WindowUpdateFrame(0, window_increment=window).serialize())

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- sending

    def send(self, *frames):
        self.sock.sendall(b"".join(f.serialize() for f in frames))

    def header_block(self, headers):
        return self.encoder.encode(headers)

    def headers(self, sid, headers, end_stream=True):
        flags = ["END_HEADERS"] + (["END_STREAM"] if end_stream else [])
        return HeadersFrame(sid, data=self.header_block(headers), flags=flags)

    def request(self, sid, method="GET", path="/echo", authority="localhost", extra=(), body=None, end_stream=True):
        hdrs = [(":method", method), (":scheme", "https"), (":authority", authority), (":path", path), *extra]
        if body is None:
            self.send(self.headers(sid, hdrs, end_stream=end_stream))
        else:
            self.send(self.headers(sid, hdrs, end_stream=False),
                      DataFrame(sid, data=body, flags=["END_STREAM"] if end_stream else []))
        return sid

    def data(self, sid, data, end_stream=False):
        """DATA frames of at most 16 KiB (the default SETTINGS_MAX_FRAME_SIZE)."""
        pieces = [data[i:i + 16384] for i in range(0, len(data), 16384)] or [b""]
        self.send(*[DataFrame(sid, data=p, flags=["END_STREAM"] if end_stream and i == len(pieces) - 1 else [])
                    for i, p in enumerate(pieces)])

    # -- receiving

    def _read_frame(self, deadline):
        while True:
            if len(self.buffer) >= 9:
                frame, length = Frame.parse_frame_header(memoryview(self.buffer[:9]))
                if len(self.buffer) >= 9 + length:
                    frame.parse_body(memoryview(self.buffer[9:9 + length]))
                    self.buffer = self.buffer[9 + length:]
                    return frame
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no frame in time")
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(65536)
            except (ConnectionResetError, ssl.SSLError):
                chunk = b""
            if not chunk:
                self.closed = True
                raise EOFError("connection closed")
            self.buffer += chunk

    def _handle(self, frame):
        self.frames.append(frame)
        if isinstance(frame, SettingsFrame):
            if "ACK" not in frame.flags:
                self.server_settings.update(frame.settings)
                self.send(SettingsFrame(0, flags=["ACK"]))
        elif isinstance(frame, GoAwayFrame):
            self.goaway = frame
        elif isinstance(frame, (HeadersFrame, ContinuationFrame)):
            r = self.responses.setdefault(frame.stream_id, Response())
            headers = [(k.decode() if isinstance(k, bytes) else k, v.decode() if isinstance(v, bytes) else v)
                       for k, v in self.decoder.decode(frame.data)]
            status = dict(headers).get(":status")
            if status is not None and int(status) < 200:
                r.informational.append(headers)
            else:
                r.headers += headers
            if "END_STREAM" in frame.flags:
                r.ended = True
        elif isinstance(frame, DataFrame):
            r = self.responses.setdefault(frame.stream_id, Response())
            r.body += frame.data
            if frame.flow_controlled_length:
                # Keep the proxy's windows open: a test that wants them shut reads nothing.
                self.send(WindowUpdateFrame(0, window_increment=frame.flow_controlled_length),
                          WindowUpdateFrame(frame.stream_id, window_increment=frame.flow_controlled_length))
            if "END_STREAM" in frame.flags:
                r.ended = True
        elif isinstance(frame, RstStreamFrame):
            r = self.responses.setdefault(frame.stream_id, Response())
            r.reset = ERROR_CODES.get(frame.error_code, frame.error_code)

    def read_until(self, predicate, timeout=5.0):
        """Reads frames until predicate(self) is true; returns False if the connection closed first."""
        deadline = time.monotonic() + timeout
        while not predicate(self):
            try:
                self._handle(self._read_frame(deadline))
            except (EOFError, TimeoutError):
                return predicate(self)
        return True

    def response(self, sid, timeout=5.0):
        self.read_until(lambda c: sid in c.responses and (c.responses[sid].ended or c.responses[sid].reset), timeout)
        return self.responses.get(sid)

    def read_available(self):
        """Handles the frames that have already arrived, without waiting for more: for a test that
        sends and reads in turn on one thread (an SSL socket must not be read and written from two
        threads at once: OpenSSL forbids it, and the reader then loses records now and then)."""
        while not self.closed:
            pending = isinstance(self.sock, ssl.SSLSocket) and self.sock.pending()
            if not pending and len(self.buffer) < 9 and not select.select([self.sock], [], [], 0)[0]:
                return
            try:
                self._handle(self._read_frame(time.monotonic() + 5.0))
            except (EOFError, TimeoutError):
                return

    def wait_closed(self, timeout=5.0):
        deadline = time.monotonic() + timeout
        try:
            while True:
                self._handle(self._read_frame(deadline))
        except EOFError:
            return True
        except TimeoutError:
            return False

    @property
    def goaway_code(self):
        return None if self.goaway is None else ERROR_CODES.get(self.goaway.error_code, self.goaway.error_code)


__all__ = ["RawH2", "Response", "PREFACE", "ContinuationFrame", "DataFrame", "HeadersFrame", "PingFrame",
           "RstStreamFrame", "SettingsFrame", "WindowUpdateFrame", "GoAwayFrame"]
