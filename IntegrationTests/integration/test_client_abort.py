"""A client that goes away mid-request takes its upstream exchange with it: the upstream sees its
connection closed (it is not left streaming, waiting, or pooled half-used), and the proxy stays
healthy for everybody else."""

import socket
import struct
import time

from helpers import MiB, pattern_slice


def closes_in_phase(rec, phase):
    return [e for e in rec.closes() if e["phase"] == phase]


def abortive_close(c):
    c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    c.close()


def assert_proxy_still_serves(p):
    with p.conn() as c:
        c.request("GET", "/echo?still-alive=1")
        r = c.read_response()
        assert r.status == 200 and r.json()["target"] == "/echo?still-alive=1"


def test_client_abort_mid_upload_closes_upstream_connection(proxy, upstream):
    c = proxy.conn()
    c.send(b"POST /sink HTTP/1.1\r\nHost: test.local\r\nContent-Length: %d\r\n\r\n" % (10 * MiB))
    c.send(pattern_slice(0, 1 * MiB))
    assert upstream.record.wait_for(lambda r: r.requests(), timeout=3), \
        "the upload never started upstream"
    time.sleep(0.2)
    c.close()
    ok = upstream.record.wait_for(lambda r: closes_in_phase(r, "body"), timeout=3)
    assert ok, f"the upstream connection was not closed mid-body: {upstream.record.closes()}"
    assert not upstream.record.events("body_done"), "the upstream saw a complete body"
    assert_proxy_still_serves(proxy)


def test_client_reset_mid_chunked_upload_closes_upstream_connection(proxy, upstream):
    c = proxy.conn()
    c.send(b"POST /sink HTTP/1.1\r\nHost: test.local\r\nTransfer-Encoding: chunked\r\n\r\n"
           b"100000\r\n" + pattern_slice(0, 0x100000).tobytes() + b"\r\n")
    assert upstream.record.wait_for(lambda r: r.requests(), timeout=3)
    time.sleep(0.2)
    abortive_close(c)
    ok = upstream.record.wait_for(lambda r: closes_in_phase(r, "body"), timeout=3)
    assert ok, f"the upstream connection was not closed mid-body: {upstream.record.closes()}"
    assert not upstream.record.events("body_done")
    assert_proxy_still_serves(proxy)


def test_client_abort_while_waiting_for_response_closes_upstream(proxy, upstream):
    c = proxy.conn()
    c.request("GET", "/slow?ms=2500")
    assert upstream.record.wait_for(lambda r: r.requests(), timeout=3)
    time.sleep(0.2)
    c.close()
    ok = upstream.record.wait_for(lambda r: r.notes("peer-closed-while-waiting"), timeout=1.5)
    assert ok, "the upstream kept waiting on a request whose client had gone"
    assert_proxy_still_serves(proxy)
    # The access log says why the request has no status: the client left, not the upstream.
    aborted = [l for l in proxy.wait_access_log(2) if l["path"] == "/slow"]
    assert len(aborted) == 1 and aborted[0]["status"] == 0, aborted
    assert aborted[0]["error"] == "client_closed" and aborted[0]["error_source"] == "client", aborted


def test_client_abort_mid_download_stops_the_upstream(proxy_factory, upstream):
    p = proxy_factory(upstream, opts={"--upstream-timeout": "30s"})
    total = 1024 * MiB
    c = p.conn(timeout=10)
    c.request("GET", f"/bytes?n={total}")
    r = c.read_head()
    assert r.status == 200
    got = 0
    while got < 4 * MiB:
        got += len(c.sock.recv(1 << 20))
    abortive_close(c)
    closes = upstream.record.wait_for(lambda rec: closes_in_phase(rec, "response"), timeout=3)
    assert closes, "the upstream kept streaming to a client that was gone"
    assert closes[0]["sent"] < total, closes[0]
    assert_proxy_still_serves(p)


def test_client_abort_before_request_completes_sends_nothing(proxy, upstream):
    c = proxy.conn()
    c.send(b"GET /echo HTTP/1.1\r\nHost: test.local\r\nX-Partial: ye")
    time.sleep(0.2)
    c.close()
    time.sleep(0.3)
    assert upstream.record.total_received() == 0, upstream.record.raw()[:300]
    assert_proxy_still_serves(proxy)
