"""Sessions that follow the IdP (`oauth.session.refresh_interval`): the proxy keeps the sign-in's
refresh token in the server-side record and, once the interval has passed, refreshes it inline at the
next request — new claims (groups), the access rules applied again, `invalid_grant` ending the
session, an unreachable IdP keeping it until `lifetime`. Against the real binary and the strict
test IdP, which rotates refresh tokens and can change, disable or revoke a user (its test hooks).

The proxy's clock cannot be moved from here, so the interval is short (2 s) and the tests wait it out.
"""
import json
import subprocess
import threading
import time
import urllib.parse

import pytest

from test_observability import samples, scrape, value
from test_session import (IOS, SECRET, WEB, WEB_REDIRECT, WEB_SECRET, get, idp, idp_login, session_of, set_cookies,  # noqa: F401
                          state_cookies, web_idp)

INTERVAL = 2
JSON = {"Accept": "application/json"}


def config(idp, *, kind="google", store="memory", server_side=True, interval=f"{INTERVAL}s", lifetime="1h",
           access="allowed_email_domains: [example.test]", extra="", endpoints_extra="", web_redirect=False):
    side = "" if server_side is None else f", server_side: {str(server_side).lower()}"
    refresh = f", refresh_interval: {interval}" if interval else ""
    web = f', web_redirect_uri: "{WEB_REDIRECT}"' if web_redirect else ""
    if kind == "google":
        endpoints = (f"authorization: {idp.base_url}/authorize, token: {idp.base_url}/token, "
                     f"jwks: {idp.base_url}/jwks, issuer: {idp.base_url}")
    else:
        endpoints = f"authorization: {idp.base_url}/authorize, issuer: {idp.base_url}"
    return f"""
store: {store}
oauth:
  ca_file: {idp.ca_cert}
  session: {{ secret_env: SESSION_SECRET, secure: false, lifetime: {lifetime}, protect: [/private], {access}{side}{refresh}{web}{extra} }}
providers:
  idp:
    kind: {kind}
    handoff: session
    app_client: {{ id: {WEB}, secret_env: WEB_SECRET }}
    endpoints: {{ {endpoints}{endpoints_extra} }}
    native: {{ ios: {{ client_id: {IOS}, redirect_uri: "com.googleusercontent.apps.123-ios:/oauth2redirect" }} }}
"""


@pytest.fixture
def refreshing(proxy_factory, upstream, tmp_path, idp, monkeypatch):
    """Starts a session-mode proxy against the module's IdP; keyword arguments as `config`."""
    monkeypatch.setenv("SESSION_SECRET", SECRET)
    monkeypatch.setenv("WEB_SECRET", "test-web-secret-not-a-real-one")
    idp.reset()

    def start(**kw):
        path = tmp_path / f"refresh{len(list(tmp_path.glob('refresh*.yaml')))}.yaml"
        path.write_text(config(idp, **kw))
        return proxy_factory(upstream, extra=["--config", str(path)])
    return start


def native_sign_in(p, idp, username, login=None, offline=True):
    """/_oauth/start → the wrapper's native sign-in with what the start URL asked for (scope,
    access_type, prompt — `offline=False`: a wrapper that drops them) → /_oauth_callback.
    Returns (the callback's response, the session cookies, the start URL's query)."""
    start = get(p, "/_oauth/start?rd=/private/page")
    assert start.status == 302, start
    q = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(start.one("location")).query))
    jar = set_cookies(start)
    extra = {k: q[k] for k in ("access_type", "prompt") if k in q} if offline else {}
    scope = q["scope"] if offline else "openid email profile"
    grant = idp.get_code(IOS, state=q["state"], nonce=q["nonce"], username=username, login=login, scope=scope,
                         extra=extra)
    callback = "/_oauth_callback?" + urllib.parse.urlencode({
        "provider": "idp", "platform": "ios", "client_id": IOS, "redirect_uri": grant.redirect_uri,
        "code": grant.code, "state": grant.state, "code_verifier": grant.code_verifier})
    r = get(p, callback, cookies=jar)
    assert r.status == 302, r
    return r, session_of(r), q


def after_interval(seconds=INTERVAL + 0.3):
    time.sleep(seconds)


def refreshes(p, outcome):
    return value(samples(scrape(p)), "callback_proxy_session_refreshes_total", provider="idp", outcome=outcome)


def assert_no_refresh_token_leaked(p, idp, responses=()):
    """No refresh token the IdP ever issued appears in the proxy's logs or in any Set-Cookie."""
    issued = idp.issued_secrets().get("refresh_token", [])
    assert issued, "the IdP issued refresh tokens"
    logs = p.stderr_text() + p.stdout_text()
    cookies = [v for r in responses for k, v in r.headers if k.lower() == "set-cookie"]
    for token in issued:
        assert token not in logs
        assert not any(token in c for c in cookies)


def test_google_sign_in_asks_for_offline_access_and_the_session_is_renewed(refreshing, idp, upstream):
    p = refreshing(extra=", path_rules: [{ prefix: /private/admin, allowed_groups: [admins] }]")
    r, session, q = native_sign_in(p, idp, "gail@example.test", login={"groups": "staff"})
    assert (q["access_type"], q["prompt"], q["scope"]) == ("offline", "consent", "openid email profile")
    assert get(p, "/private/admin", cookies=session, headers=JSON).status == 403
    assert get(p, "/private/x", cookies=session, headers=JSON).status == 404, "signed in: the upstream's answer"

    # The IdP adds a group: at the first request after the interval the rule lets the user in.
    idp.change_user("gail@example.test", groups=["staff", "admins"])
    after_interval()
    seen = []
    assert (seen.append(get(p, "/private/admin", cookies=session, headers=JSON)) or seen[-1]).status == 404
    echoed = get(p, "/echo", cookies=session).json()["headers"]
    assert [v for k, v in echoed if k.lower() == "x-forwarded-groups"] == ["staff,admins"]
    events = idp.refresh_events()
    assert [(e["client_id"], e["outcome"]) for e in events] == [(IOS, "success")], "the native client refreshes, once"
    assert refreshes(p, "renewed") == 1
    # Not due again yet: no second refresh.
    assert get(p, "/private/admin", cookies=session, headers=JSON).status == 404
    assert len(idp.refresh_events()) == 1

    # The group goes away again: refused on that path, still signed in elsewhere.
    idp.change_user("gail@example.test", groups=["staff"])
    after_interval()
    seen.append(get(p, "/private/admin", cookies=session, headers=JSON))
    assert seen[-1].status == 403
    assert get(p, "/private/x", cookies=session, headers=JSON).status == 404
    assert [e["outcome"] for e in idp.refresh_events()] == ["success", "success"], "the rotated token was used"
    assert refreshes(p, "renewed") == 2
    assert_no_refresh_token_leaked(p, idp, [r] + seen)


def test_losing_the_group_the_global_rule_asks_for_ends_the_session(refreshing, idp):
    p = refreshing(access="allowed_groups: [staff]")
    _, session, _ = native_sign_in(p, idp, "olaf@example.test", login={"groups": "staff"})
    assert get(p, "/private/x", cookies=session, headers=JSON).status == 404
    idp.change_user("olaf@example.test", groups=["alumni"])
    after_interval()
    assert get(p, "/private/x", cookies=session, headers=JSON).status == 403, "refused at that very request"
    assert refreshes(p, "refused") == 1
    assert value(samples(scrape(p)), "callback_proxy_session_refusals_total", provider="idp", rule="group") == 1
    # The session is gone: signed out, not refused again.
    assert get(p, "/private/x", cookies=session, headers=JSON).status == 401
    assert len(idp.refresh_events()) == 1


@pytest.mark.parametrize("how", ["revoke", "disable"])
def test_invalid_grant_ends_the_session(refreshing, idp, how):
    p = refreshing()
    user = f"{how}d@example.test"
    _, session, _ = native_sign_in(p, idp, user)
    assert get(p, "/private/x", cookies=session, headers=JSON).status == 404
    if how == "revoke":
        assert idp.revoke(user) == 1
    else:
        idp.change_user(user, disabled=True)
    assert get(p, "/private/x", cookies=session, headers=JSON).status == 404, "not due yet: the IdP is not asked"
    assert idp.refresh_events() == []
    after_interval()
    assert get(p, "/private/x", cookies=session, headers=JSON).status == 401
    page = get(p, "/private/x", cookies=session)
    assert page.status == 302 and page.one("location").startswith("/_oauth/start?"), "a browser is sent to sign in"
    assert [e["error"] for e in idp.refresh_events()] == ["invalid_grant"], "asked once; the record is gone after"
    assert refreshes(p, "ended") == 1
    assert refreshes(p, "renewed") == 0
    assert any("session ended by the provider" in l for l in p.stderr_text().splitlines())


def test_concurrent_requests_of_one_session_refresh_once(refreshing, idp):
    p = refreshing()
    _, session, _ = native_sign_in(p, idp, "conny@example.test")
    idp.set_mode(token="slow:300")   # the refresh is in flight while the others arrive
    after_interval()
    statuses = []
    threads = [threading.Thread(target=lambda: statuses.append(get(p, "/private/x", cookies=session, headers=JSON).status))
               for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert statuses == [404] * 8, "every request served: the one refreshing, and the others as they were"
    events = idp.refresh_events()
    assert [e["outcome"] for e in events] == ["success"], events
    assert refreshes(p, "renewed") == 1


def test_an_unreachable_idp_keeps_the_session_until_its_lifetime(refreshing, idp):
    p = refreshing(lifetime="1m")
    started = time.monotonic()
    _, session, _ = native_sign_in(p, idp, "dora@example.test")
    idp.set_mode(token="500")
    after_interval()
    statuses = []
    while time.monotonic() - started < 55:
        statuses.append(get(p, "/private/x", cookies=session, headers=JSON).status)
        time.sleep(0.5)
    assert set(statuses) == {404}, "served all along"
    tries = [e for e in idp.stats()["events"] if e.get("grant") == "refresh_token"]
    # One try per retry delay (min(interval, 60 s) = 2 s), not one per request.
    assert 10 <= len(tries) <= 30 and len(statuses) > len(tries) * 2 - 4, (len(tries), len(statuses))
    assert refreshes(p, "idp_unavailable") == len(tries)
    warns = [json.loads(l) for l in p.stderr_text().splitlines() if "session refresh failed, session kept" in l]
    assert len(warns) == 1, "rate-limited: one line a minute"
    assert warns[0]["reason"] == "idp_unavailable" and "HTTP 500" in warns[0]["detail"]
    while time.monotonic() - started < 61.5:
        time.sleep(0.5)
    assert get(p, "/private/x", cookies=session, headers=JSON).status == 401, "lifetime still ends it"
    assert refreshes(p, "ended") == 0


def test_without_a_refresh_token_the_session_lasts_one_interval(refreshing, idp):
    p = refreshing()
    s = samples(scrape(p))
    for outcome in ("renewed", "refused", "ended", "failed", "idp_unavailable"):
        key = ("callback_proxy_session_refreshes_total", frozenset({"provider": "idp", "outcome": outcome}.items()))
        assert s.get(key) == 0, f"{outcome} starts at 0, so its first increase is seen by rate()"
    r, session, _ = native_sign_in(p, idp, "nora@example.test", offline=False)
    attributes = [v for k, v in r.headers if k.lower() == "set-cookie" and v.startswith("_oauth_session=")][0]
    assert f"Max-Age={INTERVAL}" in attributes
    lines = [json.loads(l) for l in p.stderr_text().splitlines() if "session without a refresh token" in l]
    assert len(lines) == 1 and lines[0]["setting"] == "oauth.session.refresh_interval" and lines[0]["client"] == "ios"
    assert get(p, "/private/x", cookies=session, headers=JSON).status == 404
    after_interval()
    assert get(p, "/private/x", cookies=session, headers=JSON).status == 401
    assert idp.refresh_events() == []


def test_a_refreshed_id_token_for_another_user_ends_the_session(refreshing, idp):
    p = refreshing()
    _, session, _ = native_sign_in(p, idp, "sam@example.test")
    idp.set_mode(id_token="other_subject")
    after_interval()
    assert get(p, "/private/x", cookies=session, headers=JSON).status == 401
    assert refreshes(p, "failed") == 1
    lines = [json.loads(l) for l in p.stderr_text().splitlines() if "session refresh failed, session ended" in l]
    assert lines and "another sub" in lines[0]["detail"]


def test_oidc_asks_for_offline_access_and_reads_userinfo_without_a_new_id_token(refreshing, idp, upstream):
    p = refreshing(kind="oidc", extra=", path_rules: [{ prefix: /private/ops, allowed_groups: [ops] }]")
    _, session, q = native_sign_in(p, idp, "uma@example.test")
    assert q["scope"] == "openid email profile offline_access" and "access_type" not in q and "prompt" not in q
    assert get(p, "/private/ops", cookies=session, headers=JSON).status == 403
    idp.change_user("uma@example.test", groups=["ops"])
    idp.set_mode(id_token="omit")
    idp.reset_stats()
    after_interval()
    assert get(p, "/private/ops", cookies=session, headers=JSON).status == 404
    assert idp.stats()["endpoints"]["userinfo"] == 1
    assert refreshes(p, "renewed") == 1


def test_a_web_sign_in_refreshes_with_the_web_client_and_its_secret(proxy_factory, upstream, tmp_path, web_idp, monkeypatch):
    monkeypatch.setenv("SESSION_SECRET", SECRET)
    monkeypatch.setenv("WEB_SECRET", WEB_SECRET)
    web_idp.reset()
    path = tmp_path / "web.yaml"
    path.write_text(config(web_idp, web_redirect=True))
    p = proxy_factory(upstream, extra=["--config", str(path)])
    start = get(p, "/_oauth/start?rd=/private/page")
    jar = set_cookies(start)
    back = idp_login(web_idp, start.one("location"), username="wendy@example.test")
    r = get(p, "/_oauth/web_callback?" + urllib.parse.urlsplit(back).query, cookies=jar)
    assert r.status == 302, r
    session = session_of(r)
    after_interval()
    assert get(p, "/private/x", cookies=session, headers=JSON).status == 404
    events = web_idp.refresh_events()
    assert [(e["client_id"], e["outcome"]) for e in events] == [(WEB, "success")], events
    assert_no_refresh_token_leaked(p, web_idp, [r])


@pytest.mark.parametrize("settings, store, message", [
    ({"server_side": None}, "memory", "needs server-side sessions"),
    ({"server_side": False}, "memory", "needs server-side sessions"),
    ({"interval": "1h", "lifetime": "1h"}, "memory", "must be shorter than oauth.session.lifetime"),
    ({"interval": "0s"}, "memory", "a duration from 1s to 30 days"),
])
def test_check_refuses_a_refresh_interval_it_cannot_honour(proxy_bin, tmp_path, idp, monkeypatch, settings, store, message):
    monkeypatch.setenv("SESSION_SECRET", SECRET)
    monkeypatch.setenv("WEB_SECRET", "test-web-secret-not-a-real-one")
    path = tmp_path / "check.yaml"
    path.write_text(config(idp, store=store, **settings))
    out = subprocess.run([proxy_bin, "check", "--upstream", "http://127.0.0.1:3000", "--config", str(path)], capture_output=True, text=True, timeout=30)
    assert out.returncode == 1, out
    lines = [l for l in (out.stdout + out.stderr).splitlines() if "oauth.session.refresh_interval" in l]
    assert lines and message in lines[0], out.stdout + out.stderr


def test_check_accepts_refresh_with_server_side_sessions(proxy_bin, tmp_path, idp, monkeypatch):
    monkeypatch.setenv("SESSION_SECRET", SECRET)
    monkeypatch.setenv("WEB_SECRET", "test-web-secret-not-a-real-one")
    path = tmp_path / "check.yaml"
    path.write_text(config(idp))
    out = subprocess.run([proxy_bin, "check", "--upstream", "http://127.0.0.1:3000", "--config", str(path)], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stdout + out.stderr


def test_check_online_has_no_note_for_an_oidc_idp_that_lists_offline_access(proxy_bin, tmp_path, idp, monkeypatch):
    """The test IdP's discovery lists offline_access in scopes_supported: `check --online` passes
    without the note it gives for an IdP whose list leaves it out (ProviderProbeTests)."""
    monkeypatch.setenv("SESSION_SECRET", SECRET)
    monkeypatch.setenv("WEB_SECRET", "test-web-secret-not-a-real-one")
    path = tmp_path / "check.yaml"
    path.write_text(config(idp, kind="oidc"))
    out = subprocess.run([proxy_bin, "check", "--online", "--upstream", "http://127.0.0.1:3000", "--config", str(path)],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "online: every provider's documents fetched and usable" in out.stdout, out.stdout
    assert "offline_access" not in out.stdout, out.stdout


def test_a_revoked_session_due_for_refresh_ends_without_a_call_to_its_idp(refreshing, idp):
    from helpers import HTTPConn
    p = refreshing(extra=", revocation: true")
    _, session, _ = native_sign_in(p, idp, "rhea@example.test")
    with HTTPConn(p.internal_port) as c:
        c.request("POST", "/sessions/revoke", headers=[("Content-Type", "application/x-www-form-urlencoded")],
                  body=b"email=rhea@example.test")
        assert c.read_response().status == 200
    after_interval()
    assert get(p, "/private/x", cookies=session, headers=JSON).status == 401
    assert not [e for e in idp.stats()["events"] if e.get("grant") == "refresh_token"], "no refresh for a revoked session"
    assert refreshes(p, "renewed") == 0
