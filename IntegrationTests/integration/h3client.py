"""An HTTP/3 client for the tests, on aioquic (PyPI): one QUIC connection, requests sent on
streams of it concurrently, each answer collected whole (or as far as a reset let it come).

    with H3(port, ca=cert) as c:
        r = c.request("GET", "/echo")
        rs = c.many([("GET", "/a"), ("POST", "/b", b"body")])

The connection runs on an asyncio loop in a thread of its own, so that tests stay synchronous.
A reader that must be slow (`slow_read`) withholds flow-control credit as a real slow client does.
"""

import asyncio
import ssl
import threading

from aioquic.asyncio.client import connect
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import DataReceived, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import ConnectionTerminated, StreamReset


class Response:
    def __init__(self):
        self.headers = []
        self._body = bytearray()
        self.reset = None  # the stream's reset code, if it was reset
        self.done = None   # a future, set when the stream ends or is reset

    @property
    def body(self):
        return bytes(self._body)

    @property
    def status(self):
        return int(self.header(":status") or 0)

    def header(self, name):
        for k, v in self.headers:
            if k.decode() == name:
                return v.decode()
        return None

    def all(self, name):
        return [v.decode() for k, v in self.headers if k.decode() == name]


class _H3(H3Connection):
    """aioquic checks a response's content-length against its DATA without knowing the request's
    method; a HEAD response (RFC 9114 §4.1.2: "MAY have a non-zero content-length") is exempt."""

    head_streams = None

    def _check_content_length(self, stream):
        if stream.stream_id in self.head_streams:
            return
        super()._check_content_length(stream)


class _Protocol(QuicConnectionProtocol):
    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.h3 = _H3(self._quic)
        self.h3.head_streams = set()
        self.responses = {}
        self.terminated = None

    def quic_event_received(self, event):
        if isinstance(event, ConnectionTerminated):
            self.terminated = event
            for r in self.responses.values():
                if not r.done.done():
                    r.done.set_result(r)
            return
        if isinstance(event, StreamReset):
            r = self.responses.get(event.stream_id)
            if r is not None:
                r.reset = event.error_code
                if not r.done.done():
                    r.done.set_result(r)
            return
        for e in self.h3.handle_event(event):
            r = self.responses.get(getattr(e, "stream_id", None))
            if r is None:
                continue
            if isinstance(e, HeadersReceived):
                if not r.headers or r.header(":status").startswith("1"):
                    r.headers = e.headers
                else:
                    r.headers += e.headers  # trailers
            elif isinstance(e, DataReceived):
                r._body += e.data
            if getattr(e, "stream_ended", False) and not r.done.done():
                r.done.set_result(r)

    def send(self, method, path, headers=(), body=None, authority=None, raw_headers=None):
        sid = self._quic.get_next_available_stream_id()
        if method == "HEAD":
            self.h3.head_streams.add(sid)
        r = Response()
        r.done = asyncio.get_event_loop().create_future()
        self.responses[sid] = r
        if raw_headers is not None:
            fields = raw_headers
        else:
            fields = [(b":method", method.encode()), (b":scheme", b"https"),
                      (b":authority", (authority or self.authority).encode()), (b":path", path.encode())]
            fields += [(k.encode(), v.encode()) for k, v in headers]
        self.h3.send_headers(sid, fields, end_stream=body is None)
        if body is not None:
            self.h3.send_data(sid, body, end_stream=True)
        self.transmit()
        return r


class H3:
    # The protocol class a connection runs (a subclass of _Protocol may watch more events).
    protocol = _Protocol

    def __init__(self, port, ca=None, host="127.0.0.1", authority=None, timeout=20, max_stream_data=None,
                 session_ticket=None, server_name="localhost"):
        self.port, self.host, self.ca, self.timeout = port, host, ca, timeout
        self.authority = authority or f"localhost:{port}"
        self.max_stream_data = max_stream_data
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.session_ticket = session_ticket
        self.server_name = server_name  # the TLS SNI (None: none sent)
        self.tickets = []  # session tickets the server issued on this connection
        self.proto = None
        self._cm = None

    def __enter__(self):
        self.thread.start()
        self._call(self._open())
        return self

    def __exit__(self, *exc):
        try:
            self._call(self._close(), timeout=5)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(5)

    def _call(self, coro, timeout=None):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout or self.timeout)

    async def _open(self):
        config = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN, server_name=self.server_name)
        if self.ca:
            config.load_verify_locations(self.ca)
        else:
            config.verify_mode = ssl.CERT_NONE
        if self.max_stream_data:
            config.max_stream_data = self.max_stream_data
            config.max_data = self.max_stream_data * 4
        if self.session_ticket is not None:
            config.session_ticket = self.session_ticket
        self._cm = connect(self.host, self.port, configuration=config, create_protocol=self.protocol,
                           session_ticket_handler=self.tickets.append)
        self.proto = await self._cm.__aenter__()
        self.proto.authority = self.authority

    async def _close(self):
        await self._cm.__aexit__(None, None, None)

    @property
    def quic(self):
        return self.proto._quic

    def request(self, method, path, headers=(), body=None, **kw):
        return self.many([(method, path, headers, body)], **kw)[0]

    def many(self, requests, **kw):
        async def run():
            rs = []
            for req in requests:
                method, path, *rest = req
                headers = rest[0] if rest else ()
                body = rest[1] if len(rest) > 1 else None
                rs.append(self.proto.send(method, path, headers, body, **kw))
            await asyncio.wait_for(asyncio.gather(*(r.done for r in rs)), self.timeout)
            return rs
        return self._call(run(), timeout=self.timeout + 5)

    def raw(self, fields, body=None):
        """A request whose field section is exactly `fields` (bytes pairs): for malformed ones."""
        async def run():
            r = self.proto.send(None, None, raw_headers=fields, body=body)
            await asyncio.wait_for(r.done, self.timeout)
            return r
        return self._call(run(), timeout=self.timeout + 5)

    def peer_certificate(self):
        """The certificate the server presented (cryptography's x509.Certificate)."""
        return self.quic.tls._peer_certificate

    def terminated(self):
        return self.proto.terminated

    def resumed(self):
        """Whether the TLS handshake resumed a session (a ticket from an earlier connection)."""
        return bool(self.quic.tls.session_resumed)

    def early_data_accepted(self):
        return bool(self.quic.tls.early_data_accepted)

    def ping_flood(self, n):
        """`n` packets that carry nothing but a PING, each sent on its own; then waits a moment for
        the server's answer. Whether the connection survived: `terminated()`."""
        async def run():
            for i in range(n):
                if self.proto.terminated:
                    break
                self.quic.send_ping(i)
                self.proto.transmit()
                await asyncio.sleep(0)
            await asyncio.sleep(0.3)
        self._call(run())

    def open_and_reset(self, n, code=0x10C):
        """`n` request streams, each opened (its HEADERS sent) and reset at once by the client
        (H3_REQUEST_CANCELLED by default): the "rapid reset" pattern."""
        async def run():
            for _ in range(n):
                if self.proto.terminated:
                    break
                sid = self.quic.get_next_available_stream_id()
                self.proto.h3.send_headers(sid, [(b":method", b"GET"), (b":scheme", b"https"),
                                                 (b":authority", self.authority.encode()), (b":path", b"/slow?ms=2000")])
                self.proto.transmit()
                self.quic.reset_stream(sid, code)
                self.proto.transmit()
                await asyncio.sleep(0)
            await asyncio.sleep(0.3)
        self._call(run())

    def change_port(self):
        """Moves the client to a new local port mid-connection (as a NAT rebinding does)."""
        async def run():
            self.quic.change_connection_id()
            transport = self.proto._transport
            sock = transport.get_extra_info("socket")
            import socket as s
            new = s.socket(sock.family, s.SOCK_DGRAM)
            new.bind(("127.0.0.1", 0) if sock.family == s.AF_INET else ("::", 0))
            new.setblocking(False)
            old_port = sock.getsockname()[1]
            loop = asyncio.get_event_loop()
            t, _ = await loop.create_datagram_endpoint(lambda: self.proto, sock=new)
            transport.close()
            self.proto._transport = t
            return old_port, new.getsockname()[1]
        return self._call(run())
