"""Session mode as a gate: who may enter (oauth.session's allowed_* rules and path_rules),
against the strict test IdP with users whose claims differ — verified or not, two domains, a
groups claim, Google's `hd`. A refused account gets a 403 and never a session cookie; a rule
narrowed later (a reload, the emails file) ends the sessions that no longer qualify at their
next request."""
import base64
import html
import json
import re
import signal
import subprocess
import time

import pytest

from helpers import HTTPConn
from test_observability import samples, scrape, value
from test_session import (SECRET, WEB_REDIRECT, get, idp, session_config, session_of, set_cookies, sign_in,  # noqa: F401
                          web_idp, web_proxy_factory, web_sign_in)

JSON = {"Accept": "application/json"}


@pytest.fixture
def gate(proxy_factory, upstream, tmp_path, idp):
    """A session-mode proxy with `access` (the allowed_* keys) and `rules` (protect, path_rules…)."""
    def start(access, rules="protect: [/private]"):
        config = tmp_path / "gate.yaml"
        config.write_text(session_config(idp, access=access, rules=rules))
        p = proxy_factory(upstream, extra=["--config", str(config)])
        p.config = config
        return p
    return start


def session(r):
    return {k: v for k, v in set_cookies(r).items() if k.startswith("_oauth_session") and v}


def refusal_lines(p):
    return [json.loads(l) for l in p.stderr_text().splitlines() if "access refused by a session rule" in l]


def wait_for(predicate, timeout=5.0, what="condition"):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


@pytest.mark.parametrize("access, username, login, allowed, rule", [
    ("allowed_email_domains: [example.test]", "alice@example.test", None, True, None),
    ("allowed_email_domains: [example.test]", "bob@other.test", None, False, "email"),
    ("allowed_email_domains: [example.test]", "eve@evil-example.test", None, False, "email"),
    ("allowed_email_domains: [example.test]", "eve@example.test.evil.test", None, False, "email"),
    ("allowed_email_domains: [.example.test]", "alice@example.test", None, False, "email"),
    ("allowed_email_domains: [.example.test]", "ann@eu.example.test", None, True, None),
    ("allowed_email_domains: [example.test]", "alice@example.test", {"email_verified": "false"}, False, "unverified_email"),
    ("allowed_emails: [Alice@Example.TEST]", "alice@example.test", None, True, None),
    ("allowed_emails: [alice@example.test]", "carol@example.test", None, False, "email"),
    ("allowed_groups: [staff]", "gus@other.test", {"groups": "staff,ops"}, True, None),
    ("allowed_groups: [staff]", "gus@other.test", {"groups": "Staff"}, False, "group"),
    ("allowed_groups: [staff]", "gus@other.test", None, False, "group"),
    ("groups_claim: realm_access.roles, allowed_groups: [ops]", "kim@other.test", {"groups": "ops"}, True, None),
    ("allowed_hosted_domains: [corp.test]", "wil@corp.test", {"hd": "corp.test"}, True, None),
    ("allowed_hosted_domains: [corp.test]", "wil@corp.test", None, False, "hosted_domain"),
    ("allowed_hosted_domains: [corp.test]", "wil@corp.test", {"hd": "other.test"}, False, "hosted_domain"),
    # Only ASCII letters fold: the Kelvin sign (U+212A) lower-cases to "k" in Unicode.
    ("allowed_emails: [kim@partner.test]", "\u212aim@partner.test", None, False, "email"),
    ("allowed_email_domains: [kettle.test]", "tom@\u212aettle.test", None, False, "email"),
    ("allowed_hosted_domains: [kettle.test]", "wil@kettle.test", {"hd": "\u212aettle.test"}, False, "hosted_domain"),
    ("allowed_emails: [kim@partner.test]", "KIM@Partner.TEST", None, True, None),
])
def test_a_native_sign_in_is_let_in_or_refused_before_any_cookie(gate, idp, upstream, access, username, login, allowed,
                                                                  rule):
    p = gate(access)
    r, _, _, _ = sign_in(p, idp, username=username, login=login)
    if allowed:
        assert r.status == 302 and session(r), r
        assert get(p, "/private/x", cookies=session(r), headers=JSON).status == 404, "the upstream's own answer"
        return
    assert r.status == 403, r
    assert session(r) == {}, "a refused account never gets a session cookie"
    assert "not allowed here" in r.body.decode()
    assert not any(q["target"].startswith("/private") for q in upstream.record.requests())
    s = samples(scrape(p))
    assert value(s, "callback_proxy_session_refusals_total", provider="google", rule=rule) == 1
    assert value(s, "callback_proxy_callbacks_total", provider="google", platform="ios", outcome="forbidden") == 1
    line = refusal_lines(p)[0]
    assert line["rule"] == rule and line["during"] == "sign_in" and line["setting"].startswith("oauth.session.")
    domain = username.split("@")[1]
    assert line["email_domain"] == (domain if domain.isascii() else ""), "only an address that reads as one"
    assert username not in p.stderr_text(), "the whole address is never logged at info level"


def test_a_browser_sign_in_through_the_web_callback_is_refused_the_same_way(web_proxy_factory, web_idp):
    p = web_proxy_factory()  # allowed_email_domains: [example.test]
    r, _, _ = web_sign_in(p, web_idp, username="bob@other.test")
    assert r.status == 403 and session_of(r) == {}, r
    ok, _, _ = web_sign_in(p, web_idp)
    assert ok.status == 302 and session_of(ok)


def test_a_path_rule_needs_more_than_the_global_rule_under_every_spelling(gate, idp):
    p = gate("allowed_email_domains: [example.test]",
             rules="protect: [/private], path_rules: [{ prefix: /admin, allowed_groups: [admins] }]")
    alice, _, _, _ = sign_in(p, idp)
    root, _, _, _ = sign_in(p, idp, username="root@example.test", login={"groups": "admins"})
    for path in ("/admin", "/admin/users", "/ADMIN", "/Admin/users", "/%41dmin", "/x/../admin",
                 "/admin%09", "/admin%20", "/%09admin/users", "/admin.json", "/Admin.JSON"):
        assert get(p, path, cookies=session(alice), headers=JSON).status == 403, path
        assert get(p, path, cookies=session(root), headers=JSON).status == 404, path
    # The path rule's path needs a session even though protect does not list it.
    assert get(p, "/admin", headers=JSON).status == 401
    assert get(p, "/administrator", cookies=session(alice), headers=JSON).status == 404
    # A page load gets the 403 page, never a redirect to sign in again.
    page = get(p, "/admin", cookies=session(alice))
    assert page.status == 403 and page.one("location") is None
    assert value(samples(scrape(p)), "callback_proxy_session_refusals_total", provider="google", rule="path_rule") >= 1


def test_a_native_sign_in_refused_for_a_script_gets_json(gate, idp):
    from test_session import IOS
    import urllib.parse
    p = gate("allowed_email_domains: [example.test]")
    start = get(p, "/_oauth/start?rd=%2Fprivate")
    q = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(start.one("location")).query))
    grant = idp.get_code(IOS, state=q["state"], nonce=q["nonce"], username="bob@other.test")
    callback = "/_oauth_callback?" + urllib.parse.urlencode({
        "provider": "google", "platform": "ios", "client_id": IOS, "redirect_uri": grant.redirect_uri,
        "code": grant.code, "state": grant.state, "code_verifier": grant.code_verifier})
    r = get(p, callback, cookies=set_cookies(start), headers=JSON)
    assert r.status == 403 and r.one("content-type") == "application/json", r
    assert r.json() == {"error": "forbidden"} and r.one("cache-control") == "no-store"


def test_a_provider_removed_by_a_reload_ends_its_sessions(gate, idp):
    p = gate("allowed_email_domains: [example.test]")
    alice, _, _, _ = sign_in(p, idp)
    assert get(p, "/private/x", cookies=session(alice), headers=JSON).status == 404
    # google goes (another provider takes its place); the sessions it made go with it.
    head, _ = p.config.read_text().split("providers:\n")
    p.config.write_text(head + """providers:
  corp:
    kind: oidc
    handoff: session
    app_client: { id: corp-web, secret_env: WEB_SECRET }
    endpoints: { issuer: https://corp.invalid, authorization: https://corp.invalid/authorize }
    native: { ios: { client_id: corp-ios, redirect_uri: "com.example.corp:/cb" } }
""")
    p.signal(signal.SIGHUP)
    p.stopped_on_purpose = False
    wait_for(lambda: "configuration reloaded" in p.stderr_text() or "reload refused" in p.stderr_text(), what="reload")
    assert "configuration reloaded" in p.stderr_text(), p.stderr_text()[-2000:]
    assert get(p, "/private/x", cookies=session(alice), headers=JSON).status == 401
    echo = get(p, "/echo", cookies=session(alice)).json()
    assert not [k for k, _ in echo["headers"] if k.lower() == "x-forwarded-email"]


def test_every_x_auth_request_header_a_client_sends_is_stripped(gate, idp):
    p = gate("allowed_email_domains: [example.test]")
    r, _, _, _ = sign_in(p, idp)
    for cookies in (None, session(r)):
        echo = get(p, "/echo", cookies=cookies, headers={"X-Auth-Request-Uid": "0", "x_auth_request_roles": "admin"}).json()
        sent = {k.lower().replace("_", "-"): v for k, v in echo["headers"]}
        assert "x-auth-request-uid" not in sent and "x-auth-request-roles" not in sent, sent


def test_a_reload_that_narrows_the_rules_ends_the_sessions_it_no_longer_allows(gate, idp, upstream):
    p = gate("allowed_email_domains: [example.test]")
    alice, _, _, _ = sign_in(p, idp)
    bob, _, _, _ = sign_in(p, idp, username="bob@example.test")
    assert get(p, "/private/x", cookies=session(alice), headers=JSON).status == 404
    p.config.write_text(p.config.read_text().replace("allowed_email_domains: [example.test]",
                                                     "allowed_emails: [bob@example.test]"))
    p.signal(signal.SIGHUP)
    p.stopped_on_purpose = False
    wait_for(lambda: "configuration reloaded" in p.stderr_text(), what="reload")
    assert get(p, "/private/x", cookies=session(alice), headers=JSON).status == 403
    assert get(p, "/private/x", cookies=session(bob), headers=JSON).status == 404
    # Where no session is needed the refused session is simply not one: no identity upstream.
    echo = get(p, "/echo", cookies=session(alice)).json()
    assert not [k for k, _ in echo["headers"] if k.lower() == "x-forwarded-email"]
    assert get(p, "/_oauth/userinfo", cookies=session(alice)).status == 403
    assert get(p, "/_oauth/auth", cookies=session(alice)).status == 403


def test_the_emails_file_is_read_again_when_it_changes(gate, idp, tmp_path):
    emails = tmp_path / "emails.txt"
    emails.write_text("# who may enter\nalice@example.test\n")
    p = gate(f"allowed_emails_file: {emails}")
    carol, _, _, _ = sign_in(p, idp, username="carol@example.test")
    assert carol.status == 403
    alice, _, _, _ = sign_in(p, idp)
    assert alice.status == 302
    # An editor's write-and-rename: a new file under the same name.
    replacement = tmp_path / "emails.new"
    replacement.write_text("carol@example.test  # since today\n")
    replacement.rename(emails)
    time.sleep(1.1)  # looked at again at most once a second
    assert get(p, "/private/x", cookies=session(alice), headers=JSON).status == 403, "alice was removed"
    carol, _, _, _ = sign_in(p, idp, username="carol@example.test")
    assert carol.status == 302 and session(carol)
    assert '"allowed emails file read again"' in p.stderr_text()


def test_auth_and_userinfo_apply_the_rules_and_auth_takes_per_call_restrictions(gate, idp):
    p = gate("allowed_email_domains: [example.test]")
    r, _, _, _ = sign_in(p, idp, login={"groups": "staff"})
    s = session(r)
    assert get(p, "/_oauth/userinfo", cookies=s).status == 200
    assert get(p, "/_oauth/auth", cookies=s).status == 202
    assert get(p, "/_oauth/auth?allowed_groups=ops,staff", cookies=s).status == 202
    assert get(p, "/_oauth/auth?allowed_groups=admins", cookies=s).status == 403
    assert get(p, "/_oauth/auth?allowed_emails=bob@example.test", cookies=s).status == 403
    assert get(p, "/_oauth/auth?allowed_email_domains=example.test&allowed_groups=staff", cookies=s).status == 202
    assert get(p, "/_oauth/auth?allowed_groups=admins").status == 401, "no session: 401, not 403"


@pytest.mark.parametrize("query", [
    "allowed_groups=admins&", "allowed_groups=admins&flag", "allowed_groups=admins&x=%ZZ",
    "allowed_groups=admins&&y=1", "allowed_groups=admins&note=a%00b",
    "allowed_groups=R&D",                       # a group "R&D" written unescaped
    "allowed_group=admins",                     # a misspelt name
    "allowed_groups=admins&allowed_groups=staff", "allowed_groups=", "allowed_groups=,",
    "allowed_emails=bob", "allowed_email_domains=ex%C3%A4mple.test",
])
def test_a_per_call_restriction_that_cannot_be_read_refuses(gate, idp, query):
    # Alice is in `staff`, not in `admins`: a restriction that cannot be read as written must
    # refuse her, never read as "no restriction".
    p = gate("allowed_email_domains: [example.test]")
    r, _, _, _ = sign_in(p, idp, login={"groups": "staff"})
    s = session(r)
    assert get(p, "/_oauth/auth?allowed_groups=staff", cookies=s).status == 202
    refused = get(p, "/_oauth/auth?" + query, cookies=s)
    assert refused.status == 403 and refused.one("x-auth-request-email") is None, query
    assert get(p, "/_oauth/auth?" + query).status == 403, "refused before any session lookup"
    line = next(json.loads(l) for l in p.stderr_text().splitlines() if "forward-auth restriction cannot be read" in l)
    assert "/_oauth/auth URL" in line["setting"] and line["reason"]
    assert "admins" not in line["reason"], "names, never values, are logged"


def test_a_deny_rule_wins_over_the_allow_rules_at_sign_in_and_on_a_path(gate, idp):
    p = gate("allowed_email_domains: [example.test], denied_emails: [bob@example.test], denied_groups: [suspended]",
             rules="protect: [/private], path_rules: [{ prefix: /admin, denied_groups: [interns] }]")
    bob, _, _, _ = sign_in(p, idp, username="bob@example.test")
    assert bob.status == 403 and session(bob) == {}
    sus, _, _, _ = sign_in(p, idp, username="sus@example.test", login={"groups": "staff,suspended"})
    assert sus.status == 403
    intern, _, _, _ = sign_in(p, idp, username="ivy@example.test", login={"groups": "interns"})
    assert intern.status == 302
    assert get(p, "/private/x", cookies=session(intern), headers=JSON).status == 404
    for path in ("/admin", "/ADMIN.json", "/admin%09"):
        assert get(p, path, cookies=session(intern), headers=JSON).status == 403, path
    alice, _, _, _ = sign_in(p, idp)
    assert get(p, "/admin", cookies=session(alice), headers=JSON).status == 404, "a deny-only path rule lets others by"
    s = samples(scrape(p))
    assert value(s, "callback_proxy_session_refusals_total", provider="google", rule="denied") == 2
    line = next(l for l in refusal_lines(p) if l["rule"] == "denied")
    assert line["setting"].startswith("oauth.session.denied_")


def test_claim_rules_hold_through_native_sign_in_bearer_tokens_forward_auth_and_a_reload(gate, idp):
    # The test IdP puts a user's groups in realm_access.roles too (Keycloak's shape) and hd when given.
    p = gate("allowed_email_domains: [example.test], bearer_tokens: [google], "
             "allowed_claims: [{ claim: realm_access.roles, contains: staff }]",
             rules="protect: [/private], path_rules: [{ prefix: /corp, allowed_claims: [{ claim: hd, in: [corp.test] }] }]")
    staff, _, _, _ = sign_in(p, idp, login={"groups": "staff", "hd": "corp.test"})
    assert staff.status == 302
    outsider, _, _, _ = sign_in(p, idp, username="out@example.test", login={"groups": "viewers"})
    assert outsider.status == 403 and session(outsider) == {}
    assert get(p, "/corp/x", cookies=session(staff), headers=JSON).status == 404
    plain, _, _, _ = sign_in(p, idp, username="pat@example.test", login={"groups": "staff"})
    assert get(p, "/corp/x", cookies=session(plain), headers=JSON).status == 403, "no hd: the path's claim rule refuses"
    assert get(p, "/_oauth/auth", cookies=session(plain), headers={"X-Original-URI": "/corp/y"}).status == 403
    assert get(p, "/_oauth/auth", cookies=session(staff), headers={"X-Original-URI": "/corp/y"}).status == 202
    assert get(p, "/private/x", headers=bearer(id_token(idp, groups="staff"))).status == 404
    assert get(p, "/private/x", headers=bearer(id_token(idp, groups="viewers"))).status == 403
    # A reload that narrows the claim rule applies to the session at its next request.
    p.config.write_text(p.config.read_text().replace("contains: staff", "contains: admins"))
    p.signal(signal.SIGHUP)
    p.stopped_on_purpose = False
    wait_for(lambda: "configuration reloaded" in p.stderr_text(), what="reload")
    assert get(p, "/private/x", cookies=session(staff), headers=JSON).status == 403
    assert value(samples(scrape(p)), "callback_proxy_session_refusals_total", provider="google", rule="claim") >= 2


def test_skip_routes_name_methods_and_a_cors_preflight_passes(gate, idp, upstream):
    p = gate("allowed_email_domains: [example.test]",
             rules='protect: all, skip: ["GET,HEAD /public", /health], skip_preflight: true')
    assert get(p, "/public/x", headers=JSON).status == 404, "GET skipped: the upstream's own answer"
    assert get(p, "/health", headers=JSON).status == 404
    with HTTPConn(p.port) as c:
        c.request("POST", "/public/x", body=b"a=1", headers=[("Accept", "application/json")])
        assert c.read_response().status == 401, "POST is not skipped"
    preflight = [("Origin", "https://spa.example.test"), ("Access-Control-Request-Method", "POST")]
    with HTTPConn(p.port) as c:
        c.request("OPTIONS", "/private/api", headers=preflight)
        assert c.read_response().status == 404, "a preflight goes to the app without a session"
    with HTTPConn(p.port) as c:
        c.request("OPTIONS", "/private/api", headers=[("Accept", "application/json")])
        assert c.read_response().status == 401, "a plain OPTIONS is no preflight"


def test_forward_auth_judges_the_original_request_by_its_path_rules(gate, idp):
    p = gate("allowed_email_domains: [example.test]",
             rules="protect: [/private], path_rules: [{ prefix: /admin, allowed_groups: [admins] }]")
    alice, _, _, _ = sign_in(p, idp)
    s = session(alice)
    assert get(p, "/_oauth/auth", cookies=s).status == 202, "no original URI: the global rule only"
    for header in ("X-Original-URI", "X-Forwarded-Uri"):
        for uri in ("/admin", "/admin/users?x=1", "/ADMIN", "/x/../admin", "/admin.json", "/%2Fadmin", "/admin%09"):
            assert get(p, "/_oauth/auth", cookies=s, headers={header: uri}).status == 403, (header, uri)
        assert get(p, "/_oauth/auth", cookies=s, headers={header: "/private/x"}).status == 202
    for bad in ("/a%ZZ", "/x/%00", "admin", "https://evil.test/admin"):
        assert get(p, "/_oauth/auth", cookies=s, headers={"X-Original-URI": bad}).status == 403, bad
    root, _, _, _ = sign_in(p, idp, username="root@example.test", login={"groups": "admins"})
    assert get(p, "/_oauth/auth", cookies=session(root), headers={"X-Original-URI": "/admin/x"}).status == 202


def test_forward_auth_accepts_a_native_apps_bearer_token(gate, idp):
    p = gate("allowed_email_domains: [example.test], bearer_tokens: [google]")
    r = get(p, "/_oauth/auth", headers={"Authorization": "Bearer " + id_token(idp)})
    assert r.status == 202 and r.one("x-auth-request-email") == "alice@example.test"
    r = get(p, "/_oauth/auth?allowed_groups=admins", headers={"Authorization": "Bearer " + id_token(idp)})
    assert r.status == 403, "per-call restrictions hold for tokens too"
    expired = id_token(idp)
    head, claims, sig = expired.split(".")
    assert get(p, "/_oauth/auth", headers={"Authorization": "Bearer " + ".".join([head, claims, sig[:-4] + "AAAA"])}).status == 401
    # A JWT of the app's own beside a session cookie: the cookie decides.
    alice, _, _, _ = sign_in(p, idp)
    foreign = id_token(idp, client=ANDROID)
    assert get(p, "/_oauth/auth", cookies=session(alice), headers={"Authorization": "Bearer " + foreign}).status == 202
    assert get(p, "/_oauth/auth", headers={"Authorization": "Bearer " + foreign}).status == 401


def test_check_warns_about_a_rule_that_can_never_match(proxy_bin, tmp_path, idp):
    config = tmp_path / "lint.yaml"
    config.write_text(session_config(idp, access="allowed_groups: [staff, ops], denied_groups: [ops]",
                                     rules="protect: [/private], skip: [/public], "
                                           "path_rules: [{ prefix: /public/admin, allowed_groups: [admins] }]"))
    r = subprocess.run([proxy_bin, "check", "--config", str(config), "--upstream", "http://127.0.0.1:3000"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stdout + r.stderr
    warnings = [l for l in r.stdout.splitlines() if l.startswith("warning: ")]
    assert any("oauth.session.allowed_groups: 'ops' is denied too" in w for w in warnings), r.stdout
    assert any("oauth.session.path_rules[0]: '/public/admin' lies under skip '/public'" in w for w in warnings), r.stdout


def test_check_refuses_session_mode_without_a_rule(proxy_bin, tmp_path, idp):
    config = tmp_path / "open.yaml"
    text = session_config(idp, access="allow_any_authenticated_user: false")
    config.write_text(text)
    out = subprocess.run([proxy_bin, "check", "--config", str(config), "--upstream", "http://127.0.0.1:3000"],
                         capture_output=True, text=True, timeout=10)
    assert out.returncode == 1, out
    assert "oauth.session: session mode needs a rule for who may enter" in out.stdout + out.stderr
    config.write_text(session_config(idp, access="allow_any_authenticated_user: true"))
    out = subprocess.run([proxy_bin, "check", "--config", str(config), "--upstream", "http://127.0.0.1:3000"],
                         capture_output=True, text=True, timeout=10)
    assert out.returncode == 0, out


def test_header_names_and_the_user_claim_are_the_operators_and_spoofs_of_them_are_stripped(gate, idp, upstream):
    """Gitea's reverse-proxy login reads a user name from X-WEBAUTH-USER."""
    p = gate("allowed_email_domains: [example.test], headers: { user: X-WEBAUTH-USER, user_claim: email, "
             "email: X-WEBAUTH-EMAIL }")
    r, _, _, _ = sign_in(p, idp)
    spoofs = {"X-WEBAUTH-USER": "admin", "x_webauth_user": "admin2", "X-Webauth_Email": "root@example.test",
              "X-Forwarded-User": "admin3"}
    for cookies in (None, session(r)):
        echo = get(p, "/echo", cookies=cookies, headers=spoofs).json()
        sent = [(k.lower().replace("_", "-"), v) for k, v in echo["headers"]]
        assert not [v for _, v in sent if v.startswith("admin") or v == "root@example.test"], sent
        if cookies:
            assert ("x-webauth-user", "alice@example.test") in sent and ("x-webauth-email", "alice@example.test") in sent
            assert not [k for k, _ in sent if k == "x-forwarded-user"], "the default name is not sent any more"


def test_the_user_header_may_carry_any_claim(gate, idp):
    p = gate("allowed_email_domains: [example.test], headers: { user_claim: hd }")
    r, _, _, _ = sign_in(p, idp, login={"hd": "corp.test"})
    sent = {k.lower(): v for k, v in get(p, "/echo", cookies=session(r)).json()["headers"]}
    assert sent["x-forwarded-user"] == "corp.test"
    r, _, _, _ = sign_in(p, idp, username="pat@example.test")
    sent = {k.lower(): v for k, v in get(p, "/echo", cookies=session(r)).json()["headers"]}
    assert "x-forwarded-user" not in sent and sent["x-forwarded-email"] == "pat@example.test", "no such claim: no user header"


def test_with_two_providers_start_offers_a_choice_in_configuration_order(proxy_factory, upstream, tmp_path, idp):
    """An unchanged site links to /_oauth/start without naming a provider; with two, the first by
    name used to be taken and the second could not be offered."""
    second = f"""
  corp:
    kind: oidc
    display_name: "Corp <SSO>"
    handoff: session
    app_client: {{ id: corp-web, secret_env: WEB_SECRET }}
    endpoints: {{ issuer: {idp.base_url}, authorization: {idp.base_url}/authorize?tenant=corp }}
    native: {{ ios: {{ client_id: corp-ios, redirect_uri: "com.example.corp:/cb" }} }}
"""
    config = tmp_path / "two.yaml"
    text = session_config(idp)
    # corp first in the file: the chooser follows the file, not the alphabet
    head, providers = text.split("providers:\n", 1)
    config.write_text(head + "providers:\n" + second.lstrip("\n") + providers)
    p = proxy_factory(upstream, extra=["--config", str(config)])
    r = get(p, "/_oauth/start?rd=%2Fprivate%2Fpage")
    assert r.status == 200, r
    page = r.body.decode()
    assert "Sign in with Corp &lt;SSO&gt;" in page and "<SSO>" not in page
    links = re.findall(r'href="([^"]+)"', page)
    assert links == ["/_oauth/start?provider=corp&amp;rd=%2Fprivate%2Fpage",
                     "/_oauth/start?provider=google&amp;rd=%2Fprivate%2Fpage"], links
    assert page.index("Corp") < page.index("Google")
    assert r.one("cache-control") == "no-store" and not set_cookies(r), "the chooser sets no state cookie"
    chosen = get(p, html.unescape(links[0]))
    assert chosen.status == 302 and chosen.one("location").startswith(idp.base_url + "/authorize?tenant=corp&")
    assert "client_id=corp-web" in chosen.one("location")
    # Named, it goes straight on, as before.
    assert get(p, "/_oauth/start?provider=google").status == 302


# ---------------------------------------------------------------------------------------------
# API calls from the native app: Authorization: Bearer <id_token> (oauth.session.bearer_tokens)

ANDROID = "123-android.apps.googleusercontent.com"
IOS_CLIENT = "123-ios.apps.googleusercontent.com"


def id_token(idp, client="123-ios.apps.googleusercontent.com", **login):
    grant = idp.get_code(client, username=login.pop("username", "alice@example.test"), login=login or None)
    r = idp.exchange(grant)
    assert r.status_code == 200, r.text
    return r.json()["id_token"]


def bearer(token):
    return {"Authorization": "Bearer " + token, "Accept": "application/json"}


def expired_id_token(idp):
    """A real token of `idp`, issued three hours ago."""
    idp.set_clock(-3 * 3600)
    try:
        return id_token(idp)
    finally:
        idp.set_clock(0)


def tampered(token):
    """Claims that still name the issuer and client, one of them changed: only the signature tells."""
    head, claims, sig = token.split(".")
    decoded = json.loads(base64.urlsafe_b64decode(claims + "=" * (-len(claims) % 4)))
    decoded["email"] = "eve@example.test"
    return ".".join([head, base64.urlsafe_b64encode(json.dumps(decoded).encode()).rstrip(b"=").decode(), sig])


def test_a_native_apps_api_call_with_a_verified_id_token_passes_protect(gate, idp, upstream):
    p = gate("allowed_email_domains: [example.test], bearer_tokens: [google]")
    token = id_token(idp)
    r = get(p, "/private/api", headers=bearer(token))
    assert r.status == 404, r  # the upstream's own answer: protect let it through
    echo = get(p, "/echo", headers=bearer(token)).json()
    sent = {k.lower(): v for k, v in echo["headers"]}
    assert sent["x-forwarded-email"] == "alice@example.test" and sent["x-forwarded-user"]
    s = samples(scrape(p))
    assert value(s, "callback_proxy_bearer_tokens_total", provider="google", result="accepted") == 2


@pytest.mark.parametrize("case", ["another client", "expired", "another issuer", "tampered", "not a JWT"])
def test_a_bearer_token_that_does_not_verify_gets_401_and_never_a_redirect(gate, idp, web_idp, upstream, case):
    p = gate("allowed_email_domains: [example.test], bearer_tokens: [google]")
    if case == "another client":
        token = id_token(idp, client=ANDROID)  # a real token of this IdP, for a client not configured
    elif case == "expired":
        token = expired_id_token(idp)
    elif case == "another issuer":
        token = id_token(web_idp)  # same client id, another IdP's keys and iss
    elif case == "tampered":
        token = tampered(id_token(idp))
    else:
        token = "abc.def"
    for path in ("/private/api", "/echo"):
        r = get(p, path, headers=bearer(token))
        if case in ("not a JWT", "another client", "another issuer") and path == "/echo":
            # Not a token of a configured issuer and client (not a JWT at all, or the app's own
            # JWTs): where no session is needed, the app's business — an anonymous request.
            assert r.status == 200, r
            sent = {k.lower(): v for k, v in r.json()["headers"]}
            assert sent["authorization"] == "Bearer " + token and "x-forwarded-user" not in sent
            continue
        assert r.status == 401 and r.one("location") is None, (path, r)
        if case != "not a JWT":
            assert r.json() == {"error": "invalid_token"} and r.one("www-authenticate") == 'Bearer error="invalid_token"'
    assert not any(q["target"] == "/private/api" for q in upstream.record.requests())


def test_a_bearer_identity_is_held_to_the_same_rules(gate, idp):
    p = gate("allowed_email_domains: [example.test], bearer_tokens: [google]",
             rules="protect: [/private], path_rules: [{ prefix: /admin, allowed_groups: [admins] }]")
    assert get(p, "/private/x", headers=bearer(id_token(idp, email_verified="false"))).status == 403
    assert get(p, "/private/x", headers=bearer(id_token(idp, username="bob@other.test"))).status == 403
    alice = id_token(idp)
    assert get(p, "/admin", headers=bearer(alice)).status == 403
    assert get(p, "/admin", headers=bearer(id_token(idp, username="root@example.test", groups="admins"))).status == 404
    assert value(samples(scrape(p)), "callback_proxy_bearer_tokens_total", provider="google", result="forbidden") == 3


# ---------------------------------------------------------------------------------------------
# Sign-out at the provider (RP-Initiated Logout 1.0), against the test IdP's end_session endpoint


@pytest.mark.parametrize("server_side", [False, True])
def test_sign_out_continues_to_the_providers_end_session_endpoint(web_proxy_factory, web_idp, server_side):
    from test_session import SIGNED_OUT, WEB
    import urllib.parse
    extra = (f", sign_out: {{ at_provider: true, post_logout_redirect_uri: \"{SIGNED_OUT}\" }}")
    p = web_proxy_factory(name=f"rp{server_side}", server_side=server_side, extra_session=extra,
                          endpoints_extra=f", end_session: {web_idp.base_url}/end_session")
    r, _, _ = web_sign_in(p, web_idp)
    cookies = session_of(r)
    assert r.status == 302 and cookies
    out = get(p, "/_oauth/sign_out?rd=/bye", cookies=cookies)
    assert out.status == 302
    location = out.one("location")
    assert location.startswith(web_idp.base_url + "/end_session?"), location
    q = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(location).query))
    assert q["client_id"] == WEB and q["post_logout_redirect_uri"] == SIGNED_OUT and q["id_token_hint"]
    assert all(v == "" for k, v in set_cookies(out).items() if k.startswith("_oauth_session")), "the cookie is cleared"
    # The strict IdP accepts it: its hint is a token it issued to that client, the target registered.
    back = web_idp.request("GET", location, allow_redirects=False)
    assert back.status_code == 302 and back.headers["Location"] == SIGNED_OUT, (back.status_code, back.text)
    # Server-side, the session is over for any copy of the cookie too (a sealed cookie session
    # ends only in the browser that drops it: that is what server_side is for).
    if server_side:
        assert get(p, "/private/x", cookies=cookies, headers=JSON).status == 401


def test_sign_out_at_the_provider_after_a_native_sign_in_names_the_native_client(web_proxy_factory, web_idp):
    # The hint is the id_token the native client redeemed: its aud is that client, and the
    # provider refuses a hint whose audience is not client_id (RP-Initiated Logout 1.0 §2).
    from test_session import IOS, SIGNED_OUT
    import urllib.parse
    extra = (f", sign_out: {{ at_provider: true, post_logout_redirect_uri: \"{SIGNED_OUT}\" }}")
    p = web_proxy_factory(name="rpnative", extra_session=extra,
                          endpoints_extra=f", end_session: {web_idp.base_url}/end_session")
    r, _, _, _ = sign_in(p, web_idp)
    assert r.status == 302, r
    out = get(p, "/_oauth/sign_out?rd=/bye", cookies=session_of(r))
    location = out.one("location")
    q = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(location).query))
    assert q["client_id"] == IOS and q["id_token_hint"]
    back = web_idp.request("GET", location, allow_redirects=False)
    assert back.status_code == 302 and back.headers["Location"] == SIGNED_OUT, (back.status_code, back.text)


def test_without_at_provider_sign_out_stays_local(web_proxy_factory, web_idp):
    p = web_proxy_factory(name="local")
    r, _, _ = web_sign_in(p, web_idp)
    out = get(p, "/_oauth/sign_out?rd=/bye", cookies=session_of(r))
    assert out.status == 302 and out.one("location") == "/bye"


# ---------------------------------------------------------------------------------------------
# idle_timeout: a server-side session unused that long ends; used, it slides forward


def test_an_unused_session_ends_after_the_idle_timeout_and_a_used_one_slides(gate, idp):
    p = gate("allowed_email_domains: [example.test], server_side: true, idle_timeout: 3s")
    used, _, _, _ = sign_in(p, idp)
    idle, _, _, _ = sign_in(p, idp, username="bob@example.test")
    used, idle = session(used), session(idle)
    started = time.monotonic()
    # `used` is asked for every second (each look more than a second after the last write slides
    # its expiry, a third of the timeout); `idle` is left alone.
    while time.monotonic() - started < 5:
        assert get(p, "/private/x", cookies=used, headers=JSON).status == 404
        time.sleep(1.05)
    assert get(p, "/private/x", cookies=used, headers=JSON).status == 404, "in use past the idle timeout"
    assert get(p, "/private/x", cookies=idle, headers=JSON).status == 401, "idle past the timeout"


def test_idle_timeout_needs_server_side_sessions(proxy_bin, tmp_path, idp):
    config = tmp_path / "idle.yaml"
    config.write_text(session_config(idp, access="allowed_email_domains: [example.test], idle_timeout: 30m"))
    out = subprocess.run([proxy_bin, "check", "--config", str(config), "--upstream", "http://127.0.0.1:3000"],
                         capture_output=True, text=True, timeout=10)
    assert out.returncode == 1 and "oauth.session.idle_timeout: needs server-side sessions" in out.stdout + out.stderr, out


# ---------------------------------------------------------------------------------------------
# extra_jwt_issuers: another issuer's JWTs as bearer tokens (oauth2-proxy --extra-jwt-issuers).
# The second test IdP (web_idp) plays the partner issuer: its tokens name its own iss and keys.


@pytest.fixture
def partner_gate(proxy_factory, upstream, tmp_path, idp, web_idp):
    """A session-mode proxy that trusts both test IdPs' CAs and `extra` as extra_jwt_issuers."""
    from test_session import IOS
    bundle = tmp_path / "cas.pem"
    bundle.write_text(open(idp.ca_cert).read() + open(web_idp.ca_cert).read())

    def start(access="allowed_email_domains: [example.test]", rules="protect: [/private]", jwks=None, audience=IOS):
        jwks_uri = f", jwks_uri: {jwks}" if jwks else ""
        extra = f"extra_jwt_issuers: [{{ issuer: {web_idp.base_url}, audiences: [\"{audience}\"]{jwks_uri} }}]"
        config = tmp_path / "partner.yaml"
        config.write_text(session_config(idp, access=f"{access}, {extra}", rules=rules)
                          .replace(f"ca_file: {idp.ca_cert}", f"ca_file: {bundle}"))
        return proxy_factory(upstream, extra=["--config", str(config)])
    return start


def test_an_extra_issuers_token_passes_protect_with_its_identity(partner_gate, idp, web_idp, upstream):
    p = partner_gate()
    token = id_token(web_idp)
    assert get(p, "/private/api", headers=bearer(token)).status == 404, "the upstream's own answer"
    sent = {k.lower(): v for k, v in get(p, "/echo", headers=bearer(token)).json()["headers"]}
    assert sent["x-forwarded-email"] == "alice@example.test" and sent["x-forwarded-user"]
    # The providers' own tokens are not accepted through it (bearer_tokens is not set).
    assert get(p, "/private/api", headers=bearer(id_token(idp))).status == 401
    assert value(samples(scrape(p)), "callback_proxy_bearer_tokens_total", provider=web_idp.base_url, result="accepted") == 2


@pytest.mark.parametrize("case", ["expired", "tampered", "another audience"])
def test_an_extra_issuers_token_that_does_not_verify_gets_401(partner_gate, web_idp, upstream, case):
    p = partner_gate(audience="api://orders" if case == "another audience" else IOS_CLIENT)
    if case == "expired":
        token = expired_id_token(web_idp)
    elif case == "tampered":
        token = tampered(id_token(web_idp))
    else:
        token = id_token(web_idp)  # its issuer, an audience not listed: not ours to judge
    r = get(p, "/private/api", headers=bearer(token))
    assert r.status == 401 and r.json() == {"error": "invalid_token"}, r
    assert not any(q["target"] == "/private/api" for q in upstream.record.requests())
    if case == "another audience":
        # Where no session is needed it is the app's business, as any JWT of an issuer not listed.
        echo = get(p, "/echo", headers=bearer(token))
        assert echo.status == 200 and "x-forwarded-user" not in {k.lower() for k, _ in echo.json()["headers"]}


def test_an_extra_issuers_identity_is_held_to_every_rule(partner_gate, web_idp):
    p = partner_gate(access="allowed_email_domains: [example.test], denied_groups: [suspended], "
                            "allowed_claims: [{ claim: realm_access.roles, contains: staff }]",
                     rules="protect: [/private], path_rules: [{ prefix: /admin, allowed_groups: [admins] }]")
    assert get(p, "/private/x", headers=bearer(id_token(web_idp, groups="staff"))).status == 404
    assert get(p, "/private/x", headers=bearer(id_token(web_idp, groups="viewers"))).status == 403, "claim rule"
    assert get(p, "/private/x", headers=bearer(id_token(web_idp, groups="staff,suspended"))).status == 403, "deny wins"
    assert get(p, "/private/x", headers=bearer(id_token(web_idp, username="bob@other.test", groups="staff"))).status == 403
    assert get(p, "/admin", headers=bearer(id_token(web_idp, groups="staff"))).status == 403, "path rule"
    assert get(p, "/admin", headers=bearer(id_token(web_idp, groups="staff,admins"))).status == 404
    # Forward-auth: the same token, the same rules, the original path's rules and per-call ones.
    staff = {"Authorization": "Bearer " + id_token(web_idp, groups="staff")}
    r = get(p, "/_oauth/auth", headers=staff)
    assert r.status == 202 and r.one("x-auth-request-email") == "alice@example.test"
    assert get(p, "/_oauth/auth", headers={**staff, "X-Original-URI": "/admin/x"}).status == 403
    assert get(p, "/_oauth/auth?allowed_groups=ops", headers=staff).status == 403
    assert get(p, "/_oauth/auth", headers={"Authorization": "Bearer " + id_token(web_idp, groups="viewers")}).status == 403
    assert value(samples(scrape(p)), "callback_proxy_session_refusals_total", provider=web_idp.base_url, rule="claim") >= 2


def test_an_extra_issuer_whose_keys_cannot_be_had_refuses_and_warns_naming_the_setting(partner_gate, web_idp, upstream):
    p = partner_gate(jwks="http://127.0.0.1:9/jwks")  # nothing listens on the discard port
    token = id_token(web_idp)
    for _ in range(3):
        r = get(p, "/private/api", headers=bearer(token))
        assert r.status == 401 and r.json() == {"error": "invalid_token"}, r
    assert get(p, "/_oauth/auth", headers={"Authorization": "Bearer " + token}).status == 401
    assert not any(q["target"] == "/private/api" for q in upstream.record.requests())
    lines = [json.loads(l) for l in p.stderr_text().splitlines() if "the issuer's keys cannot be had" in l]
    assert len(lines) == 1, "at most one warning a second"
    assert lines[0]["setting"] == "oauth.session.extra_jwt_issuers[0].jwks_uri" and lines[0]["level"] == "warn"
    assert token not in p.stderr_text()
    assert value(samples(scrape(p)), "callback_proxy_bearer_tokens_total", provider=web_idp.base_url, result="unavailable") == 4


def test_check_warns_about_an_extra_issuer_a_bearer_provider_shadows(proxy_bin, tmp_path, idp):
    config = tmp_path / "shadow.yaml"
    config.write_text(session_config(idp, access="allowed_email_domains: [example.test], bearer_tokens: [google], "
                                                 f"extra_jwt_issuers: [{{ issuer: {idp.base_url}, audiences: [{IOS_CLIENT}] }}]"))
    r = subprocess.run([proxy_bin, "check", "--config", str(config), "--upstream", "http://127.0.0.1:3000"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "warning: oauth.session.extra_jwt_issuers[0]: its issuer is bearer_tokens provider 'google''s" in r.stdout, r.stdout


def test_an_extra_issuers_keys_come_from_its_discovery_document(partner_gate, web_idp):
    p = partner_gate()  # no jwks_uri: <issuer>/.well-known/openid-configuration
    assert get(p, "/private/api", headers=bearer(id_token(web_idp))).status == 404
