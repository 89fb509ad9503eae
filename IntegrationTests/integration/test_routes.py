"""Routes to several upstream groups (`upstream_groups:`, `routes:`) and the balancing beside
round robin (`least_conn`, `hash …`), through the real binary: requests go by path and host to
their group's servers; each group has its own health, retries, timeouts, metrics and /readyz
answer; an answer in `retry_statuses` moves an idempotent request to another server."""

import threading
import time

from helpers import HTTPConn, closed_port
from test_observability import samples, scrape, value
from test_upstreams import App, apps, proxy_with, readyz  # noqa: F401 (apps is a fixture)


def ask(p, path="/x", host="test.local", method="GET", body=b"", headers=None, source=None):
    with HTTPConn(p.port, source=source, timeout=10) as c:
        c.request(method, path, body=body, headers=headers or [], host=host)
        return c.read_response(method=method)


def server(p, path="/x", **kw):
    r = ask(p, path, **kw)
    return r.one("x-server") if r.status == 200 else r.status


def test_paths_and_hosts_choose_the_group_and_the_first_matching_route_wins(proxy_factory, tmp_path, apps):
    site, cable, api, legacy = apps("site"), apps("cable"), apps("api"), apps("legacy")
    p = proxy_with(proxy_factory, tmp_path, f"""upstream: {site.url}
upstream_groups:
  cable: {{ upstream: {cable.url} }}
  api: {{ upstream: {api.url} }}
  legacy: {{ upstream: {legacy.url} }}
routes:
  - {{ paths: [/cable], upstream_group: cable }}
  - {{ hosts: [api.example.com, "*.api.example.com"], upstream_group: api }}
  - {{ hosts: [www.example.com], paths: [/old, /older], upstream_group: legacy }}
""")
    cases = [
        ("test.local", "/", "site"), ("test.local", "/cable", "cable"), ("test.local", "/cable/x?y=1", "cable"),
        ("test.local", "/cables", "site"), ("test.local", "/%63able", "cable"),  # the canonical path is matched
        ("test.local", "/x/../cable", "cable"),
        ("api.example.com", "/v1/users", "api"), ("API.Example.com:8443", "/v1", "api"), ("eu.api.example.com", "/", "api"),
        ("api.example.com", "/cable", "cable"),  # an earlier route wins
        ("xapi.example.com", "/v1", "site"),
        ("www.example.com", "/old/page", "legacy"), ("www.example.com", "/older", "legacy"), ("www.example.com", "/new", "site"),
        ("test.local", "/old", "site"),
    ]
    got = [(host, path, server(p, path, host=host)) for host, path, _ in cases]
    assert got == cases


def test_each_group_has_its_own_health_metrics_and_readiness(proxy_factory, tmp_path, apps):
    site, api = apps("site"), apps("api")
    dead = closed_port()
    gone = closed_port()
    p = proxy_with(proxy_factory, tmp_path, f"""upstream: {site.url}
upstream_groups:
  api:
    upstreams: [{{ url: "http://127.0.0.1:{dead}" }}, {{ url: {api.url} }}]
    health: {{ fail_timeout: 30s }}
  reports: {{ upstreams: [{{ url: "http://127.0.0.1:{gone}" }}, {{ url: "http://127.0.0.1:{dead}" }}] }}
  lone: {{ upstream: "http://127.0.0.1:{gone}" }}
  alive: {{ upstream: {api.url} }}
routes:
  - {{ paths: [/api], upstream_group: api }}
  - {{ paths: [/reports], upstream_group: reports }}
""")
    # The dead server's refusals move the requests within the group: no 502.
    assert [server(p, "/api/x") for _ in range(4)] == ["api"] * 4
    assert server(p, "/reports") == 502 or server(p, "/reports") == 503
    s = samples(scrape(p))
    dead_url = f"http://127.0.0.1:{dead}"
    assert value(s, "callback_proxy_upstream_server_available", group="api", server=dead_url) == 0
    assert value(s, "callback_proxy_upstream_server_available", group="api", server=api.url) == 1
    assert value(s, "callback_proxy_upstream_server_failures_total", group="api", server=dead_url, kind="connect") == 1
    assert ("callback_proxy_upstream_server_available", frozenset({("group", "default"), ("server", site.url)})) in s
    # The whole instance stays ready while a secondary group has no server; each group is listed,
    # and ?group= answers for one.
    status, body = readyz(p)
    assert status == 200, body
    assert body["upstream_groups"]["api"][api.url] == "up" and body["upstream_groups"]["api"][dead_url].startswith("connect:")
    assert set(body["upstream_groups"]) == {"api", "reports", "lone", "alive"}
    # One server and no check_path: no health to read, said so (not "up").
    assert body["upstream_groups"]["lone"][f"127.0.0.1:{gone}"].startswith("not checked"), body
    import urllib.request, urllib.error, json
    def group_ready(name):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{p.internal_port}/readyz?group={name}", timeout=3) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()
    st, raw = group_ready("api")
    assert st == 200 and json.loads(raw)["ready"] is True
    st, raw = group_ready("reports")
    assert st == 503 and json.loads(raw)["failed"]["upstream"] == "no server available", raw
    assert group_ready("default")[0] == 200
    assert group_ready("nope")[0] == 404
    assert group_ready("nope&x=1")[0] == 404
    # ?group= connects to a lone server, as /readyz does to the default group's.
    st, raw = group_ready("lone")
    assert st == 503 and "refused" in json.loads(raw)["failed"]["upstream"].lower(), raw
    assert group_ready("alive")[0] == 200


def test_least_conn_sends_requests_away_from_a_server_busy_with_a_long_one(proxy_factory, tmp_path, apps):
    a, b = apps("a"), apps("b")
    a.delay = b.delay = 1.5  # under the test proxy's 3 s upstream timeout
    p = proxy_with(proxy_factory, tmp_path, f"""upstream: {a.url}
upstream_groups:
  work: {{ upstreams: [{{ url: {a.url} }}, {{ url: {b.url} }}], balance: least_conn }}
routes: [{{ paths: [/w], upstream_group: work }}]
""")
    slow = {}
    t = threading.Thread(target=lambda: slow.setdefault("who", server(p, "/w/slow")))
    t.start()
    deadline = time.monotonic() + 3
    while a.hits + b.hits < 1 and time.monotonic() < deadline:
        time.sleep(0.02)
    busy = "a" if a.hits else "b"
    # While it is in flight, every quick request goes to the other server (round robin would
    # send every second one to the busy server).
    quick = [server(p, "/w/fast") for _ in range(6)]
    assert quick == [("b" if busy == "a" else "a")] * 6, (busy, quick)
    t.join()
    assert slow["who"] == busy
    # Idle again: both take requests.
    assert set(server(p, "/w/fast") for _ in range(4)) == {"a", "b"}


def test_hash_keeps_a_key_on_its_server(proxy_factory, tmp_path, apps):
    a, b, c = apps("a"), apps("b"), apps("c")
    p = proxy_with(proxy_factory, tmp_path, f"""upstream: {a.url}
upstream_groups:
  cable: {{ upstreams: [{{ url: {a.url} }}, {{ url: {b.url} }}, {{ url: {c.url} }}], balance: hash header X-Session }}
  sticky: {{ upstreams: [{{ url: {a.url} }}, {{ url: {b.url} }}, {{ url: {c.url} }}], balance: hash client_address }}
routes:
  - {{ paths: [/cable], upstream_group: cable }}
  - {{ paths: [/sticky], upstream_group: sticky }}
""")
    owners = {}
    for k in range(12):
        seen = {server(p, "/cable", headers=[("X-Session", f"session-{k}")]) for _ in range(4)}
        assert len(seen) == 1, (k, seen)
        owners[k] = seen.pop()
    assert len(set(owners.values())) >= 2, owners  # the keys spread over the servers
    # Without the header: round robin over all three.
    assert {server(p, "/cable") for _ in range(6)} == {"a", "b", "c"}
    # By client address: each address stays on its server.
    for source in ("127.0.0.1", "127.0.0.2", "127.0.0.3"):
        assert len({server(p, "/sticky", source=source) for _ in range(5)}) == 1


def test_an_answer_in_retry_statuses_moves_an_idempotent_request(proxy_factory, tmp_path, apps):
    good, sick = apps("good"), apps("sick")
    sick.status = 503
    p = proxy_with(proxy_factory, tmp_path, f"""upstream: {good.url}
upstream_groups:
  retry:
    upstreams: [{{ url: {good.url} }}, {{ url: {sick.url} }}]
    retry_statuses: [503]
    health: {{ fail_statuses: [] }}
  plain:
    upstreams: [{{ url: {good.url} }}, {{ url: {sick.url} }}]
    health: {{ fail_statuses: [] }}
routes:
  - {{ paths: [/retry], upstream_group: retry }}
  - {{ paths: [/plain], upstream_group: plain }}
""")
    # The sick server stays in (no fail_statuses), so every second GET reaches it: moved, 200.
    before = sick.hits
    assert [ask(p, "/retry").status for _ in range(8)] == [200] * 8
    assert sick.hits - before >= 3, "the sick server was asked, and its 503 dropped"
    assert "upstream request moved to another server" in p.stderr_text()
    # A POST is not repeated: the 503 reaches the client; without retry_statuses a GET's does too.
    assert 503 in [ask(p, "/retry", method="POST", body=b"x=1").status for _ in range(4)]
    assert 503 in [ask(p, "/plain").status for _ in range(4)]
    # An empty chunked body sent again carries its last chunk (else the next server waits for
    # it until the upstream timeout, 3 s here).
    for _ in range(4):
        with HTTPConn(p.port, timeout=10) as c:
            c.request("GET", "/retry", headers=[("Transfer-Encoding", "chunked")], body=b"0\r\n\r\n")
            started = time.monotonic()
            r = c.read_response()
            assert r.status == 200 and time.monotonic() - started < 2, (r.status, time.monotonic() - started)
    # Every server answering 503: the last answer goes to the client.
    good.status = 503
    r = ask(p, "/retry")
    assert r.status == 503 and r.one("x-server") in ("good", "sick")


def test_a_group_has_its_own_upstream_timeout(proxy_factory, tmp_path, apps):
    app = apps("app")
    app.delay = 1.5
    p = proxy_with(proxy_factory, tmp_path, f"""upstream: {app.url}
upstream_groups:
  quick: {{ upstream: {app.url}, timeouts: {{ upstream: 500ms }} }}
routes: [{{ paths: [/q], upstream_group: quick }}]
""")
    assert ask(p, "/q/slow").status == 504
    assert ask(p, "/slow").status == 200  # the default group keeps timeouts.upstream (60 s)


def test_rules_apply_before_the_route(proxy_factory, tmp_path, apps):
    site, admin = apps("site"), apps("admin")
    p = proxy_with(proxy_factory, tmp_path, f"""upstream: {site.url}
upstream_groups:
  admin: {{ upstream: {admin.url} }}
routes: [{{ paths: [/admin], upstream_group: admin }}]
client_access: [{{ name: admin, paths: [/admin], allow: [127.0.0.2] }}]
""")
    assert ask(p, "/admin").status == 403
    assert server(p, "/admin", source="127.0.0.2") == "admin"
    assert admin.hits == 1
