"""HTTP/3 to clients (`http3.enabled`, experimental): QUIC on UDP beside the TLS listener, same
port and certificate, each request stream an exchange like any other, translated to HTTP/1.1 for
the strict test upstream. Driven by aioquic (PyPI) as the client (h3client.py): requests and
bodies both ways, many streams on one connection, the stream limit, Retry, a client that changes
its address, malformed requests, GOAWAY on SIGTERM and on reload, Alt-Svc.
"""

import hashlib
import json
import os
import shutil
import socket
import signal
import subprocess
import threading
import time

import pytest

from cryptography.x509.oid import NameOID
from h3client import H3
from test_http2 import cert  # noqa: F401 (the module's certificate fixture, shared)
from test_observability import samples, scrape, value
from helpers import free_port
from upstream import pattern_bytes
from test_reload import reload

# RFC 9114 §8.1
H3_MESSAGE_ERROR = 0x10E
H3_REQUEST_REJECTED = 0x10B
H3_INTERNAL_ERROR = 0x102


@pytest.fixture
def h3_proxy(proxy_factory, upstream, cert, tmp_path):
    def start(config="", opts=None, extra_listen=None, **kw):
        crt, key = cert
        cfg = tmp_path / f"h3-{time.monotonic_ns()}.yaml"
        cfg.write_text("http3:\n  enabled: true\n" + config)
        more = ["--listen", extra_listen] if extra_listen else []
        proxy = proxy_factory(upstream, extra=["--tls-cert", crt, "--tls-key", key, "--config", str(cfg), *more], opts=opts, **kw)
        proxy.cfg = cfg
        return proxy
    return start


def client(proxy, cert, **kw):
    return H3(proxy.port, ca=cert[0], **kw)


def echo(r):
    assert r.status == 200, (r.status, r.reset, r.body[:300])
    return json.loads(r.body)


# ---------------------------------------------------------------------------------------------
# Requests


def test_a_get_over_h3_reaches_the_app_as_http11_with_the_usual_forwarding_fields(h3_proxy, cert):
    proxy = h3_proxy()
    with client(proxy, cert) as c:
        r = c.request("GET", "/echo?x=1", [("accept", "application/json")])
    e = echo(r)
    assert e["version"] == "HTTP/1.1" and e["target"] == "/echo?x=1" and e["method"] == "GET"
    h = {k.lower(): v for k, v in e["headers"]}
    assert h["host"] == f"localhost:{proxy.port}"  # from :authority
    assert h["x-forwarded-proto"] == "https"
    assert h["x-forwarded-for"] == "127.0.0.1"
    assert [k.lower() for k, _ in e["headers"]].count("host") == 1
    # the same response fields an HTTP/1.1 client gets, minus connection-specific ones
    assert r.header("content-type") == "application/json"
    assert r.header("connection") is None and r.header("keep-alive") is None
    assert r.header("alt-svc") == f'h3=":{proxy.port}"; ma=86400'
    line = proxy.wait_access_log(1)[-1]
    assert line["protocol"] == "h3" and line["status"] == 200 and line["path"] == "/echo"
    s = samples(scrape(proxy))
    assert value(s, "callback_proxy_http3_connections_total") == 1
    assert value(s, "callback_proxy_http3_streams_total") == 1
    assert value(s, "callback_proxy_http3_handshakes_failed_total") == 0


def test_head_has_the_length_and_no_body(h3_proxy, cert):
    proxy = h3_proxy()
    with client(proxy, cert) as c:
        r = c.request("HEAD", "/bytes?n=5000")
    assert r.status == 200 and r.header("content-length") == "5000" and r.body == b""


def test_request_bodies_reach_the_app_whole_with_and_without_a_length(h3_proxy, cert):
    proxy = h3_proxy()
    small = b"a=1&b=2"
    big = pattern_bytes(0, 3 * 1024 * 1024 + 17)  # past the stream window: credit must come back
    with client(proxy, cert) as c:
        rs = c.many([
            ("POST", "/echo", [("content-type", "application/x-www-form-urlencoded"), ("content-length", str(len(small)))], small),
            ("POST", "/sink?pattern=1", [], big),  # no content-length: chunked to the app
            ("PUT", "/echo", [("content-length", "0")], b""),
        ])
    e = echo(rs[0])
    assert e["body_len"] == len(small) and e["body_sha256"] == hashlib.sha256(small).hexdigest()
    sink = json.loads(rs[1].body)
    assert rs[1].status == 200 and sink["len"] == len(big) and sink["pattern_ok"] is True
    assert echo(rs[2])["body_len"] == 0


def test_a_large_download_arrives_whole(h3_proxy, cert):
    proxy = h3_proxy()
    n = 8 * 1024 * 1024 + 5
    with client(proxy, cert, timeout=60) as c:
        r = c.request("GET", f"/bytes?n={n}")
    assert r.status == 200 and len(r.body) == n
    assert r.body == pattern_bytes(0, n)
    line = proxy.wait_access_log(1)[-1]
    assert line["bytes_out"] >= n


def test_32_mib_to_a_client_slower_than_the_app_arrive_whole_and_the_proxy_holds_a_bounded_amount(h3_proxy, cert):
    """aioquic takes a few tens of MB/s; the app sends as fast as loopback allows. The proxy must
    pace the upstream (its output stops being read while nghttp3 holds unacknowledged bytes)
    rather than hold the body, and nothing is lost."""
    proxy = h3_proxy()
    n = 32 * 1024 * 1024
    rss_before = rss_kib(proxy.pid)
    peak = [rss_before]
    stop = threading.Event()

    def watch():
        while not stop.is_set():
            peak[0] = max(peak[0], rss_kib(proxy.pid))
            time.sleep(0.05)
    t = threading.Thread(target=watch, daemon=True)
    t.start()
    try:
        with client(proxy, cert, timeout=120, max_stream_data=256 * 1024) as c:
            r = c.request("GET", f"/bytes?n={n}")
    finally:
        stop.set()
        t.join()
    assert r.status == 200 and len(r.body) == n and hashlib.sha256(r.body).digest() == hashlib.sha256(pattern_bytes(0, n)).digest()
    # 32 MiB went through; the proxy grew by a small fraction of it
    assert peak[0] - rss_before < 12 * 1024, (rss_before, peak[0])


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def test_an_app_that_dies_mid_response_resets_that_stream_only(h3_proxy, cert):
    """The upstream closes after 300 KiB of a 2 MiB body: the client's stream is reset (the body
    is visibly cut, never passed off as complete), the connection and its other streams go on."""
    proxy = h3_proxy()
    with client(proxy, cert, timeout=20) as c:
        cut, ok = c.many([("GET", f"/bytes?n={2 << 20}&cut={300 << 10}"), ("GET", "/slow?ms=300")])
        assert cut.reset == H3_INTERNAL_ERROR and len(cut.body) < 2 << 20, (cut.status, cut.reset, len(cut.body))
        assert ok.status == 200 and ok.body == b"slow done\n"
        assert c.request("GET", "/echo").status == 200 and c.terminated() is None
    s = samples(scrape(proxy))
    assert value(s, "callback_proxy_http3_connection_errors_total") == 0


def test_a_hundred_concurrent_streams_on_one_connection(h3_proxy, cert):
    proxy = h3_proxy()
    with client(proxy, cert) as c:
        rs = c.many([("GET", f"/echo?i={i}") for i in range(100)])
    targets = sorted(echo(r)["target"] for r in rs)
    assert targets == sorted(f"/echo?i={i}" for i in range(100))
    s = samples(scrape(proxy))
    assert value(s, "callback_proxy_http3_connections_total") == 1
    assert value(s, "callback_proxy_http3_streams_total") == 100
    # The client closed (CONNECTION_CLOSE): the connection stops counting at once (its IDs wait
    # out the draining period).
    deadline = time.monotonic() + 3
    while value(samples(scrape(proxy)), "callback_proxy_open_connections", listener="public") != 0:
        assert time.monotonic() < deadline, "the closed QUIC connection still counts"
        time.sleep(0.05)


def test_past_the_stream_limit_streams_wait_for_credit_and_the_connection_goes_on(h3_proxy, cert):
    """http3.max_streams is QUIC's stream credit: a client may not open more at once, and each
    stream that ends gives one back — so 30 requests over a limit of 4 all complete, on one
    connection, never more than 4 at the app at a time."""
    proxy = h3_proxy("  max_streams: 4\n")
    with client(proxy, cert, timeout=30) as c:
        assert c.quic._remote_max_streams_bidi == 4
        rs = c.many([("GET", "/slow?ms=100") for _ in range(30)])
        assert all(r.status == 200 for r in rs)
        assert c.quic._remote_max_streams_bidi >= 30
        assert c.terminated() is None


def test_a_malformed_request_is_a_stream_error_and_the_connection_goes_on(h3_proxy, cert, upstream):
    proxy = h3_proxy()
    base = [(b":method", b"GET"), (b":scheme", b"https"), (b":authority", f"localhost:{proxy.port}".encode())]
    before = len(upstream.record.requests())
    with client(proxy, cert) as c:
        cases = [
            base + [(b":path", b"/echo"), (b"X-Upper", b"1")],            # uppercase name
            base + [(b":path", b"/echo"), (b"connection", b"close")],     # connection-specific
            base + [(b":path", b"/echo"), (b"te", b"gzip")],              # TE other than trailers
            base,                                                         # no :path
            [(b":method", b"GET"), (b":path", b"/echo")],                 # no :scheme
            base + [(b":path", b"/echo"), (b":protocol", b"websocket")],  # unknown pseudo-header
        ]
        for fields in cases:
            r = c.raw(fields)
            assert r.reset == H3_MESSAGE_ERROR or r.status == 400, (fields, r.reset, r.status)
        ok = c.request("GET", "/echo")
        assert ok.status == 200 and c.terminated() is None
    # none of them reached the app
    assert len(upstream.record.requests()) == before + 1


def test_connect_is_refused(h3_proxy, cert):
    proxy = h3_proxy()
    with client(proxy, cert) as c:
        r = c.raw([(b":method", b"CONNECT"), (b":authority", b"example.com:443")])
        assert r.reset == H3_MESSAGE_ERROR or r.status in (400, 405, 501), (r.reset, r.status)


def test_retry_always_makes_every_new_client_prove_its_address_first(h3_proxy, cert):
    proxy = h3_proxy("  retry: always\n")
    with client(proxy, cert) as c:
        assert echo(c.request("GET", "/echo"))["method"] == "GET"
    with client(proxy, cert) as c:
        assert c.request("GET", "/echo").status == 200
    s = samples(scrape(proxy))
    assert value(s, "callback_proxy_http3_retries_sent_total") == 2
    assert value(s, "callback_proxy_http3_connections_total") == 2


def test_a_client_that_changes_its_port_mid_connection_keeps_its_connection(h3_proxy, cert):
    """NAT rebinding with a new connection ID: the same connection continues from a new address
    (ngtcp2 validates the new path). With two loops the kernel picks either loop's socket for the
    new address; the one that does not own the connection hands the datagrams to the loop its
    connection ID names, which answers from its own socket on the same address. Each connection
    moves once, until a move has been handed over (each: one chance in two).

    One move per connection, because of ngtcp2 0.12 (read in its source, seen in its log): when
    aioquic moves, its first packet with the new ID often leaves from the old port, so ngtcp2
    takes the move for NAT rebinding and keeps its ID for the client, then checks the old path
    for three PTOs. A second move inside that window takes a new ID, and ngtcp2 retires the old
    one while still counting it as the new path's fallback; the client's replacement for it then
    counts one over `active_connection_id_limit`, and ngtcp2 ends the connection with
    CONNECTION_ID_LIMIT_ERROR (one connection in two that moved twice at once, at any limit:
    ngtcp2 allows at most eight, what aioquic fills). Not reachable from the proxy's side."""
    proxy = h3_proxy(opts={"--loops": "2"})
    for attempt in range(12):
        with client(proxy, cert) as c:
            assert c.request("GET", "/echo").status == 200
            old, new = c.change_port()
            assert old != new
            for i in range(3):
                r = c.request("GET", f"/echo?move={attempt}&i={i}")
                assert r.status == 200, (attempt, i, r.reset, c.terminated())
                assert echo(r)["target"] == f"/echo?move={attempt}&i={i}"
            assert c.terminated() is None
        s = samples(scrape(proxy))
        if value(s, "callback_proxy_http3_datagrams_handed_over_total") > 0:
            break
    assert value(s, "callback_proxy_http3_datagrams_handed_over_total") > 0
    assert value(s, "callback_proxy_http3_connections_total") == attempt + 1
    assert value(s, "callback_proxy_http3_connection_errors_total") == 0


def session_ticket(c):
    """The last session ticket the server issued on `c` (it comes just after the handshake)."""
    deadline = time.monotonic() + 3
    while not c.tickets and time.monotonic() < deadline:
        time.sleep(0.02)
    assert c.tickets, "no session ticket"
    return c.tickets[-1]


def test_a_returning_client_resumes_its_session_and_early_data_is_refused(h3_proxy, cert, upstream):
    """Session tickets (GnuTLS, issued after the handshake) let a returning client skip the full
    handshake. Early data is never accepted: a replayed 0-RTT request must not reach the app
    twice (nor a replayed /_oauth_callback the token exchange); the client sends it again at 1-RTT."""
    proxy = h3_proxy()
    with client(proxy, cert) as c:
        assert c.request("GET", "/echo?first").status == 200
        ticket = session_ticket(c)
        assert not c.resumed()
    with client(proxy, cert, session_ticket=ticket) as again:
        assert again.resumed()
        assert not again.early_data_accepted()
        assert echo(again.request("GET", "/echo?second"))["target"] == "/echo?second"
    assert [r["target"] for r in upstream.record.requests()] == ["/echo?first", "/echo?second"]


def test_a_ticket_from_one_loop_resumes_on_every_loop(h3_proxy, cert):
    """Each loop derives its ticket key itself (`QUICTicketKey`), from the process's secret and
    the same limits, so a ticket issued on one loop resumes on the other: the kernel puts each new
    connection (a new source port) on either loop's socket."""
    proxy = h3_proxy(opts={"--loops": "2"})
    with client(proxy, cert) as c:
        assert c.request("GET", "/echo").status == 200
        ticket = session_ticket(c)
    for _ in range(8):  # each lands on the other loop with one chance in two
        with client(proxy, cert, session_ticket=ticket) as again:
            assert again.resumed()
            assert again.request("GET", "/echo").status == 200


def test_quic_connections_count_towards_the_per_client_connection_limit_with_tcp_ones(h3_proxy, cert):
    """limits.max_connections_per_client counts a client's QUIC and TCP connections together, by
    address: past it, a new QUIC connection's Initial goes unanswered (counted, logged naming the
    setting); as one closes, room comes back."""
    proxy = h3_proxy("limits:\n  max_connections_per_client: 2\n")
    crt = cert[0]
    with client(proxy, cert) as a:
        assert a.request("GET", "/echo").status == 200
        tcp = socket.create_connection(("127.0.0.1", proxy.port))
        try:
            time.sleep(0.2)
            with pytest.raises(Exception):
                with H3(proxy.port, ca=crt, timeout=2) as c:
                    c.request("GET", "/echo")
        finally:
            tcp.close()
        time.sleep(0.3)
        with client(proxy, cert) as b:
            assert b.request("GET", "/echo").status == 200
    s = samples(scrape(proxy))
    assert value(s, "callback_proxy_http3_datagrams_dropped_total", reason="client_limit") >= 1
    lines = [json.loads(l) for l in proxy.stderr_text().splitlines() if "client connection refused" in l]
    assert lines and "limits.max_connections_per_client" in lines[0]["setting"]


def test_streams_past_the_connection_budget_wait_for_a_unit_and_all_are_served(h3_proxy, cert):
    """Each running stream may hold an upstream connection, so streams beyond a connection's
    first take units of limits.max_connections (the descriptor budget): with 16, one connection's
    30 concurrent slow requests run 16 at a time, the other 14 waiting for a unit instead of
    being rejected (many clients do not retry), and all 30 are answered."""
    proxy = h3_proxy("limits:\n  max_connections: 16\n")
    with client(proxy, cert, timeout=20) as c:
        started = time.monotonic()
        rs = c.many([("GET", f"/slow?ms=600&i={i}") for i in range(30)])
        took = time.monotonic() - started
        assert [r.status for r in rs] == [200] * 30, [(r.status, r.reset) for r in rs]
        assert took >= 1.1, took  # two rounds of 600 ms: the waiters did wait
        assert c.request("GET", "/echo").status == 200 and c.terminated() is None
    s = samples(scrape(proxy))
    assert value(s, "callback_proxy_http3_streams_waited_total") == 14
    assert value(s, "callback_proxy_http3_streams_refused_total") == 0
    assert any("HTTP/3 stream waits: connection limit reached" in l for l in proxy.stderr_text().splitlines())


def test_a_stream_that_waits_past_the_header_timeout_is_rejected_and_the_connection_goes_on(h3_proxy, cert):
    """A stream that waits for a unit longer than timeouts.client_header is rejected with
    H3_REQUEST_REJECTED (nothing of it was processed: safe to retry); the others are served."""
    proxy = h3_proxy("limits:\n  max_connections: 16\n", opts={"--client-header-timeout": "1s"})
    with client(proxy, cert, timeout=20) as c:
        rs = c.many([("GET", f"/slow?ms=2500&i={i}") for i in range(30)])
        answered = [r for r in rs if r.status == 200]
        rejected = [r for r in rs if r.reset == H3_REQUEST_REJECTED]
        assert (len(answered), len(rejected)) == (16, 14), [(r.status, r.reset) for r in rs]
        assert c.request("GET", "/echo").status == 200 and c.terminated() is None
    s = samples(scrape(proxy))
    assert value(s, "callback_proxy_http3_streams_waited_total") == 14
    assert value(s, "callback_proxy_http3_streams_refused_total") == 14


# ---------------------------------------------------------------------------------------------
# The socket: destination addresses (IP_PKTINFO), GRO, ECN

UDP_SEGMENT = 103  # linux/udp.h


def version_negotiation_from(family, address, port):
    """Sends, from a socket connected to `address` (so the kernel drops replies from any other
    address), a client Initial's shape with an unknown version, which the listener itself answers
    with Version Negotiation before any connection exists; asserts that the answer came."""
    pkt = bytes([0xC0]) + (0x1A2A3A4A).to_bytes(4, "big") + bytes([8]) + os.urandom(8) + bytes([8]) + os.urandom(8)
    s = socket.socket(family, socket.SOCK_DGRAM)
    try:
        s.connect((address, port))
        s.send(pkt + b"\0" * (1200 - len(pkt)))
        s.settimeout(3)
        reply = s.recv(2000)
        assert reply[0] & 0x80 and reply[1:5] == b"\0\0\0\0", (address, reply[:8])  # version 0
    finally:
        s.close()


def test_a_wildcard_listener_answers_from_the_address_the_client_reached(h3_proxy, cert, tmp_path):
    """On 0.0.0.0 every reply leaves from the address the datagram was sent to (IP_PKTINFO), not
    from the one the routing table picks: a client that reached 127.0.0.2 gets its answers from
    127.0.0.2. Its socket is connected, as ngtcp2's client's is, so the kernel drops anything
    from another address: without PKTINFO neither the listener's own reply (Version
    Negotiation) nor the connection's packets would arrive."""
    port = free_port()
    proxy = h3_proxy(extra_listen=f"0.0.0.0:{port}")
    version_negotiation_from(socket.AF_INET, "127.0.0.2", port)
    gtlsclient(proxy, ["/echo?via=127.0.0.2"], host="127.0.0.2", port=port, timeout=30)
    line = proxy.wait_access_log(1)[-1]
    assert line["protocol"] == "h3" and line["status"] == 200 and line["path"] == "/echo"
    line = proxy.wait_access_log(1)[-1]
    assert line["protocol"] == "h3" and line["status"] == 200 and line["path"] == "/echo"


def test_a_dual_stack_wildcard_listener_answers_ipv4_and_ipv6_clients_from_the_addresses_they_reached(h3_proxy, cert):
    """On `[::]` (dual-stack) an IPv4 client's datagrams arrive IPv4-mapped with an IPv4
    destination (IP_PKTINFO on an IPv6 socket), and the reply must leave through IPv4's own
    control message from that address; an IPv6 client's go through IPV6_PKTINFO."""
    port = free_port()
    proxy = h3_proxy(extra_listen=f"[::]:{port}")
    version_negotiation_from(socket.AF_INET, "127.0.0.2", port)
    version_negotiation_from(socket.AF_INET6, "::1", port)
    gtlsclient(proxy, ["/echo?via=mapped"], host="127.0.0.2", port=port, timeout=30)


def test_datagrams_the_kernel_coalesced_are_read_one_by_one(h3_proxy, cert):
    """UDP GRO: five datagrams sent in one GSO call reach the socket as one buffer (the kernel
    keeps them together for a GRO socket) and are taken apart again, each routed as a datagram
    of its own (here: short packets for no connection, each dropped)."""
    proxy = h3_proxy()
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.connect(("127.0.0.1", proxy.port))
        packets = b"".join(bytes([0x40]) + os.urandom(99) for _ in range(5))
        s.sendmsg([packets], [(socket.SOL_UDP, UDP_SEGMENT, (100).to_bytes(2, "little"))])
    finally:
        s.close()
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        s = samples(scrape(proxy))
        if value(s, "callback_proxy_http3_datagrams_received_total") >= 5:
            break
        time.sleep(0.05)
    assert value(s, "callback_proxy_http3_datagrams_received_total") == 5
    assert value(s, "callback_proxy_http3_datagrams_coalesced_total") == 5
    dropped = sum(v for (name, _), v in s.items() if name == "callback_proxy_http3_datagrams_dropped_total")
    assert dropped == 5


def test_ecn_marks_of_the_clients_packets_are_read(h3_proxy, cert, tmp_path):
    """ngtcp2's client marks its packets ECT(0) while it validates ECN; the proxy reads each
    datagram's mark (IP_RECVTOS) and hands it to ngtcp2, which reports the counts back in its
    ACKs (RFC 9000 §13.4)."""
    proxy = h3_proxy()
    gtlsclient(proxy, ["/echo"])
    s = samples(scrape(proxy))
    assert value(s, "callback_proxy_http3_datagrams_ecn_total", mark="ect0") > 0
    assert value(s, "callback_proxy_http3_datagrams_ecn_total", mark="ce") == 0


# ---------------------------------------------------------------------------------------------
# Work without progress (http3.glitch_burst)

H3_EXCESSIVE_LOAD = 0x107
TIGHT_BUDGET = "  glitch_burst: 100\n  max_glitches_per_second: 1\n"


def excessive_load_lines(proxy):
    return [json.loads(l) for l in proxy.stderr_text().splitlines() if "too much work without progress" in l]


def test_a_ping_flood_spends_the_budget_and_ends_the_connection_with_excessive_load(h3_proxy, cert):
    """Packets that carry nothing but a PING cost a unit each: past http3.glitch_burst the
    connection ends with H3_EXCESSIVE_LOAD, counted and logged naming the setting; the client's
    next connection is served."""
    proxy = h3_proxy(TIGHT_BUDGET)
    with client(proxy, cert) as c:
        assert c.request("GET", "/echo").status == 200
        c.ping_flood(300)
        t = c.terminated()
        assert t is not None and t.error_code == H3_EXCESSIVE_LOAD, t
    with client(proxy, cert) as c:
        assert c.request("GET", "/echo").status == 200
    s = samples(scrape(proxy))
    assert value(s, "callback_proxy_http3_excessive_load_total", glitch="empty_packet") == 1
    assert value(s, "callback_proxy_http3_excessive_load_total", glitch="stream_reset") == 0
    lines = excessive_load_lines(proxy)
    assert lines and lines[0]["setting"] == "http3.glitch_burst, http3.max_glitches_per_second"
    assert lines[0]["glitch"] == "packets that carry nothing new" and lines[0]["peer"] == "127.0.0.1"


def test_streams_opened_and_reset_at_once_spend_the_budget(h3_proxy, cert, upstream):
    """The rapid-reset pattern: each stream the client opens and resets costs twice (the reset,
    and the packet that carried only the reset), so the connection ends with H3_EXCESSIVE_LOAD
    after about 50 streams, where PINGs alone would take 100 packets."""
    proxy = h3_proxy(TIGHT_BUDGET)
    with client(proxy, cert) as c:
        c.open_and_reset(300)
        t = c.terminated()
        assert t is not None and t.error_code == H3_EXCESSIVE_LOAD, t
    s = samples(scrape(proxy))
    # Whichever charge found the budget empty (a connection ID made meanwhile is one too).
    ended = {g: value(s, "callback_proxy_http3_excessive_load_total", glitch=g)
             for g in ("empty_packet", "stream_reset", "connection_id")}
    assert sum(ended.values()) == 1, ended
    assert 40 <= value(s, "callback_proxy_http3_streams_total") <= 60


def test_honest_heavy_clients_never_spend_even_a_tight_budget(h3_proxy, cert):
    """The same tight budget (100 units, one a second: the least allowed) under real work: 100 concurrent streams, an
    8 MiB download, a 3 MiB upload, a slow reader's 4 MiB, on one connection each. Their ACKs,
    window updates and out-of-order packets all travel with progress, so nothing is charged
    enough to end a connection."""
    proxy = h3_proxy(TIGHT_BUDGET + "  stream_window: 64k\n  connection_window: 256k\n")
    with client(proxy, cert) as c:
        rs = c.many([("GET", f"/echo?i={i}") for i in range(100)])
        assert all(r.status == 200 for r in rs)
        r = c.request("GET", "/bytes?n=8388608")
        assert r.status == 200 and len(r.body) == 8 << 20
        body = pattern_bytes(0, 3 << 20)
        r = c.request("POST", "/sink?pattern=1", body=body)
        sink = json.loads(r.body)
        assert r.status == 200 and sink["len"] == len(body) and sink["pattern_ok"] is True
        assert c.terminated() is None
    with client(proxy, cert, max_stream_data=32 * 1024) as c:
        r = c.request("GET", "/bytes?n=4194304")
        assert r.status == 200 and len(r.body) == 4 << 20 and c.terminated() is None
    s = samples(scrape(proxy))
    assert sum(value(s, "callback_proxy_http3_excessive_load_total", glitch=g)
               for g in ("empty_packet", "stream_reset", "connection_id")) == 0
    assert excessive_load_lines(proxy) == []


# ---------------------------------------------------------------------------------------------
# A second, independent client: Debian's ngtcp2-client (gtlsclient, ngtcp2 on GnuTLS)

GTLSCLIENT = shutil.which("gtlsclient") or "/usr/bin/gtlsclient"


def gtlsclient(proxy, paths, *args, download=None, timeout=60, host="127.0.0.1", port=None):
    """Debian's ngtcp2 client: GETs `paths` on one connection to `host` (the proxy's port unless
    `port`); its whole output, once it exited 0."""
    port = port or proxy.port
    out = subprocess.run([GTLSCLIENT, "--exit-on-all-streams-close", "--no-quic-dump", "--no-http-dump",
                          *(["--download", str(download)] if download else []), *args,
                          host, str(port), *[f"https://localhost:{port}{p}" for p in paths]],
                         capture_output=True, timeout=timeout)
    text = out.stdout.decode("utf-8", "replace") + out.stderr.decode("utf-8", "replace")
    assert out.returncode == 0, text[-3000:]
    return text


def test_ngtcp2_client_downloads_with_a_key_update_and_moves_to_a_new_address(h3_proxy, cert, tmp_path):
    """Key update (RFC 9001 §6) mid-download; then, on another connection, client-initiated
    migration (a new local address, path validation) mid-download across two loops. Both bodies
    arrive byte for byte."""
    proxy = h3_proxy(opts={"--loops": "2"})
    n = 6 * 1024 * 1024
    text = gtlsclient(proxy, [f"/bytes?n={n}"], "--key-update=50ms", download=tmp_path)
    assert "key update confirmed" in text
    assert (tmp_path / f"bytes?n={n}").read_bytes() == pattern_bytes(0, n)
    (tmp_path / f"bytes?n={n}").unlink()
    text = gtlsclient(proxy, [f"/bytes?n={n}"], "--change-local-addr=50ms", download=tmp_path)
    assert "Local address is now" in text
    assert (tmp_path / f"bytes?n={n}").read_bytes() == pattern_bytes(0, n)
    s = samples(scrape(proxy))
    assert value(s, "callback_proxy_http3_connections_total") == 2
    assert value(s, "callback_proxy_http3_connection_errors_total") == 0


def test_ngtcp2_client_early_data_is_rejected_and_the_request_reaches_the_app_once(h3_proxy, cert, tmp_path, upstream):
    proxy = h3_proxy()
    session, tp = tmp_path / "session", tmp_path / "tp"
    gtlsclient(proxy, ["/echo?warm"], f"--session-file={session}", f"--tp-file={tp}")
    assert session.exists() and tp.exists()
    text = gtlsclient(proxy, ["/echo?zero-rtt"], f"--session-file={session}", f"--tp-file={tp}")
    assert "type=0RTT" in text, "the client did not try early data"
    assert "Early data was rejected by server" in text
    assert ":status: 200" in text
    assert [r["target"] for r in upstream.record.requests()] == ["/echo?warm", "/echo?zero-rtt"]


def returning_client(proxy, tmp_path):
    """gtlsclient that keeps its session ticket and the server's transport parameters: after a
    first connection, each request goes in early data (0-RTT) with the ClientHello."""
    session, tp = tmp_path / "session", tmp_path / "tp"
    gtlsclient(proxy, ["/echo?warm"], f"--session-file={session}", f"--tp-file={tp}")
    assert session.exists() and tp.exists()

    def send(path, *args):
        text = gtlsclient(proxy, [path], f"--session-file={session}", f"--tp-file={tp}", *args)
        assert "type=0RTT" in text, "the client did not try early data"
        return text
    return send


def test_with_early_data_on_a_get_in_0rtt_is_served_once_and_the_app_sees_early_data(h3_proxy, cert, tmp_path, upstream):
    """http3.early_data: a returning client's GET rides with its ClientHello, is answered, and
    reaches the app once, marked `Early-Data: 1` (RFC 8470 §5.1)."""
    proxy = h3_proxy("  early_data: true\n")
    send = returning_client(proxy, tmp_path)
    text = send("/echo?zero-rtt")
    assert "Early data was rejected" not in text
    assert [r["target"] for r in upstream.record.requests()] == ["/echo?warm", "/echo?zero-rtt"]
    raw = upstream.record.raw()
    zero = raw[raw.index(b"GET /echo?zero-rtt"):]
    assert b"\r\nEarly-Data: 1\r\n" in zero[:zero.index(b"\r\n\r\n") + 2]
    assert b"Early-Data" not in raw[:raw.index(b"GET /echo?zero-rtt")]  # the first, at 1-RTT, is not
    lines = proxy.wait_access_log(2)
    assert [(l["path"], l["status"]) for l in lines] == [("/echo", 200), ("/echo", 200)]


@pytest.mark.parametrize("method", ["POST", "DELETE", "PATCH"])
def test_with_early_data_on_unsafe_methods_get_425_and_never_reach_the_app(h3_proxy, cert, tmp_path, upstream, method):
    """Only GET, HEAD and OPTIONS are served from early data (a replay of them repeats a read):
    the rest gets 425 Too Early (RFC 8470 §5.2), which tells the client to send it again after
    the handshake. The callback's own case is in test_callback.py (it needs the OAuth layer)."""
    path = "/echo?unsafe"
    proxy = h3_proxy("  early_data: true\n")
    send = returning_client(proxy, tmp_path)
    send(path, f"--http-method={method}")
    assert [r["target"] for r in upstream.record.requests()] == ["/echo?warm"]
    line = proxy.wait_access_log(2)[-1]
    assert line["status"] == 425 and line["method"] == method, line


def test_datagrams_the_kernel_drops_with_the_receive_buffer_full_are_counted_and_named(h3_proxy, cert):
    """A full socket receive buffer drops datagrams in the kernel, where the proxy never sees
    them; QUIC recovers, slowly. SO_RXQ_OVFL makes each datagram queued after a drop say how many
    the kernel has dropped so far: the proxy counts them (`reason="receive_buffer_full"`) and logs,
    once a second, the setting that bounds the buffer. Here the proxy is stopped (SIGSTOP) while
    30,000 datagrams of 1,200 bytes arrive, more than a buffer of `net.core.rmem_max` holds; the
    drops are seen with the next datagram after them."""
    proxy = h3_proxy()
    assert "HTTP/3: the UDP receive buffer is smaller than asked" in proxy.stderr_text() \
        or int(open("/proc/sys/net/core/rmem_max").read()) >= 4 << 20
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.connect(("127.0.0.1", proxy.port))
    junk = bytes([0x40]) + os.urandom(1199)
    proxy.signal(signal.SIGSTOP)
    try:
        for _ in range(30000):
            s.send(junk)
    finally:
        proxy.signal(signal.SIGCONT)

    def counts():
        m = samples(scrape(proxy))
        return (value(m, "callback_proxy_http3_datagrams_received_total"),
                value(m, "callback_proxy_http3_datagrams_dropped_total", reason="receive_buffer_full"))
    received, dropped = counts()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:  # the buffered ones are read
        time.sleep(0.2)
        now = counts()
        if now[0] == received:
            break
        received, dropped = now
    assert received < 30000 and dropped == 0  # the kernel dropped some; nothing has said so yet
    s.send(junk)
    s.close()
    while time.monotonic() < deadline + 5:
        received, dropped = counts()
        if dropped > 0:
            break
        time.sleep(0.05)
    assert received + dropped == 30001
    lines = [json.loads(l) for l in proxy.stderr_text().splitlines() if "receive buffer full" in l]
    assert len(lines) == 1 and "net.core.rmem_max" in lines[0]["setting"] and int(lines[0]["dropped"]) == dropped
    with client(proxy, cert) as c:
        assert c.request("GET", "/echo").status == 200


@pytest.mark.parametrize("change, early", [("  max_streams: 1\n", False), ("  alt_svc_max_age: 60s\n", True)])
def test_a_reload_that_lowers_a_limit_refuses_early_data_under_the_old_one(h3_proxy, cert, tmp_path, upstream, change, early):
    """A returning client sends its 0-RTT requests under the limits it remembers from its ticket,
    so a server that accepts them must not have lowered one (RFC 9000 §7.4.1). Lowering
    `http3.max_streams` to 1 under three early requests ended the connection with
    STREAM_LIMIT_ERROR, and none of the three reached the app. The ticket key now follows the
    limits: after such a reload the ticket does not resume, the early data is rejected, and the
    three are sent again at 1-RTT, one stream at a time. A reload that changes no limit keeps
    resumption and early data."""
    proxy = h3_proxy("  early_data: true\n")
    session, tp = tmp_path / "session", tmp_path / "tp"
    gtlsclient(proxy, ["/echo?warm"], f"--session-file={session}", f"--tp-file={tp}")
    proxy.cfg.write_text(proxy.cfg.read_text() + change)
    reload(proxy, "configuration reloaded")
    paths = ["/echo?a", "/echo?b", "/echo?c"]
    text = gtlsclient(proxy, paths, f"--session-file={session}", f"--tp-file={tp}")
    assert "type=0RTT" in text, "the client did not try early data"
    assert ("Early data was rejected" not in text) == early
    assert "STREAM_LIMIT_ERROR" not in text
    assert text.count(":status: 200") == 3
    assert sorted(r["target"] for r in upstream.record.requests()) == sorted(["/echo?warm", *paths])


def test_a_request_completed_after_the_handshake_is_not_early_even_with_early_data_on(h3_proxy, cert, tmp_path, upstream):
    """A client whose early data the server refuses (here: 0-RTT is off) sends its request again
    at 1-RTT: a POST then goes through, unmarked."""
    proxy = h3_proxy()
    send = returning_client(proxy, tmp_path)
    text = send("/echo?late", "--http-method=POST")
    assert "Early data was rejected" in text
    assert [r["target"] for r in upstream.record.requests()] == ["/echo?warm", "/echo?late"]
    assert b"Early-Data" not in upstream.record.raw()


# ---------------------------------------------------------------------------------------------
# Lifecycle


def slow_request_in_background(c, ms=1500):
    """Starts a request the app answers after `ms`; returns the thread and where its answer lands."""
    result = {}

    def run():
        result["r"] = c.request("GET", f"/slow?ms={ms}")
    t = threading.Thread(target=run)
    t.start()
    time.sleep(0.4)
    return t, result


def test_sigterm_finishes_streams_in_flight_then_exits(h3_proxy, cert):
    proxy = h3_proxy()
    with client(proxy, cert, timeout=15) as c:
        t, result = slow_request_in_background(c)
        proxy.signal(signal.SIGTERM)
        t.join(10)
        assert result["r"].status == 200 and result["r"].body == b"slow done\n"
    assert proxy.wait_exit(10) == 0


def test_a_changed_config_reload_sends_goaway_streams_in_flight_finish_and_new_connections_get_it(h3_proxy, cert):
    proxy = h3_proxy()
    with client(proxy, cert, timeout=15) as c:
        t, result = slow_request_in_background(c)
        proxy.cfg.write_text(proxy.cfg.read_text() + "limits:\n  max_body_size: 10\n")
        proxy.signal(signal.SIGHUP)
        t.join(10)
        assert result["r"].status == 200
        # the connection ends once its stream is done (GOAWAY, then CONNECTION_CLOSE H3_NO_ERROR)
        deadline = time.monotonic() + 5
        while c.terminated() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert c.terminated() is not None and c.terminated().error_code == 0x100
    with client(proxy, cert) as c:
        assert c.request("POST", "/echo", [("content-length", "19")], b"more than ten bytes").status == 413
    assert proxy.proc.poll() is None


def test_a_sighup_that_reloads_the_certificate_reaches_new_quic_connections_too(proxy_factory, upstream, tmp_path):
    """The certificate files are re-read on SIGHUP (the configuration unchanged): new QUIC
    handshakes present the new certificate, as new TCP handshakes do; a connection already open
    keeps its own."""
    def make(name):
        key, crt = tmp_path / f"{name}.key", tmp_path / f"{name}.pem"
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                        "-keyout", str(key), "-out", str(crt), "-days", "2", "-subj", f"/CN=localhost/O={name}",
                        "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"], check=True, capture_output=True)
        return crt.read_bytes(), key.read_bytes()
    first, second = make("first"), make("second")
    crt, key = tmp_path / "live.pem", tmp_path / "live.key"
    crt.write_bytes(first[0])
    key.write_bytes(first[1])
    cfg = tmp_path / "h3.yaml"
    cfg.write_text("http3:\n  enabled: true\n")
    proxy = proxy_factory(upstream, extra=["--tls-cert", str(crt), "--tls-key", str(key), "--config", str(cfg)])

    def organisation(c):
        return c.quic.tls._peer_certificate.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)[0].value

    with H3(proxy.port) as old:
        assert old.request("GET", "/echo").status == 200 and organisation(old) == "first"
        crt.write_bytes(second[0])
        key.write_bytes(second[1])
        proxy.signal(signal.SIGHUP)
        deadline = time.monotonic() + 5
        while "TLS certificates reloaded" not in proxy.stderr_text():
            assert time.monotonic() < deadline, proxy.stderr_text()[-2000:]
            time.sleep(0.05)
        with H3(proxy.port) as new:
            assert new.request("GET", "/echo").status == 200 and organisation(new) == "second"
        assert old.request("GET", "/echo").status == 200
    assert proxy.proc.poll() is None


def test_http3_off_binds_no_udp_socket_and_advertises_nothing(proxy_factory, upstream, cert):
    crt, key = cert
    proxy = proxy_factory(upstream, extra=["--tls-cert", crt, "--tls-key", key])
    # No UDP socket on the port (the kernel's table: local address:port in hex, column 2).
    with open("/proc/net/udp") as f:
        ports = {int(line.split()[1].split(":")[1], 16) for line in f.readlines()[1:]}
    assert proxy.port not in ports
    with pytest.raises(Exception):
        with H3(proxy.port, ca=crt, timeout=2) as c:
            c.request("GET", "/echo")
