"""`client_access:` through the real binary: two clients told apart by their source addresses on
loopback (127.0.0.1 and 127.0.0.2), the client behind a trusted proxy by X-Forwarded-For;
403 in the client's form, the rule in the log and the metric, every spelling of a path, HTTP/2
streams, a reload that changes the rules, and `check` naming a mistake."""

import subprocess

from test_client_limits import A, B, limited, log_lines, status, statuses
from test_observability import samples, scrape, value
from test_reload import reload

ADMIN = "client_access: [{ name: admin, paths: [/echo/admin], allow: [127.0.0.2] }]\n"


def test_only_the_allowed_address_reaches_the_paths_and_the_refusal_is_counted_and_logged(proxy_factory, upstream, tmp_path):
    p = limited(proxy_factory, upstream, tmp_path, ADMIN)
    assert status(p, "/echo/admin", source=B)[0] == 200
    code, _, body = status(p, "/echo/admin", source=A)
    assert code == 403 and b"client address not allowed here" in body.lower()
    assert b"admin'" not in body, "the rule's name is the operator's, not the client's"
    # Other paths are not the rule's business.
    assert status(p, "/echo", source=A)[0] == 200
    assert status(p, "/echo/administrator", source=A)[0] == 200
    lines = log_lines(p, "request refused by client_access")
    assert lines and lines[0]["rule"] == "admin" and lines[0]["client"] == A
    assert lines[0]["setting"] == "client_access (admin)"
    assert value(samples(scrape(p)), "callback_proxy_client_access_refusals_total", rule="admin") == 1


def test_every_spelling_servers_give_the_path_is_covered(proxy_factory, upstream, tmp_path):
    p = limited(proxy_factory, upstream, tmp_path, ADMIN)
    for target in ["/ECHO/ADMIN", "/echo/Admin/users", "/echo/admin.json", "/echo/admin%09", "/echo/admin/", "//echo/admin",
                   "/echo/x/../admin"]:
        assert status(p, target, source=A)[0] in (400, 403), target
        assert status(p, target, source=A)[0] != 200, target


def test_deny_wins_over_allow_and_a_denied_address_spends_no_rate_token(proxy_factory, upstream, tmp_path):
    p = limited(proxy_factory, upstream, tmp_path,
                "client_access: [{ name: lan, allow: [127.0.0.0/8], deny: [127.0.0.2] }]\n"
                "rate_limits: [{ name: site, rate: 2/m }]\n")
    assert statuses(p, 3, source=B) == [403, 403, 403]
    assert statuses(p, 3, source=A) == [200, 200, 429]


def test_behind_a_trusted_proxy_the_forwarded_client_decides(proxy_factory, upstream, tmp_path):
    p = limited(proxy_factory, upstream, tmp_path,
                "trusted_proxies: [127.0.0.1/32]\n"
                "client_access: [{ name: office, paths: [/echo/admin], allow: [198.51.100.0/24] }]\n")
    assert status(p, "/echo/admin", headers=[("X-Forwarded-For", "198.51.100.7")])[0] == 200
    assert status(p, "/echo/admin", headers=[("X-Forwarded-For", "203.0.113.9")])[0] == 403
    # A client cannot put an allowed address in front of its own.
    assert status(p, "/echo/admin", headers=[("X-Forwarded-For", "198.51.100.7, 203.0.113.9")])[0] == 403
    # Without X-Forwarded-For the peer itself (the proxy) is the client: not in the office.
    assert status(p, "/echo/admin")[0] == 403


def test_http2_streams_are_checked_like_requests(proxy_factory, upstream, tmp_path):
    p = limited(proxy_factory, upstream, tmp_path, "http2: { cleartext: true }\n" + ADMIN)
    urls = [f"http://127.0.0.1:{p.port}/echo/admin?{i}" for i in range(2)] + [f"http://127.0.0.1:{p.port}/echo"]
    out = subprocess.run(["nghttp", "-n", "--stat", *urls], capture_output=True, text=True, timeout=20)
    codes = sorted(line.split()[4] for line in out.stdout.splitlines() if line.split() and line.split()[-1].startswith("/echo"))
    assert codes == ["200", "403", "403"], out


def test_a_reload_changes_the_rules(proxy_factory, upstream, tmp_path):
    p = limited(proxy_factory, upstream, tmp_path, ADMIN)
    assert status(p, "/echo/admin", source=A)[0] == 403
    (tmp_path / "limits.yaml").write_text("client_access: [{ name: admin, paths: [/echo/admin], allow: [127.0.0.1] }]\n")
    reload(p, "configuration reloaded")
    assert status(p, "/echo/admin", source=A)[0] == 200
    assert status(p, "/echo/admin", source=B)[0] == 403


def test_check_names_a_rule_that_refuses_nobody_and_an_address_that_is_none(tmp_path, proxy_bin):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("upstream: http://127.0.0.1:9\n"
                   "client_access: [{ name: a, paths: [/a] }, { name: b, allow: [intranet] }]\n")
    out = subprocess.run([proxy_bin, "check", "--config", str(cfg)], capture_output=True, text=True, timeout=20)
    assert out.returncode != 0
    text = out.stdout + out.stderr
    assert "client_access[0] (line 2): needs allow, deny or both" in text, text
    assert "client_access[1].allow (line 2): 'intranet' is not an address, a CIDR range or all" in text, text


def test_the_internal_listener_is_not_the_sites_business(proxy_factory, upstream, tmp_path):
    p = limited(proxy_factory, upstream, tmp_path, "client_access: [{ name: closed, deny: [all] }]\n")
    assert status(p, "/echo")[0] == 403
    # Probes and scrapes come to the private listener: the site's rules do not apply there.
    assert value(samples(scrape(p)), "callback_proxy_client_access_refusals_total", rule="closed") == 1
