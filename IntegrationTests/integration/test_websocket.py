"""WebSocket through the proxy: the Upgrade handshake is forwarded (Upgrade/Connection survive
hop-by-hop removal for this one purpose), then bytes are tunnelled both ways unchanged.

The handshake and framing are written by hand (RFC 6455 §4, §5); client frames are masked."""

import base64
import hashlib
import os
import struct

from helpers import pattern_slice

WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def ws_handshake(c, target="/ws", extra=()):
    key = base64.b64encode(os.urandom(16)).decode()
    c.request("GET", target, [("Upgrade", "websocket"), ("Connection", "Upgrade"),
                              ("Sec-WebSocket-Key", key), ("Sec-WebSocket-Version", "13")]
              + list(extra))
    return c.read_response(), key


def ws_accept(key):
    return base64.b64encode(hashlib.sha1((key + WS_GUID).encode()).digest()).decode()


def ws_frame(opcode, payload, fin=True, mask=True):
    b0 = (0x80 if fin else 0) | opcode
    n = len(payload)
    mbit = 0x80 if mask else 0
    if n < 126:
        hdr = bytes([b0, mbit | n])
    elif n < 65536:
        hdr = bytes([b0, mbit | 126]) + struct.pack(">H", n)
    else:
        hdr = bytes([b0, mbit | 127]) + struct.pack(">Q", n)
    if not mask:
        return hdr + payload
    key = os.urandom(4)
    if n:
        m = (key * (n // 4 + 1))[:n]
        payload = (int.from_bytes(payload, "big") ^ int.from_bytes(m, "big")).to_bytes(n, "big")
    return hdr + key + payload


def ws_send(c, opcode, payload, fin=True):
    c.send(ws_frame(opcode, payload, fin))


def ws_recv(c, timeout=5.0):
    """One server frame: (opcode, payload). Server frames must not be masked."""
    import time
    deadline = time.monotonic() + timeout

    def need(n):
        while len(c.buf) < n:
            if not c._fill(deadline):
                raise AssertionError(f"connection closed inside a websocket frame "
                                     f"({c.eof}); have {bytes(c.buf[:100])!r}")
    need(2)
    b0, b1 = c.buf[0], c.buf[1]
    assert not b1 & 0x80, "server frame is masked"
    n = b1 & 0x7F
    hl = 2
    if n == 126:
        need(4)
        n = struct.unpack(">H", c.buf[2:4])[0]
        hl = 4
    elif n == 127:
        need(10)
        n = struct.unpack(">Q", c.buf[2:10])[0]
        hl = 10
    need(hl + n)
    payload = bytes(c.buf[hl:hl + n])
    del c.buf[:hl + n]
    return b0 & 0x0F, payload


def test_websocket_handshake_is_forwarded_and_accept_key_is_the_upstreams(proxy, upstream):
    with proxy.conn() as c:
        r, key = ws_handshake(c)
        assert r.status == 101, r
        assert "websocket" in r.tokens("upgrade")
        assert "upgrade" in r.tokens("connection")
        assert r.one("sec-websocket-accept") == ws_accept(key)
    req = upstream.record.requests()[0]
    assert req["method"] == "GET" and req["target"] == "/ws"


def test_websocket_text_binary_ping_and_close_are_echoed(proxy, upstream):
    with proxy.conn() as c:
        r, _ = ws_handshake(c)
        assert r.status == 101, r
        ws_send(c, 0x1, b"hello through the proxy")
        assert ws_recv(c) == (0x1, b"hello through the proxy")
        big = pattern_slice(0, 300_000).tobytes()          # 64-bit length form
        ws_send(c, 0x2, big)
        assert ws_recv(c) == (0x2, big)
        mid = pattern_slice(7, 1000).tobytes()              # 16-bit length form
        ws_send(c, 0x2, mid)
        assert ws_recv(c) == (0x2, mid)
        ws_send(c, 0x9, b"ping!")
        assert ws_recv(c) == (0xA, b"ping!")
        ws_send(c, 0x8, struct.pack(">H", 1000) + b"bye")
        assert ws_recv(c) == (0x8, struct.pack(">H", 1000) + b"bye")
        assert c.wait_closed(3), "the proxy kept the client side open after the upstream closed"
    frames = upstream.record.notes("ws-frame")
    assert [f["opcode"] for f in frames] == [1, 2, 2, 9, 8]


def test_websocket_many_small_frames_in_one_write_arrive_in_order(proxy):
    with proxy.conn() as c:
        r, _ = ws_handshake(c)
        assert r.status == 101, r
        msgs = [f"message {i}".encode() for i in range(200)]
        c.send(b"".join(ws_frame(0x1, m) for m in msgs))
        got = [ws_recv(c) for _ in msgs]
        assert got == [(0x1, m) for m in msgs]


def test_websocket_upstream_closing_closes_client_and_logs_the_tunnel_once(proxy):
    """The tunnel's line is written when the connection closes — also when the client answers the
    upstream's close at once (it used to be written only when that lingering close timed out)."""
    with proxy.conn() as c:
        r, _ = ws_handshake(c, "/ws?close_after=1")
        assert r.status == 101, r
        ws_send(c, 0x1, b"last words")
        assert ws_recv(c) == (0x1, b"last words")
        # the upstream now sends a 1001 close and hangs up without waiting for ours
        op, payload = ws_recv(c)
        assert op == 0x8 and payload == struct.pack(">H", 1001)
        assert c.wait_closed(3), "the client side stayed open after the upstream hung up"
    lines = [l for l in proxy.wait_access_log(1) if l["path"].split("?")[0] == "/ws"]
    assert len(lines) == 1 and lines[0]["status"] == 101, lines
    assert "error" not in lines[0], lines


def test_websocket_client_closing_closes_upstream(proxy, upstream):
    c = proxy.conn()
    r, _ = ws_handshake(c)
    assert r.status == 101, r
    ws_send(c, 0x1, b"x")
    assert ws_recv(c) == (0x1, b"x")
    c.close()
    assert upstream.record.wait_for(
        lambda rec: any(e["phase"] == "websocket" for e in rec.closes()), timeout=3), \
        "the upstream websocket connection stayed open after the client went away"


def test_refused_upgrade_is_an_ordinary_response(proxy, upstream):
    with proxy.conn() as c:
        # missing Sec-WebSocket-Key: the upstream answers 400 and closes; no tunnel is made
        c.request("GET", "/ws", [("Upgrade", "websocket"), ("Connection", "Upgrade"),
                                 ("Sec-WebSocket-Version", "13")])
        r = c.read_response()
        assert r.status == 400
        assert r.body == b"bad websocket handshake\n"
