"""Several upstream servers (`upstreams:`, `upstream_health:`) through the real binary: weighted
round robin, backups, a server answering 503 taken out by passive health and brought back by an
active health check, a dead server's requests moved to another with no error, an idempotent
request moved when a server closes without answering (and a POST not), the engine's own 503 when
every server is out, /readyz and the metrics per server."""

import http.server
import json
import socket
import threading
import time
import urllib.request

import pytest

from helpers import HTTPConn, closed_port
from test_observability import samples, scrape, value


class App:
    """A small threaded HTTP server that says who it is; `status` is what it answers requests
    with, `health` what its health path /up answers (both changed by the tests)."""

    def __init__(self, name):
        self.name = name
        self.status = 200
        self.health = 200
        self.hits = 0
        self.checks = 0
        self.delay = 0.0   # seconds a request whose path has /slow waits before its answer
        self.bodies = []   # request bodies as received (chunked ones decoded)
        app = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def answer(self):
                if self.path == "/up":
                    app.checks += 1
                else:
                    app.hits += 1
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    app.bodies.append(self.rfile.read(length))
                elif self.headers.get("Transfer-Encoding") == "chunked":
                    body = b""
                    while size := int(self.rfile.readline().split(b";")[0], 16):
                        body += self.rfile.read(size)
                        self.rfile.readline()
                    while self.rfile.readline() not in (b"\r\n", b""):
                        pass
                    app.bodies.append(body)
                if "/slow" in self.path:
                    time.sleep(app.delay)
                body = app.name.encode()
                self.send_response(app.health if self.path == "/up" else app.status)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("X-Server", app.name)
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_HEAD = answer

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


class Hangup:
    """Accepts, reads the request, and closes without a word."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.requests = 0
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            c.settimeout(2)
            try:
                if c.recv(65536):
                    self.requests += 1
            except OSError:
                pass
            c.close()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"


@pytest.fixture
def apps():
    made = []

    def make(name):
        a = App(name)
        made.append(a)
        return a

    yield make
    for a in made:
        a.stop()


def proxy_with(proxy_factory, tmp_path, text):
    cfg = tmp_path / "upstreams.yaml"
    cfg.write_text(text)
    return proxy_factory(upstream_url=None, extra=["--config", str(cfg)])


def get(p, path="/x", method="GET", body=b"", headers=None):
    with HTTPConn(p.port) as c:
        c.request(method, path, body=body, headers=headers or [])
        r = c.read_response(method=method)
        return r


def who(p, n=1):
    return [get(p).one("x-server") for _ in range(n)]


def readyz(p):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{p.internal_port}/readyz", timeout=3) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_weights_share_the_requests_and_a_backup_waits(proxy_factory, tmp_path, apps):
    a, b, c = apps("a"), apps("b"), apps("c")
    p = proxy_with(proxy_factory, tmp_path, f"""upstreams:
  - {{ url: {a.url}, weight: 3 }}
  - {{ url: {b.url} }}
  - {{ url: {c.url}, backup: true }}
""")
    seen = who(p, 40)
    assert seen.count("a") == 30 and seen.count("b") == 10 and "c" not in seen, seen
    # Interleaved, not in bursts: never more than three a's in a row.
    assert "aaaa" not in "".join(seen)
    ready = json.loads(next(l for l in p.stderr_text().splitlines() if '"msg":"ready"' in l))
    assert ready["upstream"] == f"127.0.0.1:{a.port} (weight 3), 127.0.0.1:{b.port}, 127.0.0.1:{c.port} (backup)"


def test_a_dead_server_costs_no_request_and_the_backup_steps_in(proxy_factory, tmp_path, apps):
    b = apps("backup")
    dead = closed_port()
    p = proxy_with(proxy_factory, tmp_path, f"""upstreams:
  - {{ url: "http://127.0.0.1:{dead}" }}
  - {{ url: {b.url}, backup: true }}
upstream_health: {{ fail_timeout: 30s }}
""")
    assert who(p, 5) == ["backup"] * 5, "refused connections move the request; none gets a 502"
    assert "upstream server taken out" in p.stderr_text()
    s = samples(scrape(p))
    assert value(s, "callback_proxy_upstream_server_available", group="default", server=f"http://127.0.0.1:{dead}") == 0
    assert value(s, "callback_proxy_upstream_server_available", group="default", server=b.url) == 1
    assert value(s, "callback_proxy_upstream_server_failures_total", group="default", server=f"http://127.0.0.1:{dead}", kind="connect") == 1
    status, body = readyz(p)
    assert status == 200 and body["upstreams"][b.url] == "up"
    assert body["upstreams"][f"http://127.0.0.1:{dead}"].startswith("connect:")


def test_a_server_answering_503_is_taken_out_by_passive_health_and_back_by_its_health_check(proxy_factory, tmp_path, apps):
    good, sick = apps("good"), apps("sick")
    sick.status = 503   # its requests fail; its health path still says 200
    p = proxy_with(proxy_factory, tmp_path, f"""upstreams: [{{ url: {good.url} }}, {{ url: {sick.url} }}]
upstream_health: {{ max_fails: 1, fail_timeout: 30s, check_path: /up, check_interval: 1s, check_timeout: 1s }}
""")
    statuses = [get(p).status for _ in range(2)]
    assert sorted(statuses) == [200, 503], statuses
    # Out (passive health): only the good one answers.
    assert who(p, 6) == ["good"] * 6
    status, body = readyz(p)
    assert status == 200 and body["upstreams"][sick.url].startswith("status: answered 503"), body
    sick.status = 200
    # Back by its next passing health check, long before the 30 s fail_timeout.
    deadline = time.monotonic() + 5
    while "sick" not in who(p, 2) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert time.monotonic() < deadline, "not back by its health check"
    assert "passed its health check: back in" in p.stderr_text()
    # A failing health check takes it out by itself, and keeps it out while it fails.
    sick.health = 500
    deadline = time.monotonic() + 5
    while "failed its health check" not in p.stderr_text() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert who(p, 6) == ["good"] * 6
    s = samples(scrape(p))
    assert value(s, "callback_proxy_upstream_server_failures_total", group="default", server=sick.url, kind="status") == 1
    assert value(s, "callback_proxy_upstream_server_failures_total", group="default", server=sick.url, kind="check") >= 1
    assert value(s, "callback_proxy_upstream_server_available", group="default", server=sick.url) == 0


class Hung:
    """A server that accepts connections and never answers (an app stuck on a lock)."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.held = []
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            try:
                self.held.append(self.sock.accept()[0])
            except OSError:
                return

    def close(self):
        self.sock.close()
        for c in self.held:
            c.close()


def test_servers_that_hang_delay_no_other_servers_health_check(proxy_factory, tmp_path, apps):
    """Two servers never answer a check before its 5 s timeout; the others are still checked
    every second. (Checked one after another, `sick` was first asked after 10 s, and its
    failure noticed up to 11 s late.)"""
    hung = [Hung(), Hung()]
    good, sick = apps("good"), apps("sick")
    try:
        p = proxy_with(proxy_factory, tmp_path, f"""upstreams: [{{ url: {hung[0].url} }}, {{ url: {hung[1].url} }}, {{ url: {good.url} }}, {{ url: {sick.url} }}]
upstream_health: {{ check_path: /up, check_interval: 1s, check_timeout: 5s }}
""")
        deadline = time.monotonic() + 3
        while min(good.checks, sick.checks) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert min(good.checks, sick.checks) >= 2, (good.checks, sick.checks)
        sick.health = 500
        failed = time.monotonic()
        while value(samples(scrape(p)), "callback_proxy_upstream_server_available", group="default", server=sick.url) != 0:
            assert time.monotonic() - failed < 3, "a failing check went unnoticed behind the hanging servers"
            time.sleep(0.05)
    finally:
        for h in hung:
            h.close()


def test_a_reload_keeps_a_server_that_fails_its_checks_out(proxy_factory, tmp_path, apps):
    """The group a reload builds takes over what the last one knew: the hung server is not sent
    requests (nor logged out again) while its first check in the new group waits for its timeout."""
    from test_reload import reload
    hung, good = Hung(), apps("good")
    try:
        text = f"""upstreams: [{{ url: {hung.url} }}, {{ url: {good.url} }}]
upstream_health: {{ check_path: /up, check_interval: 1s, check_timeout: 2s }}
"""
        p = proxy_with(proxy_factory, tmp_path, text)
        deadline = time.monotonic() + 5
        while value(samples(scrape(p)), "callback_proxy_upstream_server_available", group="default", server=hung.url) != 0:
            assert time.monotonic() < deadline, "the hung server was never taken out"
            time.sleep(0.05)
        assert p.stderr_text().count("failed its health check") == 1
        (tmp_path / "upstreams.yaml").write_text(text.replace("check_interval: 1s", "check_interval: 3s"))
        reload(p, "configuration reloaded")
        assert value(samples(scrape(p)), "callback_proxy_upstream_server_available", group="default", server=hung.url) == 0
        assert who(p, 4) == ["good"] * 4
        time.sleep(2.5)   # the new group's first check of the hung server has timed out
        assert p.stderr_text().count("failed its health check") == 1, "logged out again after the reload"
    finally:
        hung.close()


def test_without_health_checks_a_server_comes_back_after_fail_timeout(proxy_factory, tmp_path, apps):
    good, sick = apps("good"), apps("sick")
    sick.status = 502
    p = proxy_with(proxy_factory, tmp_path, f"""upstreams: [{{ url: {good.url} }}, {{ url: {sick.url} }}]
upstream_health: {{ fail_timeout: 1s }}
""")
    statuses = [get(p).status for _ in range(4)]
    assert statuses.count(502) == 1, statuses
    sick.status = 200
    time.sleep(1.2)
    assert "sick" in who(p, 4)


def test_a_server_that_hangs_up_loses_idempotent_requests_to_another_but_not_a_post(proxy_factory, tmp_path, apps):
    good = apps("good")
    hangup = Hangup()
    p = proxy_with(proxy_factory, tmp_path, f"""upstreams: [{{ url: {hangup.url} }}, {{ url: {good.url} }}]
upstream_health: {{ max_fails: 100 }}
""")
    assert who(p, 4) == ["good"] * 4, "GETs the hung-up server never answered went to the other"
    assert hangup.requests == 2
    posts = [get(p, method="POST", body=b"order=1").status for _ in range(2)]
    assert sorted(posts) == [200, 502], "a POST the app may have acted on is not sent twice"
    assert "upstream request moved to another server" in p.stderr_text()


def test_a_body_for_a_server_that_refuses_the_connection_goes_to_another_and_the_refusal_counts(proxy_factory, tmp_path, apps):
    # Nothing reaches a server whose connection never opened, so the request moves whatever its
    # method, with the body bytes already read (they waited unsent behind the head).
    good = apps("good")
    dead = closed_port()
    dead_url = f"http://127.0.0.1:{dead}"
    p = proxy_with(proxy_factory, tmp_path, f"""upstreams: [{{ url: "{dead_url}" }}, {{ url: {good.url} }}]
upstream_health: {{ max_fails: 100 }}
""")
    sent = [b"x=1", b"order=" + b"7" * 200_000, b"y=2", b"z" * 3_000_000]
    statuses = [get(p, method="POST", body=b).status for b in sent]
    assert statuses == [200] * 4, statuses
    chunked = b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"
    for _ in range(2):
        r = get(p, method="POST", body=chunked, headers=[("Transfer-Encoding", "chunked")])
        assert r.status == 200 and r.one("x-server") == "good"
    assert good.bodies == sent + [b"hello world"] * 2, "every body arrived whole, once"
    s = samples(scrape(p))
    # Round robin over two: every other request was sent to the dead server first.
    assert value(s, "callback_proxy_upstream_server_failures_total", group="default", server=dead_url, kind="connect") == 3


def test_a_post_that_finds_a_server_refusing_connections_takes_it_out(proxy_factory, tmp_path, apps):
    good = apps("good")
    dead_url = f"http://127.0.0.1:{closed_port()}"
    p = proxy_with(proxy_factory, tmp_path, f"""upstreams: [{{ url: "{dead_url}" }}, {{ url: {good.url} }}]
upstream_health: {{ fail_timeout: 30s }}
""")
    assert [get(p, method="POST", body=b"x=1").status for _ in range(4)] == [200] * 4
    assert good.bodies == [b"x=1"] * 4
    status, body = readyz(p)
    assert status == 200 and body["upstreams"][dead_url].startswith("connect:"), body
    assert value(samples(scrape(p)), "callback_proxy_upstream_server_available", group="default", server=dead_url) == 0


def test_a_body_for_the_only_server_refusing_connections_gets_502_and_the_refusal_counts(proxy_factory, tmp_path):
    dead = closed_port()
    dead_url = f"http://127.0.0.1:{dead}"
    p = proxy_with(proxy_factory, tmp_path, f"""upstreams: [{{ url: "{dead_url}" }}]
upstream_health: {{ max_fails: 100 }}
""")
    assert [get(p, method="POST", body=b"a=1" * 1000).status for _ in range(2)] == [502, 502]
    s = samples(scrape(p))
    assert value(s, "callback_proxy_upstream_server_failures_total", group="default", server=dead_url, kind="connect") == 2


def test_every_server_out_gets_the_engines_own_503(proxy_factory, tmp_path, apps):
    a, b = apps("a"), apps("b")
    a.status = b.status = 503
    p = proxy_with(proxy_factory, tmp_path, f"""upstreams: [{{ url: {a.url} }}, {{ url: {b.url} }}]
upstream_health: {{ fail_timeout: 30s }}
""")
    assert [get(p).status for _ in range(2)] == [503, 503]   # the apps' own answers, passed on
    r = get(p, headers=[("Accept", "text/html")])
    assert r.status == 503 and r.one("x-server") is None, "the engine's own answer, no server asked"
    assert r.one("retry-after") == "5" and b"http-equiv=\"refresh\"" in r.body
    status, body = readyz(p)
    assert status == 503 and body["failed"]["upstream"] == "no server available"
    line = json.loads([l for l in p.stdout_text().splitlines() if '"status":503' in l][-1])
    assert line["error"] == "upstream_unavailable"


def test_check_refuses_upstream_and_upstreams_together_and_bad_servers(proxy_bin, tmp_path):
    import subprocess
    cfg = tmp_path / "both.yaml"
    cfg.write_text("upstream: http://127.0.0.1:3000\nupstreams: [{ url: http://127.0.0.1:3001 }, { url: ftp://x, weight: 0 }]\n")
    out = subprocess.run([proxy_bin, "check", "--config", str(cfg)], capture_output=True, text=True, timeout=10)
    assert out.returncode != 0
    assert "give either upstream (one server) or upstreams (several), not both" in out.stderr + out.stdout
    assert "upstreams[1].url" in out.stderr + out.stdout and "upstreams[1].weight" in out.stderr + out.stdout
