"""Per-client limits through the real binary (`rate_limits:`, `limits.max_connections_per_client`,
`limits.exempt_clients`, `limits.dry_run`): two clients told apart by their source addresses on
loopback (127.0.0.1 and 127.0.0.2), the client behind a trusted proxy by X-Forwarded-For and
behind a layer-4 balancer by its PROXY header; 429 with Retry-After, the setting named in the
log, a metric per rule, and buckets that survive a reload."""

import json
import socket
import subprocess
import time

from helpers import HTTPConn
from test_observability import samples, scrape, value
from test_proxy_protocol import v1
from test_reload import reload

A, B = "127.0.0.1", "127.0.0.2"


def limited(proxy_factory, upstream, tmp_path, text, extra=()):
    cfg = tmp_path / "limits.yaml"
    cfg.write_text(text)
    return proxy_factory(upstream, extra=["--config", str(cfg), *extra])


def status(p, target="/echo", source=A, headers=None):
    """One request on its own connection; (status, Retry-After, body)."""
    with HTTPConn(p.port, source=source) as c:
        c.request("GET", target, headers=headers or [])
        r = c.read_response()
        return r.status, r.one("retry-after"), r.body


def statuses(p, n, target="/echo", source=A, headers=None):
    return [status(p, target, source, headers)[0] for _ in range(n)]


def log_lines(p, msg):
    return [json.loads(l) for l in p.stderr_text().splitlines() if f'"msg":"{msg}"' in l]


def test_a_client_past_its_rate_gets_429_and_others_are_untouched(proxy_factory, upstream, tmp_path):
    p = limited(proxy_factory, upstream, tmp_path, "rate_limits: [{ name: site, rate: 3/m }]\n")
    assert statuses(p, 3) == [200, 200, 200]
    code, retry, body = status(p)
    # 3/m: a token every 20 s; the refusal says when the next one is there.
    assert code == 429 and retry is not None and 1 <= int(retry) <= 20, (code, retry)
    assert b"rate_limits 'site' allows 3/m per client, 3 at once" in body
    # Another address has its own bucket.
    assert statuses(p, 3, source=B) == [200, 200, 200]
    assert status(p, source=B)[0] == 429
    lines = log_lines(p, "request refused")
    assert lines and lines[0]["status"] == "429" and "rate_limits 'site'" in lines[0]["reason"]
    s = samples(scrape(p))
    assert value(s, "callback_proxy_client_limit_refusals_total", rule="site", mode="enforced") == 2
    # The proxy's own 4xx forms: JSON for an API client.
    with HTTPConn(p.port) as c:
        c.request("GET", "/echo", headers=[("Accept", "application/json")])
        r = c.read_response()
        assert r.status == 429 and r.json()["error"]["status"] == 429 and r.one("retry-after")


def test_a_rule_counts_only_its_paths_and_a_burst_spreads_requests(proxy_factory, upstream, tmp_path):
    p = limited(proxy_factory, upstream, tmp_path,
                "rate_limits: [{ name: login, paths: [/echo/login], rate: 10/s, burst: 2 }]\n")
    assert statuses(p, 2, "/echo/login") == [200, 200]
    assert status(p, "/echo/login")[0] == 429
    assert status(p, "/echo/login/step2")[0] == 429, "below the prefix counts"
    assert statuses(p, 5, "/echo/loginhelp") == [200] * 5, "segment boundaries, as every path rule"
    assert statuses(p, 5, "/echo") == [200] * 5
    time.sleep(0.25)  # 10/s: a token every 100 ms
    assert status(p, "/echo/login")[0] == 200


def test_a_rule_counts_every_spelling_of_its_paths_that_protect_would(proxy_factory, upstream, tmp_path):
    # Rails routes /users/sign_in(.:format); case-insensitive routers fold case; Spring trims
    # whitespace: each spelling is the same action, so each spends the same tokens.
    p = limited(proxy_factory, upstream, tmp_path,
                "rate_limits: [{ name: login, paths: [/echo/sign_in], rate: 1/m }]\n")
    assert status(p, "/echo/sign_in")[0] == 200
    for spelling in ("/echo/sign_in.json", "/ECHO/Sign_In", "/echo/sign_in%09", "/echo/sign_in;jsessionid=1",
                     "/echo/sign_in/"):
        assert status(p, spelling)[0] == 429, spelling
    assert status(p, "/echo/sign_in_help")[0] == 200


def test_exempt_clients_and_a_dry_run_refuse_nothing(proxy_factory, upstream, tmp_path):
    p = limited(proxy_factory, upstream, tmp_path, f"""limits: {{ exempt_clients: [{B}/32] }}
rate_limits:
  - {{ name: enforced, rate: 1/m, paths: [/echo] }}
  - {{ name: trial, rate: 1/m, paths: [/page], dry_run: true }}
""")
    assert statuses(p, 4, source=B) == [200] * 4, "exempt"
    assert statuses(p, 2, source=A) == [200, 429]
    assert statuses(p, 4, "/page", source=A) == [200] * 4, "dry run"
    s = samples(scrape(p))
    assert value(s, "callback_proxy_client_limit_refusals_total", rule="trial", mode="dry_run") == 3
    assert value(s, "callback_proxy_client_limit_refusals_total", rule="trial", mode="enforced") == 0
    assert value(s, "callback_proxy_client_limit_refusals_total", rule="enforced", mode="enforced") == 1
    dry = log_lines(p, "request rate limit reached (dry run: allowed)")
    assert dry and dry[0]["rule"] == "trial" and "rate_limits" in dry[0]["setting"] and dry[0]["client"] == A


def test_behind_a_trusted_proxy_the_forwarded_client_is_limited(proxy_factory, upstream, tmp_path):
    p = limited(proxy_factory, upstream, tmp_path,
                "trusted_proxies: [127.0.0.1/32]\nrate_limits: [{ name: site, rate: 2/m }]\n")
    one = [("X-Forwarded-For", "198.51.100.1")]
    two = [("X-Forwarded-For", "198.51.100.2")]
    assert statuses(p, 3, headers=one) == [200, 200, 429]
    assert statuses(p, 2, headers=two) == [200, 200]
    # An IPv6 client is one client across its /64.
    assert status(p, headers=[("X-Forwarded-For", "2001:db8:1:2::1")])[0] == 200
    assert status(p, headers=[("X-Forwarded-For", "2001:db8:1:2::ffff")])[0] == 200
    assert status(p, headers=[("X-Forwarded-For", "2001:db8:1:2:3:4:5:6")])[0] == 429
    # A client cannot pick its bucket by prepending entries: the right-most untrusted one counts.
    assert status(p, headers=[("X-Forwarded-For", "203.0.113.50, 198.51.100.1")])[0] == 429


def test_a_rule_whose_table_is_full_lets_new_clients_pass_and_says_which_setting_to_raise(proxy_factory, upstream, tmp_path):
    """`clients: 1024`: 3,000 addresses within one refill period do not fit; the ones tracked stay
    limited, the rest pass uncounted, counted and logged (once a second) naming the setting."""
    p = limited(proxy_factory, upstream, tmp_path,
                "trusted_proxies: [127.0.0.1/32]\nrate_limits: [{ name: site, rate: 1/m, clients: 1024 }]\n")
    started = time.monotonic()
    with HTTPConn(p.port) as c:
        for i in range(3_000):
            c.request("GET", "/echo", headers=[("X-Forwarded-For", f"10.{i >> 16}.{(i >> 8) & 255}.{i & 255}")])
            r = c.read_response()
            assert r.status == 200, (i, r.status)
    took = time.monotonic() - started
    untracked = value(samples(scrape(p)), "callback_proxy_client_limit_untracked_total", rule="site")
    assert 3_000 - 1_024 <= untracked < 3_000, untracked
    # A tracked client is still limited: its second request is refused.
    second = [status(p, headers=[("X-Forwarded-For", f"10.0.{(i >> 8) & 255}.{i & 255}")])[0] for i in range(40)]
    assert 429 in second, second
    lines = log_lines(p, "request not rate limited: the rule tracks as many clients as it can")
    assert 1 <= len(lines) <= took + 2, f"{len(lines)} lines in {took:.1f} s"
    assert lines[0]["setting"] == "rate_limits (site).clients" and lines[0]["clients"] == "1024", lines[0]


def test_http2_streams_count_like_requests(proxy_factory, upstream, tmp_path):
    p = limited(proxy_factory, upstream, tmp_path, "http2: { cleartext: true }\nrate_limits: [{ name: site, rate: 2/m }]\n")
    # Three streams on one connection (nghttp: curl 7.88 cannot reuse an h2c connection).
    urls = [f"http://127.0.0.1:{p.port}/echo?{i}" for i in range(3)]
    out = subprocess.run(["nghttp", "-n", "--stat", *urls], capture_output=True, text=True, timeout=20)
    codes = sorted(line.split()[4] for line in out.stdout.splitlines() if "/echo?" in line)
    assert codes == ["200", "200", "429"], out


def test_buckets_survive_a_reload_that_keeps_the_rule(proxy_factory, upstream, tmp_path):
    p = limited(proxy_factory, upstream, tmp_path, "rate_limits: [{ name: site, rate: 2/m }]\n")
    assert statuses(p, 3) == [200, 200, 429]
    reload(p, "configuration reloaded")
    assert status(p)[0] == 429, "a reload is no way around a limit"
    (tmp_path / "limits.yaml").write_text("rate_limits: [{ name: site, rate: 5/m }]\n")
    reload(p, "configuration reloaded")
    assert statuses(p, 5) == [200] * 5, "a changed rule starts afresh"


def open_idle(port, source, n):
    return [socket.create_connection(("127.0.0.1", port), source_address=(source, 0), timeout=3) for _ in range(n)]


def refused(sock):
    """True when the proxy closed the connection without an answer."""
    try:
        sock.sendall(b"GET /echo HTTP/1.1\r\nHost: x\r\n\r\n")
        return sock.recv(100) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True


def test_a_client_past_its_connection_cap_is_closed_at_once_and_others_still_get_in(proxy_factory, upstream, tmp_path):
    p = limited(proxy_factory, upstream, tmp_path, "limits: { max_connections_per_client: 3 }\n")
    held = open_idle(p.port, A, 3)
    try:
        extra = open_idle(p.port, A, 1)[0]
        assert refused(extra)
        extra.close()
        # Another address is not affected, and the held ones still work.
        assert status(p, source=B)[0] == 200
        with HTTPConn(p.port, source=A) as _:
            pass
        held[0].sendall(b"GET /echo HTTP/1.1\r\nHost: x\r\n\r\n")
        assert held[0].recv(12).startswith(b"HTTP/1.1 200")
        # One closes: one more may open.
        held.pop().close()
        deadline = time.monotonic() + 3
        while True:
            s = open_idle(p.port, A, 1)[0]
            ok = not refused(s)
            s.close()
            if ok or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert ok
    finally:
        for s in held:
            s.close()
    lines = log_lines(p, "client connection refused: limit reached")
    assert lines and lines[0]["client"] == A and lines[0]["limit"] == "3"
    assert "limits.max_connections_per_client" in lines[0]["setting"]
    s = samples(scrape(p))
    assert value(s, "callback_proxy_client_limit_refusals_total", rule="max_connections_per_client", mode="enforced") >= 1


def test_the_cap_applies_to_the_client_a_proxy_header_names(proxy_factory, upstream, tmp_path):
    p = limited(proxy_factory, upstream, tmp_path, "limits: { max_connections_per_client: 2 }\n", extra=["--proxy-protocol"])
    held = []
    try:
        for _ in range(2):
            s = socket.create_connection(("127.0.0.1", p.port), timeout=3)
            s.sendall(v1("203.0.113.7"))
            held.append(s)
        time.sleep(0.2)
        s = socket.create_connection(("127.0.0.1", p.port), timeout=3)
        s.sendall(v1("203.0.113.7") + b"GET /echo HTTP/1.1\r\nHost: x\r\n\r\n")
        try:
            assert s.recv(100) == b"", "a third connection from 203.0.113.7"
        except ConnectionResetError:
            pass
        s.close()
        # From the same balancer, another client gets in.
        with HTTPConn(p.port) as c:
            c.send(v1("203.0.113.8"))
            c.request("GET", "/echo")
            assert c.read_response().status == 200
    finally:
        for s in held:
            s.close()


def test_the_default_cap_is_half_the_budget_and_the_ready_line_says_so(proxy_factory, upstream, tmp_path):
    p = limited(proxy_factory, upstream, tmp_path, "limits: { max_connections: 100 }\n")
    deadline = time.monotonic() + 5
    while not log_lines(p, "ready") and time.monotonic() < deadline:
        time.sleep(0.02)
    ready = log_lines(p, "ready")[0]
    assert ready["max_connections"] == "100" and ready["max_connections_per_client"] == "50"
    held = open_idle(p.port, A, 50)
    try:
        extra = open_idle(p.port, A, 1)[0]
        assert refused(extra)
        extra.close()
        assert status(p, source=B)[0] == 200
    finally:
        for s in held:
            s.close()


def test_dry_run_lets_connections_past_the_cap_in_and_says_so(proxy_factory, upstream, tmp_path):
    p = limited(proxy_factory, upstream, tmp_path, "limits: { max_connections_per_client: 1, dry_run: true }\n")
    held = open_idle(p.port, A, 3)
    try:
        for s in held:
            s.sendall(b"GET /echo HTTP/1.1\r\nHost: x\r\n\r\n")
            assert s.recv(12).startswith(b"HTTP/1.1 200")
    finally:
        for s in held:
            s.close()
    lines = log_lines(p, "client connection limit reached (dry run: allowed)")
    assert lines and lines[0]["open"] == "1"
    s = samples(scrape(p))
    assert value(s, "callback_proxy_client_limit_refusals_total", rule="max_connections_per_client", mode="dry_run") == 2
