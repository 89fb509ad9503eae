"""HTTP/2 to clients: ALPN h2 on TLS listeners (h2c with prior knowledge where asked for), each
stream a request like any other, translated to HTTP/1.1 for the upstream (the strict test upstream
fails the test on anything malformed). Driven by real HTTP/2 clients — curl --http2, nghttp and
h2load (nghttp2-client) — and, for the frames no well-behaved client sends, by the frame-level
client in h2client.py: floods, bad pseudo-headers, uppercase names, connection-specific fields,
content-length against DATA, resets mid-body. GOAWAY on SIGTERM and on a changed-config SIGHUP.
"""

import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time

import pytest

from h2client import (ContinuationFrame, DataFrame, HeadersFrame, PingFrame, RawH2, RstStreamFrame,
                      SettingsFrame)
from helpers import free_port
from test_observability import samples, scrape, value
from upstream import pattern_bytes

CURL = shutil.which("curl") or "/usr/bin/curl"
H2LOAD = shutil.which("h2load") or "/usr/bin/h2load"
NGHTTP = shutil.which("nghttp") or "/usr/bin/nghttp"


@pytest.fixture(scope="module")
def cert(tmp_path_factory):
    d = tmp_path_factory.mktemp("h2pki")
    key, crt = str(d / "key.pem"), str(d / "cert.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-keyout", key, "-out", crt, "-days", "2", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
                    "-addext", "basicConstraints=critical,CA:TRUE"], check=True, capture_output=True)
    return crt, key


@pytest.fixture
def h2_proxy(proxy_factory, upstream, cert):
    def start(extra=(), opts=None, **kw):
        crt, key = cert
        return proxy_factory(upstream, extra=["--tls-cert", crt, "--tls-key", key, *extra], opts=opts, **kw)
    return start


def curl(cert, *args, timeout=60, check=True):
    out = subprocess.run([CURL, "-sS", "--cacert", cert[0], *args], capture_output=True, timeout=timeout)
    if check:
        assert out.returncode == 0, out.stderr.decode()
    return out


def url(proxy, path):
    return f"https://localhost:{proxy.port}{path}"


def h2(proxy, **kw):
    return RawH2(proxy.port, **kw)


def configured(h2_proxy, tmp_path, text):
    """A TLS proxy whose configuration file holds `text`."""
    cfg = tmp_path / "h2.yaml"
    cfg.write_text(text)
    return h2_proxy(extra=["--config", str(cfg)])


def settled(c):
    """Waits for the proxy's SETTINGS, then long enough for it to read our ACK."""
    c.read_until(lambda c: 3 in c.server_settings)
    time.sleep(0.2)


def upstream_requests(upstream):
    return upstream.record.requests()


# ---------------------------------------------------------------------------------------------
# ALPN and translation to HTTP/1.1


def test_alpn_prefers_h2_and_the_upstream_gets_http11_with_the_usual_forwarding_fields(h2_proxy, upstream, cert):
    proxy = h2_proxy()
    out = curl(cert, "-v", "--http2", url(proxy, "/echo?x=1"))
    err = out.stderr.decode()
    assert "ALPN: server accepted h2" in err
    assert "< HTTP/2 200" in err
    e = json.loads(out.stdout)
    assert e["version"] == "HTTP/1.1" and e["target"] == "/echo?x=1"
    names = [k.lower() for k, _ in e["headers"]]
    h = {k.lower(): v for k, v in e["headers"]}
    assert h["host"] == f"localhost:{proxy.port}"  # from :authority
    assert h["x-forwarded-proto"] == "https"
    assert h["x-forwarded-for"] == "127.0.0.1"
    assert re.fullmatch(r"[0-9a-f]{32}", h["x-request-id"])
    assert names.count("host") == 1
    # an HTTP/1.1 client on the same listener still gets HTTP/1.1
    out = curl(cert, "-v", "--http1.1", url(proxy, "/echo"))
    assert "ALPN: server accepted http/1.1" in out.stderr.decode()
    s = samples(scrape(proxy))
    assert value(s, "callback_proxy_http2_connections_total") == 1
    assert value(s, "callback_proxy_http2_streams_total") == 1


def test_the_access_log_counts_the_response_head_over_h2_as_over_http11(h2_proxy, cert):
    """bytes_out is head and body over both protocols: the HTTP/2 head waits in its stream until
    the stream flushes, after the line may already be written (it was left out: body bytes only,
    0 for a 304)."""
    proxy = h2_proxy()
    sizes = {}
    for proto in ("--http1.1", "--http2"):
        out = curl(cert, proto, "-o", "/dev/null", "-w", "%{size_download}", url(proxy, "/echo"))
        sizes[proto] = int(out.stdout)
    lines = proxy.wait_access_log(2)
    assert [l["protocol"] for l in lines] == ["http/1.1", "h2"]
    # The head's names and values (an HTTP/2 one before HPACK): at least :status 200 and the
    # content-type and content-length of /echo's answer.
    for line, proto in zip(lines, ("--http1.1", "--http2")):
        assert line["bytes_out"] >= sizes[proto] + len(":status200content-typetext/plaincontent-length1"), \
            (proto, line["bytes_out"], sizes[proto])


def test_no_http2_offers_only_http11(h2_proxy, cert):
    proxy = h2_proxy(extra=["--no-http2"])
    out = curl(cert, "-v", "--http2", url(proxy, "/echo"))
    assert "ALPN: server accepted http/1.1" in out.stderr.decode()
    assert json.loads(out.stdout)["version"] == "HTTP/1.1"


def test_cookie_crumbs_are_joined_and_connection_level_fields_never_reach_the_upstream(h2_proxy, upstream):
    proxy = h2_proxy()
    with h2(proxy) as c:
        c.request(1, path="/echo", extra=[("cookie", "a=1"), ("user-agent", "h2test"), ("cookie", "b=2"),
                                          ("te", "trailers"), ("x-custom", "kept")])
        r = c.response(1)
    assert r.status == 200, (r.headers, r.reset)
    e = json.loads(bytes(r.body))
    h = [(k.lower(), v) for k, v in e["headers"]]
    assert [v for k, v in h if k == "cookie"] == ["a=1; b=2"]
    assert ("x-custom", "kept") in h and ("user-agent", "h2test") in h
    assert not any(k == "te" for k, _ in h)
    # the response is HTTP/2: lowercase names, no connection-specific fields
    names = [k for k, _ in r.headers]
    assert all(k == k.lower() for k in names)
    assert not {"connection", "keep-alive", "transfer-encoding"} & set(names)


def test_response_fields_are_what_http11_gets_less_connection_specific_ones_and_1xx_heads_pass(h2_proxy):
    """The response head is written as fields for HEADERS (never HTTP/1.1 text parsed again): the
    upstream's fields in order, lowercased, less those its `Connection` names and the hop-by-hop
    ones; repeated fields stay apart; an interim 103 reaches the client before the 200."""
    proxy = h2_proxy()
    with h2(proxy) as c:
        c.request(1, path="/hop")
        c.request(3, path="/set-cookies")
        c.request(5, path="/early-hints")
        hop, cookies, hinted = c.response(1), c.response(3), c.response(5)
    fields = [(k, v) for k, v in hop.headers if k not in ("date", "server")]
    assert fields == [(":status", "200"), ("content-type", "text/plain"), ("x-up-keep", "yes"),
                      ("content-length", "4")], hop.headers
    assert bytes(hop.body) == b"hop\n"
    assert cookies.header("set-cookie") == ["a=1; Path=/; HttpOnly", "b=2, c=3; Path=/"]
    assert hinted.informational == [[(":status", "103"), ("link", "</a.css>; rel=preload")]], hinted.informational
    assert hinted.status == 200 and bytes(hinted.body) == b"hinted\n"


def test_the_canonical_path_is_what_is_decided_on_and_forwarded(h2_proxy, upstream):
    proxy = h2_proxy()
    with h2(proxy) as c:
        c.request(1, path="/echo/./a/../b/%7Euser?q=%2e%2e")
        r = c.response(1)
        assert r.status == 200
        assert json.loads(bytes(r.body))["target"] == "/echo/b/~user?q=%2e%2e"
        # a path the HTTP/1.1 parser refuses is refused the same way over HTTP/2
        c.request(3, path="/echo/%00x")
        r = c.response(3)
        assert r.status == 400, r.headers
    assert [q["target"] for q in upstream_requests(upstream)] == ["/echo/b/~user?q=%2e%2e"]


def test_host_and_authority_that_disagree_are_refused(h2_proxy, upstream):
    proxy = h2_proxy()
    with h2(proxy) as c:
        c.request(1, path="/echo", authority="a.example", extra=[("host", "b.example")])
        r = c.response(1)
        assert r.status == 400
        assert b"authority" in bytes(r.body)
        c.request(3, path="/echo", authority="a.example", extra=[("host", "A.example")])
        assert c.response(3).status == 200
    assert len(upstream_requests(upstream)) == 1


# ---------------------------------------------------------------------------------------------
# Bodies, streams, flow control


def test_request_bodies_stream_to_the_upstream_with_and_without_content_length(h2_proxy, upstream, cert, tmp_path):
    proxy = h2_proxy()
    n = 8 * 1024 * 1024 + 123
    body = bytes(pattern_bytes(0, n))
    f = tmp_path / "body.bin"
    f.write_bytes(body)
    expected = hashlib.sha256(body).hexdigest()
    out = curl(cert, "--http2", "--data-binary", f"@{f}", url(proxy, "/sink?pattern=1"))
    r = json.loads(out.stdout)
    assert (r["len"], r["sha256"], r["pattern_ok"]) == (n, expected, True)
    # from a pipe: curl sends no content-length over HTTP/2; the upstream gets it chunked
    p = subprocess.run([CURL, "-sS", "--http2", "--cacert", cert[0], "-T", "-", url(proxy, "/sink?pattern=1")],
                       input=body, capture_output=True, timeout=60)
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)
    assert (r["len"], r["sha256"], r["pattern_ok"]) == (n, expected, True)
    reqs = upstream.record.requests()
    assert len(reqs) == 2


def test_response_bodies_stream_back_whole(h2_proxy, cert):
    proxy = h2_proxy()
    n = 32 * 1024 * 1024 + 7
    out = curl(cert, "--http2", url(proxy, f"/bytes?n={n}"))
    assert out.stdout == bytes(pattern_bytes(0, n))
    out = curl(cert, "--http2", url(proxy, "/chunked?n=50&size=100000"))
    assert out.stdout == bytes(pattern_bytes(0, 5_000_000))
    # a body that ends with the upstream's close
    out = curl(cert, "--http2", url(proxy, "/until-close?n=3000000"))
    assert out.stdout == bytes(pattern_bytes(0, 3_000_000))


def test_a_gibibyte_each_way_streams_through_in_bounded_memory(h2_proxy, cert):
    proxy = h2_proxy(opts={"--max-body-size": "0"})
    n = 1 << 30
    base = proxy.vm_kib("VmHWM")
    up = subprocess.Popen(f"head -c {n} /dev/zero | {CURL} -sS --http2 --cacert {cert[0]} -T - "
                          f"'{url(proxy, '/sink?nosha=1')}'", shell=True, stdout=subprocess.PIPE)
    down = subprocess.run([CURL, "-sS", "--http2", "--cacert", cert[0], "-o", "/dev/null", "-w", "%{size_download} %{http_version}",
                           url(proxy, f"/bytes?n={n}")], capture_output=True, text=True, timeout=120)
    assert down.returncode == 0, down.stderr
    assert down.stdout == f"{n} 2"
    out, _ = up.communicate(timeout=120)
    assert up.returncode == 0
    assert json.loads(out)["len"] == n
    # both bodies crossed at once; what the proxy held is its windows and buffers, not the bodies
    grown = proxy.vm_kib("VmHWM") - base
    assert grown < 32 * 1024, f"peak RSS grew by {grown} KiB"


def test_a_body_past_max_body_size_gets_413_then_the_stream_is_cut(h2_proxy, upstream):
    proxy = h2_proxy(opts={"--max-body-size": "100k"})
    with h2(proxy) as c:
        c.request(1, method="POST", path="/sink", end_stream=False)  # no content-length: counted as it comes
        c.data(1, b"q" * 200_000)
        r = c.response(1)
        assert r.status == 413, (r.headers, r.reset)
        assert b"larger than 102400 bytes" in bytes(r.body)
        # the response is whole; the unread rest of the body is refused with NO_ERROR (RFC 9113 §8.1)
        c.read_until(lambda c: c.responses[1].reset is not None, timeout=2)
        assert r.reset == "NO_ERROR"
        c.request(3, path="/echo")
        assert c.response(3).status == 200
        # declared too large: refused before a byte goes upstream
        c.request(5, method="POST", path="/sink", end_stream=False, extra=[("content-length", "200000")])
        assert c.response(5).status == 413
    assert not any(e.get("ev") == "body_done" and e.get("len", 0) > 0 for e in upstream.record.events())


def test_head_and_bodiless_statuses_end_on_headers(h2_proxy):
    proxy = h2_proxy()
    with h2(proxy) as c:
        c.request(1, method="HEAD", path="/bytes?n=1000")
        r = c.response(1)
        assert r.status == 200 and r.header("content-length") == ["1000"] and r.body == b""
        c.request(3, path="/status/204")
        r = c.response(3)
        assert r.status == 204 and r.body == b""
        headers = [f for f in c.frames if isinstance(f, HeadersFrame) and f.stream_id in (1, 3)]
        assert all("END_STREAM" in f.flags for f in headers)


def test_many_streams_on_one_connection_each_logged(h2_proxy):
    proxy = h2_proxy()
    out = subprocess.run([H2LOAD, "-n", "2000", "-c", "1", "-m", "100", url(proxy, "/echo")],
                         capture_output=True, text=True, timeout=60)
    assert "2000 succeeded, 0 failed, 0 errored" in out.stdout, out.stdout
    assert "status codes: 2000 2xx" in out.stdout
    lines = proxy.wait_access_log(2000, timeout=10)
    assert len(lines) == 2000 and all(line["protocol"] == "h2" and line["status"] == 200 for line in lines)
    assert len({line["request_id"] for line in lines}) == 2000
    s = samples(scrape(proxy))
    assert value(s, "callback_proxy_http2_connections_total") == 1
    assert value(s, "callback_proxy_http2_streams_total") == 2000


def test_nghttp_fetches_several_streams_at_once(h2_proxy):
    proxy = h2_proxy()
    out = subprocess.run([NGHTTP, "-nv", "-m", "5", url(proxy, "/echo"), url(proxy, "/bytes?n=100000")],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.count(":status: 200") == 10
    assert "SETTINGS_MAX_CONCURRENT_STREAMS(0x03):128" in out.stdout


def test_max_concurrent_streams_is_configurable_and_streams_past_it_are_refused_one_by_one(h2_proxy, tmp_path):
    proxy = configured(h2_proxy, tmp_path, "http2:\n  max_concurrent_streams: 2\n")
    # a client that keeps to the advertised limit gets every response
    out = subprocess.run([H2LOAD, "-n", "20", "-c", "1", "-m", "2", url(proxy, "/slow?ms=50")],
                         capture_output=True, text=True, timeout=60)
    assert "20 succeeded, 0 failed" in out.stdout, out.stdout
    # one that opens a third stream past the acknowledged limit loses that stream only: RFC 9113
    # §5.1.2 makes it a stream error, and REFUSED_STREAM tells the client it may retry
    with h2(proxy) as c:
        c.read_until(lambda c: 3 in c.server_settings)
        assert c.server_settings[3] == 2
        time.sleep(0.2)  # our SETTINGS ACK is read before the streams
        for sid in (1, 3, 5):
            c.request(sid, path="/slow?ms=500")
        assert c.response(5).reset == "REFUSED_STREAM"
        assert c.response(1).status == 200 and c.response(3).status == 200
        c.request(7, path="/echo")
        assert c.response(7).status == 200
        assert c.goaway is None
    s = samples(scrape(proxy))
    assert value(s, "callback_proxy_http2_streams_over_limit_total") == 1
    # more than twice the limit in one go is no race with SETTINGS: a connection error
    with h2(proxy) as c:
        settled(c)
        hdrs = [(":method", "GET"), (":scheme", "https"), (":authority", "localhost"), (":path", "/slow?ms=500")]
        c.send(*[c.headers(sid, hdrs) for sid in range(1, 11, 2)])  # one write, so one read
        assert c.read_until(lambda c: c.goaway is not None, timeout=3)
        assert c.goaway_code == "PROTOCOL_ERROR"


def test_a_client_racing_the_default_limit_gets_128_streams_served_and_the_rest_refused(h2_proxy):
    """138 streams at once against the default 128: nginx serves 128 and refuses 10; a connection
    error here used to take all 138 down."""
    proxy = h2_proxy()
    with h2(proxy, window=1 << 30) as c:
        settled(c)
        assert c.server_settings[3] == 128
        sids, started = open_streams(c, 138, "/slow?ms=300")
        done = finish_times(c, sids, started, timeout=20)
        assert len(done) == 138
        statuses = [c.responses[sid].status for sid in sids if c.responses[sid].ended]
        refused = [sid for sid in sids if c.responses[sid].reset == "REFUSED_STREAM"]
        assert statuses == [200] * 128, statuses
        assert refused == sids[128:]
        assert c.goaway is None
        # the refused ones succeed when retried
        for sid in range(sids[-1] + 2, sids[-1] + 22, 2):
            c.request(sid, path="/echo")
        assert all(c.response(sid).status == 200 for sid in range(sids[-1] + 2, sids[-1] + 22, 2))


def budget_proxy(proxy_factory, upstream, tmp_path, **opts):
    cfg = tmp_path / "budget.yaml"
    cfg.write_text("limits: { max_connections: 16 }\n")
    return proxy_factory(upstream, extra=["--http2-cleartext", "--config", str(cfg)],
                         opts={"--upstream-timeout": "10s", **opts})


def open_streams(c, count, path, first=1):
    """Sends `count` requests for `path` at once on streams first, first + 2, …; (their ids, when)."""
    sids = [first + 2 * i for i in range(count)]
    sent = time.monotonic()
    for sid in sids:
        c.request(sid, path=path)
    return sids, sent


def finish_times(c, sids, started, timeout):
    """Reads until every stream ended or was reset; {sid: seconds from `started` until it did}."""
    done = {}

    def all_done(c):
        for sid in sids:
            r = c.responses.get(sid)
            if sid not in done and r is not None and (r.ended or r.reset):
                done[sid] = time.monotonic() - started
        return len(done) == len(sids)
    c.read_until(all_done, timeout=timeout)
    return done


def test_streams_count_in_the_descriptor_budget_and_wait_for_a_unit(proxy_factory, upstream, tmp_path):
    """Each stream may hold an upstream connection, so streams beyond a connection's first draw on
    `limits.max_connections` like connections do. Past it a stream waits (as a connection waits in
    the backlog) instead of opening a socket the process may not have, and starts when a unit comes
    free; while streams hold the budget, the listener accepts nothing more."""
    proxy = budget_proxy(proxy_factory, upstream, tmp_path)
    with RawH2(proxy.port, tls=False, timeout=10) as c:
        sids, sent = open_streams(c, 24, "/slow?ms=1500")
        time.sleep(0.3)
        # the connection's unit and 15 streams' fill the budget: a new client waits
        started = time.monotonic()
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as s:
            s.sendall(b"GET /echo HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            assert s.recv(12) == b"HTTP/1.1 200"
        waited = time.monotonic() - started
        done = finish_times(c, sids, sent, timeout=15)
        assert sorted(c.responses[sid].status for sid in sids) == [200] * 24, \
            [(sid, c.responses.get(sid) and (c.responses[sid].reset or c.responses[sid].status)) for sid in sids]
        # 16 at once, oldest first; the other 8 once the first ended
        first, second = [sid for sid in sids if done[sid] < 2.25], [sid for sid in sids if done[sid] >= 2.25]
        assert first == sids[:16] and second == sids[16:], sorted(done.items(), key=lambda kv: kv[1])
    assert waited > 0.8, waited
    s = samples(scrape(proxy))
    assert value(s, "callback_proxy_http2_streams_waited_total") == 8
    assert value(s, "callback_proxy_http2_streams_refused_total") == 0
    lines = [l for l in proxy.stderr_text().splitlines() if "HTTP/2 stream waits: connection limit reached" in l]
    assert 1 <= len(lines) < 8 and "limits.max_connections" in lines[0], lines
    assert "Too many open files" not in proxy.stderr_text()


def test_every_way_a_stream_ends_gives_its_budget_unit_back(proxy_factory, upstream, tmp_path):
    """Normal ends, a running stream reset by the client, a waiting one reset, a malformed one:
    afterwards the whole budget is there again (16 streams run at once), none leaked."""
    proxy = budget_proxy(proxy_factory, upstream, tmp_path)
    with RawH2(proxy.port, tls=False, timeout=10) as c:
        sids, _ = open_streams(c, 20, "/slow?ms=800")
        time.sleep(0.3)
        c.send(RstStreamFrame(sids[0], error_code=8), RstStreamFrame(sids[18], error_code=8))  # a running one, a waiting one
        c.send(c.headers(101, [(":method", "GET"), (":scheme", "http"), (":path", "/echo")]))  # no :authority nor host
        rest = [sid for sid in sids if sid not in (sids[0], sids[18])] + [101]
        finish_times(c, rest, time.monotonic(), timeout=10)
        assert all(c.responses[sid].status == 200 for sid in rest[:-1])
    waited = value(samples(scrape(proxy)), "callback_proxy_http2_streams_waited_total")
    assert waited == 5, waited  # 4 of the 20, and the malformed one
    with RawH2(proxy.port, tls=False, timeout=10) as c:
        sids, sent = open_streams(c, 16, "/slow?ms=1000")
        done = finish_times(c, sids, sent, timeout=10)
        assert all(c.responses[sid].status == 200 for sid in sids)
        assert max(done.values()) < 1.8, sorted(done.values())
    assert value(samples(scrape(proxy)), "callback_proxy_http2_streams_waited_total") == waited


def test_a_stream_that_waits_past_the_header_timeout_is_refused_for_a_retry(proxy_factory, upstream, tmp_path):
    """REFUSED_STREAM: nothing of it was processed, the client may send it again (RFC 9113 §8.7)."""
    proxy = budget_proxy(proxy_factory, upstream, tmp_path, **{"--client-header-timeout": "1s"})
    with RawH2(proxy.port, tls=False, timeout=10) as c:
        sids, sent = open_streams(c, 18, "/slow?ms=3000")
        done = finish_times(c, sids, sent, timeout=10)
        outcomes = [c.responses[sid].reset or c.responses[sid].status for sid in sids]
        assert outcomes == [200] * 16 + ["REFUSED_STREAM"] * 2, outcomes
        assert all(0.9 < done[sid] < 2.5 for sid in sids[16:]), done
        # the refused ones never reached the upstream
        assert [q["target"] for q in upstream_requests(upstream)] == ["/slow?ms=3000"] * 16
        # the connection goes on
        c.request(101, path="/echo")
        assert c.response(101).status == 200
    s = samples(scrape(proxy))
    assert value(s, "callback_proxy_http2_streams_refused_total") == 2


def test_a_slow_upstream_holds_back_the_clients_window_not_our_memory(h2_proxy, upstream):
    """Flow control follows the upstream: while it does not read, the client gets no window back."""
    proxy = h2_proxy()
    with h2(proxy) as c:
        c.read_until(lambda c: 4 in c.server_settings)
        window = c.server_settings[4]
        c.request(1, method="POST", path="/sink?delay_ms=1500&nosha=1", end_stream=False,
                  extra=[("content-length", str(4 * window))])
        chunk = b"x" * 16384
        for _ in range(window // 16384):
            c.data(1, chunk)
        time.sleep(0.5)
        c.read_until(lambda c: False, timeout=0.3)
        updates = [f for f in c.frames if type(f).__name__ == "WindowUpdateFrame" and f.stream_id == 1]
        # the upstream sleeps before reading: what the proxy passed on sits in the socket buffers, and
        # the stream's window reopens only as far as those take it — never the whole body's worth
        credited = sum(f.window_increment for f in updates)
        assert credited < 4 * window
        # once the upstream reads, the rest flows and the request completes
        deadline = time.monotonic() + 10
        sent = window
        while sent < 4 * window and time.monotonic() < deadline:
            credited = sum(f.window_increment for f in c.frames
                           if type(f).__name__ == "WindowUpdateFrame" and f.stream_id == 1)
            room = window + credited - sent
            if room >= 16384:
                c.data(1, chunk, end_stream=sent + 16384 >= 4 * window)
                sent += 16384
            else:
                c.read_until(lambda c: False, timeout=0.1)
        assert sent == 4 * window
        r = c.response(1, timeout=10)
        assert r.status == 200 and json.loads(bytes(r.body))["len"] == 4 * window


def test_a_stalled_request_body_gets_408_and_an_idle_connection_a_goaway(h2_proxy, upstream):
    """Streams keep the HTTP/1.1 timeouts (client_body: 3 s in these tests); a connection without
    streams ends after keepalive, with a GOAWAY rather than a silent close."""
    proxy = h2_proxy(opts={"--keepalive-timeout": "2s"})
    with h2(proxy) as c:
        c.request(1, method="POST", path="/sink", end_stream=False, extra=[("content-length", "100")])
        c.data(1, b"x" * 10)
        started = time.monotonic()
        r = c.response(1, timeout=8)
        assert r.status == 408, (r.headers, r.reset)
        assert 2.5 < time.monotonic() - started < 6
        assert c.read_until(lambda c: c.goaway is not None, timeout=6)
        assert c.goaway_code == "NO_ERROR"
        assert c.wait_closed(4)


# ---------------------------------------------------------------------------------------------
# Resets and GOAWAY


def test_a_stream_reset_mid_body_aborts_its_upstream_request_and_the_connection_goes_on(h2_proxy, upstream):
    proxy = h2_proxy()
    with h2(proxy) as c:
        c.request(1, method="POST", path="/sink", end_stream=False, extra=[("content-length", "10000000")])
        c.data(1, b"y" * 60000)
        upstream.record.wait_for(lambda r: any(e.get("ev") == "request" for e in r.events()), timeout=3)
        c.send(RstStreamFrame(1, error_code=8))
        assert upstream.record.wait_for(lambda r: any(e.get("ev") == "close" for e in r.events()), timeout=3)
        assert not any(e.get("ev") == "body_done" for e in upstream.record.events())
        c.request(3, path="/echo")
        assert c.response(3).status == 200
    s = samples(scrape(proxy))
    assert value(s, "callback_proxy_http2_stream_resets_received_total") == 1


def test_sigterm_sends_goaway_and_finishes_streams_in_flight(h2_proxy):
    proxy = h2_proxy()
    with h2(proxy) as c:
        c.request(1, path="/slow?ms=1500")
        time.sleep(0.3)
        proxy.signal(signal.SIGTERM)
        assert c.read_until(lambda c: c.goaway is not None, timeout=3)
        r = c.response(1, timeout=5)
        assert r.status == 200 and bytes(r.body) == b"slow done\n"
        assert c.goaway_code == "NO_ERROR"
        assert c.wait_closed(5)
    assert proxy.wait_exit(5) == 0


def test_a_changed_config_reload_sends_goaway_and_new_connections_get_the_new_configuration(h2_proxy, upstream, tmp_path):
    cfg = tmp_path / "reload.yaml"
    cfg.write_text("limits:\n  max_body_size: 1m\n")
    proxy = h2_proxy(extra=["--config", str(cfg)])
    with h2(proxy) as c:
        c.request(1, path="/slow?ms=1500")
        time.sleep(0.3)
        cfg.write_text("limits:\n  max_body_size: 10\n")
        proxy.signal(signal.SIGHUP)
        assert c.read_until(lambda c: c.goaway is not None, timeout=3)
        r = c.response(1, timeout=5)
        assert r.status == 200
        assert c.wait_closed(5)
        last = c.goaway.last_stream_id
        assert last >= 1
    with h2(proxy) as c:
        c.request(1, method="POST", path="/echo", body=b"more than ten bytes", extra=[("content-length", "19")])
        assert c.response(1).status == 413
    assert proxy.proc.poll() is None


# ---------------------------------------------------------------------------------------------
# Malformed requests: the RFC's stream or connection error, never the upstream


@pytest.mark.parametrize("headers,why", [
    ([(":method", "GET"), (":scheme", "https"), (":authority", "localhost"), (":path", "/echo"), ("X-Upper", "1")], "uppercase name"),
    ([(":method", "GET"), (":scheme", "https"), (":authority", "localhost"), (":path", "/echo"), ("connection", "keep-alive")], "connection"),
    ([(":method", "GET"), (":scheme", "https"), (":authority", "localhost"), (":path", "/echo"), ("transfer-encoding", "chunked")], "transfer-encoding"),
    ([(":method", "GET"), (":scheme", "https"), (":authority", "localhost"), (":path", "/echo"), ("te", "gzip")], "te other than trailers"),
    ([(":method", "GET"), (":scheme", "https"), (":authority", "localhost")], "no :path"),
    ([(":method", "GET"), (":scheme", "https"), (":authority", "localhost"), (":path", "/echo"), (":path", "/x")], "two :path"),
    ([(":method", "GET"), (":scheme", "https"), ("x-a", "1"), (":path", "/echo")], "pseudo-header after a field"),
    ([(":method", "GET"), (":scheme", "https"), (":authority", "localhost"), (":path", "/echo"), (":bogus", "1")], "unknown pseudo-header"),
    ([(":method", "GET"), (":scheme", "https"), (":authority", "localhost"), (":path", "/echo"), ("x-a", "a\r\nb")], "CRLF in a value"),
    ([(":method", "GET"), (":scheme", "https"), (":authority", "localhost"), (":path", "echo")], "path without /"),
])
def test_malformed_header_blocks_are_stream_errors_and_never_reach_the_upstream(h2_proxy, upstream, headers, why):
    proxy = h2_proxy()
    with h2(proxy) as c:
        c.send(HeadersFrame(1, data=c.header_block(headers), flags=["END_HEADERS", "END_STREAM"]))
        r = c.response(1)
        assert r.reset == "PROTOCOL_ERROR", (why, r.headers, r.reset)
        c.request(3, path="/echo")
        assert c.response(3).status == 200, why
    assert len(upstream_requests(upstream)) == 1


@pytest.mark.parametrize("declared,sent", [(10, 5), (5, 10)])
def test_content_length_disagreeing_with_data_is_a_stream_error(h2_proxy, upstream, declared, sent):
    proxy = h2_proxy()
    with h2(proxy) as c:
        hdrs = [(":method", "POST"), (":scheme", "https"), (":authority", "localhost"), (":path", "/sink"),
                ("content-length", str(declared))]
        # in one write: the stream is refused before it runs, so nothing reaches the upstream
        c.send(HeadersFrame(1, data=c.header_block(hdrs), flags=["END_HEADERS"]),
               DataFrame(1, data=b"z" * sent, flags=["END_STREAM"]))
        r = c.response(1)
        assert r.reset == "PROTOCOL_ERROR", (r.headers, r.reset)
    assert upstream_requests(upstream) == []


def test_a_header_list_past_the_limit_gets_431(h2_proxy, upstream):
    proxy = h2_proxy(opts={"--max-header-size": "4k"})
    with h2(proxy) as c:
        c.read_until(lambda c: 6 in c.server_settings)
        assert c.server_settings[6] == 4096 + 32 * 100
        c.request(1, path="/echo", extra=[(f"x-h{i}", "v" * 100) for i in range(60)])
        r = c.response(1)
        assert r.status == 431 or r.reset is not None
        c.request(3, path="/echo")
        assert c.response(3).status == 200
    assert len(upstream_requests(upstream)) == 1


# ---------------------------------------------------------------------------------------------
# Floods


def test_rapid_reset_is_cut_off_with_a_goaway(h2_proxy, upstream, tmp_path):
    cfg = tmp_path / "rr.yaml"
    cfg.write_text("http2:\n  reset_burst: 50\n  max_resets_per_second: 10\n")
    proxy = h2_proxy(extra=["--config", str(cfg)])
    with h2(proxy) as c:
        frames = []
        for i in range(200):
            sid = 1 + 2 * i
            frames.append(c.headers(sid, [(":method", "GET"), (":scheme", "https"), (":authority", "localhost"),
                                          (":path", "/echo")], end_stream=True))
            frames.append(RstStreamFrame(sid, error_code=8))
        try:
            c.send(*frames)
        except OSError:
            pass
        c.read_until(lambda c: c.goaway is not None, timeout=5)
        # nghttp2's rate limit (CVE-2023-44487's fix) ends the session with INTERNAL_ERROR
        assert c.goaway_code == "INTERNAL_ERROR"
    s = samples(scrape(proxy))
    assert value(s, "callback_proxy_http2_goaways_sent_total", code="internal_error") == 1
    # resets in the same read as their HEADERS: none of those streams started an upstream request
    assert len(upstream_requests(upstream)) < 50


def test_a_continuation_flood_ends_the_connection(h2_proxy, upstream):
    proxy = h2_proxy()
    with h2(proxy) as c:
        block = c.header_block([(":method", "GET"), (":scheme", "https"), (":authority", "localhost"), (":path", "/echo")])
        frames = [HeadersFrame(1, data=block, flags=["END_STREAM"])]
        frames += [ContinuationFrame(1, data=c.header_block([("x-c", "v" * 10)])) for _ in range(100)]
        try:
            c.send(*frames)
        except OSError:
            pass
        # nghttp2 ends the session on the 9th CONTINUATION (CVE-2024-28182's fix) without a GOAWAY
        assert c.wait_closed(3)
    assert upstream_requests(upstream) == []
    s = samples(scrape(proxy))
    assert value(s, "callback_proxy_http2_connection_errors_total") == 1


def test_a_ping_flood_from_a_client_that_does_not_read_costs_bounded_memory_and_is_closed(h2_proxy):
    """A client that floods PINGs and reads nothing: the proxy stops reading once its output towards
    that client is full (nghttp2 queues at most 10,000 unsent ACKs; the frame guard cuts such a flood sooner), keeps serving others,
    and closes the connection after --client-send-timeout."""
    proxy = h2_proxy(opts={"--client-send-timeout": "2s"})
    before = proxy.vm_kib("VmRSS")
    c = h2(proxy)
    try:
        ping = PingFrame(0, opaque_data=b"12345678").serialize()
        c.sock.settimeout(3)
        try:
            # 34 MB of PINGs: more than the kernel's buffers hold both ways, so the proxy's
            # ACKs back up once they are full, and sendall blocks (then times out) here
            for _ in range(20000):
                c.sock.sendall(ping * 100)
        except OSError:
            pass
        with h2(proxy) as other:
            other.request(1, path="/echo")
            assert other.response(1).status == 200
        assert proxy.vm_kib("VmRSS") - before < 16 * 1024
        # reading nothing for longer than the send timeout (reading would unblock the proxy)
        time.sleep(3)
        deadline = time.monotonic() + 6
        closed = False
        while time.monotonic() < deadline and not closed:
            try:
                c.sock.settimeout(0.5)
                closed = c.sock.recv(1 << 20) == b""
            except (TimeoutError, BlockingIOError):
                pass
            except OSError:
                closed = True
        assert closed
    finally:
        c.close()
    assert proxy.proc.poll() is None


def test_a_settings_flood_ends_the_connection(h2_proxy):
    proxy = h2_proxy()
    with h2(proxy) as c:
        # 33 entries in one SETTINGS frame: past the 32 allowed
        try:
            c.send(SettingsFrame(0, settings={0x4: 65535 + i for i in range(1)}))
            raw = b"".join((0x4).to_bytes(2, "big") + (65535).to_bytes(4, "big") for _ in range(40))
            c.sock.sendall(len(raw).to_bytes(3, "big") + b"\x04\x00" + (0).to_bytes(4, "big") + raw)
        except OSError:
            pass
        assert c.wait_closed(5)
        assert c.goaway_code == "ENHANCE_YOUR_CALM"


# ---------------------------------------------------------------------------------------------
# Frames that carry no request (HTTP2FrameGuard): a budget per connection, then ENHANCE_YOUR_CALM


def raw_frame(type_, flags=0, stream=0, payload=b""):
    return len(payload).to_bytes(3, "big") + bytes([type_, flags]) + stream.to_bytes(4, "big") + payload


FLOODS = {
    "SETTINGS": raw_frame(0x4),
    "PING": raw_frame(0x6, payload=b"12345678"),
    "PRIORITY": raw_frame(0x2, stream=3, payload=b"\x00\x00\x00\x00\x10"),
    "WINDOW_UPDATE": raw_frame(0x8, payload=(1).to_bytes(4, "big")),
    "unknown type": raw_frame(0x42, payload=b"x"),
    "empty DATA": raw_frame(0x0, stream=1),
}


@pytest.mark.parametrize("kind", sorted(FLOODS))
def test_a_flood_of_frames_that_carry_no_request_is_cut_off_with_enhance_your_calm(h2_proxy, kind):
    """200,000 such frames in under a second used to be answered to the last one; nginx cuts the
    sender off after tens of thousands, this budget after about a thousand."""
    proxy = h2_proxy()
    with h2(proxy) as c:
        c.read_until(lambda c: 3 in c.server_settings)
        # stream 1 open with its body still coming, for the empty DATA frames
        c.request(1, method="POST", path="/echo", end_stream=False)
        chunk = FLOODS[kind] * 1000
        sent = 0
        try:
            while sent < 200_000 and not c.closed:
                c.sock.sendall(chunk)
                sent += 1000
                c.read_available()  # the client reads what it is sent: no back-pressure helps the proxy
        except OSError:
            pass
        c.wait_closed(10)
        assert c.goaway_code == "ENHANCE_YOUR_CALM", (kind, c.goaway_code)
        answered = sum(1 for f in c.frames if type(f).__name__ in ("SettingsFrame", "PingFrame") and "ACK" in f.flags)
        assert answered < 1200, answered
    with h2(proxy) as other:  # the next connection is served
        other.request(1, path="/echo")
        assert other.response(1).status == 200
    s = samples(scrape(proxy))
    assert value(s, "callback_proxy_http2_frame_rule_errors_total", rule="flood") == 1
    assert value(s, "callback_proxy_http2_goaways_sent_total", code="enhance_your_calm") == 1
    lines = [l for l in proxy.stderr_text().splitlines() if "client broke a frame rule" in l]
    assert len(lines) == 1 and "http2.glitch_burst" in lines[0], lines


def test_a_large_download_acknowledged_frame_by_frame_is_not_a_flood(h2_proxy, cert):
    """The frame client sends two WINDOW_UPDATEs for every DATA frame, the most a client owes; 64 MiB
    of 16 KiB frames is 8,192 of them, eight times the budget."""
    proxy = h2_proxy()
    with h2(proxy) as c:
        c.request(1, path=f"/bytes?n={64 << 20}")
        r = c.response(1, timeout=60)
        assert r.status == 200 and len(r.body) == 64 << 20
        assert c.goaway is None
        c.request(3, path="/echo")
        assert c.response(3).status == 200


def test_a_flood_budget_can_be_set(h2_proxy, tmp_path):
    proxy = configured(h2_proxy, tmp_path, "http2: { glitch_burst: 20, max_glitches_per_second: 1 }\n")
    with h2(proxy) as c:
        settled(c)
        c.send(*[PingFrame(0, opaque_data=b"%08d" % i) for i in range(15)])
        assert c.read_until(lambda c: sum(1 for f in c.frames if isinstance(f, PingFrame)) == 15, timeout=3)
        assert c.goaway is None
        c.send(*[PingFrame(0, opaque_data=b"%08d" % i) for i in range(10)])
        assert c.read_until(lambda c: c.goaway is not None, timeout=3)
        assert c.goaway_code == "ENHANCE_YOUR_CALM"


# ---------------------------------------------------------------------------------------------
# Streams the client closed, reused ids, PRIORITY on stream 0 (h2spec 5.1/8, 5.1/11, 5.1/12,
# 5.1.1/2, 6.3/1): nghttp2 forgets closed streams in our configuration, HTTP2FrameGuard does not


GET = [(":method", "GET"), (":scheme", "https"), (":authority", "localhost"), (":path", "/echo")]


def test_data_after_the_client_reset_its_stream_is_stream_closed(h2_proxy):  # h2spec 5.1/8
    proxy = h2_proxy()
    with h2(proxy) as c:
        c.send(c.headers(1, GET, end_stream=False), RstStreamFrame(1, error_code=8),
               DataFrame(1, data=b"test", flags=["END_STREAM"]))
        assert c.read_until(lambda c: c.goaway is not None, timeout=3)
        assert c.goaway_code == "STREAM_CLOSED"


def test_data_on_a_stream_the_client_ended_is_stream_closed(h2_proxy):  # h2spec 5.1/11
    proxy = h2_proxy()
    with h2(proxy) as c:
        c.send(c.headers(1, GET))
        assert c.response(1).status == 200
        c.send(DataFrame(1, data=b"test", flags=["END_STREAM"]))
        assert c.read_until(lambda c: c.goaway is not None, timeout=3)
        assert c.goaway_code == "STREAM_CLOSED"
    assert value(samples(scrape(proxy)), "callback_proxy_http2_frame_rule_errors_total", rule="closed_stream") == 1


def test_headers_reusing_a_closed_streams_id_is_a_connection_error(h2_proxy):  # h2spec 5.1/12
    proxy = h2_proxy()
    with h2(proxy) as c:
        c.send(c.headers(1, GET))
        assert c.response(1).status == 200
        c.send(c.headers(1, GET))
        assert c.read_until(lambda c: c.goaway is not None, timeout=3)
        assert c.goaway_code == "STREAM_CLOSED"


def test_a_stream_id_below_the_previous_one_is_a_protocol_error(h2_proxy, upstream):  # h2spec 5.1.1/2
    proxy = h2_proxy()
    with h2(proxy) as c:
        c.send(c.headers(5, GET), c.headers(3, GET))
        assert c.read_until(lambda c: c.goaway is not None, timeout=3)
        assert c.goaway_code == "PROTOCOL_ERROR"
        assert c.goaway.last_stream_id == 5
    assert len(upstream_requests(upstream)) <= 1


def test_priority_on_stream_zero_is_a_protocol_error(h2_proxy):  # h2spec 6.3/1
    proxy = h2_proxy()
    with h2(proxy) as c:
        c.read_until(lambda c: 3 in c.server_settings)
        c.sock.sendall(raw_frame(0x2, stream=0, payload=b"\x00\x00\x00\x00\xff"))
        assert c.read_until(lambda c: c.goaway is not None, timeout=3)
        assert c.goaway_code == "PROTOCOL_ERROR"


def test_what_was_in_flight_for_a_stream_the_proxy_refused_is_ignored(h2_proxy, tmp_path):
    """RFC 9113 §5.1: after our RST_STREAM the client may still send what it had queued."""
    proxy = configured(h2_proxy, tmp_path, "http2:\n  max_concurrent_streams: 1\n")
    with h2(proxy) as c:
        settled(c)
        c.request(1, path="/slow?ms=500")
        c.send(c.headers(3, [(":method", "POST")] + GET[1:], end_stream=False))
        assert c.response(3).reset == "REFUSED_STREAM"
        c.send(DataFrame(3, data=b"x" * 1000), DataFrame(3, data=b"y", flags=["END_STREAM"]))
        assert c.response(1).status == 200
        c.request(5, path="/echo")
        assert c.response(5).status == 200
        assert c.goaway is None


# ---------------------------------------------------------------------------------------------
# h2c with prior knowledge


def test_h2c_prior_knowledge_where_asked_for_and_http11_on_the_same_port(proxy_factory, upstream):
    proxy = proxy_factory(upstream, extra=["--http2-cleartext"])
    out = subprocess.run([CURL, "-sS", "-v", "--http2-prior-knowledge", f"http://127.0.0.1:{proxy.port}/echo"],
                         capture_output=True, timeout=10)
    assert out.returncode == 0, out.stderr
    assert b"< HTTP/2 200" in out.stderr
    e = json.loads(out.stdout)
    assert {k.lower(): v for k, v in e["headers"]}["x-forwarded-proto"] == "http"
    out = subprocess.run([CURL, "-sS", "-v", f"http://127.0.0.1:{proxy.port}/echo"], capture_output=True, timeout=10)
    assert b"< HTTP/1.1 200" in out.stderr
    with RawH2(proxy.port, tls=False) as c:
        c.request(1, path="/echo")
        assert c.response(1).status == 200


def test_without_cleartext_prior_knowledge_is_refused(proxy_factory, upstream):
    proxy = proxy_factory(upstream)
    out = subprocess.run([CURL, "-sS", "-v", "--http2-prior-knowledge", f"http://127.0.0.1:{proxy.port}/echo"],
                         capture_output=True, timeout=10)
    assert out.returncode != 0 or b"HTTP/2 200" not in out.stderr
    assert upstream_requests(upstream) == []
