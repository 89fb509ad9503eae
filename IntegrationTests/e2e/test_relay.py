"""CallbackProxy's promise, end to end, in `relay` mode: the legacy Rails + Devise + OmniAuth app,
unchanged but for its token URL, ends up with the user signed in after a *native* sign-in.

Each test is what a phone does: open the site through the proxy in the WebView, tap "Sign in with
Google", the wrapper app intercepts, signs in natively and loads /_oauth_callback into the WebView
— and asserts on what the *app* shows (who is signed in, how many sign-ins it counted, its flash).
The app's token URL is the proxy's relay endpoint (through the recording TokenTap, see harness.py).
"""

from __future__ import annotations

import json
from urllib.parse import parse_qs, parse_qsl, urlencode, urlsplit

import pytest
import requests

from harness import ANDROID_CLIENT, APP_CALLBACK, NATIVE, WEB_CLIENT, WEB_SECRET
from site_pages import (alert, body, idp_login, notice, open_home, sign_ins, status, tap_sign_in,
                        wait_home)

FAILURE = "Could not authenticate you from GoogleOauth2 because"
SUCCESS = "Successfully authenticated from Google account."


def native_sign_in(webview, proxy, wrapper, platform, username):
    open_home(webview, proxy.url)
    assert status(webview) == "Not signed in"
    tap_sign_in(webview)
    result = wrapper.sign_in(platform, username=username)
    wait_home(webview)
    return result


def with_field(url, **changed):
    """The library's callback URL with some of its fields replaced (what a forger would send)."""
    parts = urlsplit(url)
    fields = [(k, changed.get(k, v)) for k, v in parse_qsl(parts.query)]
    return parts._replace(query=urlencode(fields)).geturl()


def attackers_authorization_url(proxy) -> str:
    """The app's authorization URL of a sign-in started in the attacker's own browser session."""
    with requests.Session() as s:
        home = s.get(proxy.url + "/", timeout=10)
        token = home.text.split('name="authenticity_token" value="', 1)[1].split('"', 1)[0]
        start = s.post(proxy.url + "/users/auth/google_oauth2",
                       data={"authenticity_token": token}, allow_redirects=False, timeout=10)
        assert start.status_code == 302, start.text[:500]
        return start.headers["Location"]


def relay_records(tap):
    """(form, status, json) of each token request the app made."""
    out = []
    for rec, form in zip(tap.records, tap.forms()):
        try:
            answer = json.loads(rec["response"])
        except ValueError:
            answer = rec["response"]
        out.append((form, rec["status"], answer))
    return out


@pytest.mark.parametrize("platform", ["ios", "android"])
def test_native_sign_in_signs_the_user_into_the_app(webview, relay_proxy, wrapper_factory, idp,
                                                    token_tap, platform, username):
    wrapper = wrapper_factory(relay_proxy)
    result = native_sign_in(webview, relay_proxy, wrapper, platform, username)

    # What the app shows: its own page, the user signed in once, Devise's success flash.
    assert webview.current_url == relay_proxy.url + "/"
    assert status(webview) == f"Signed in as {username}"
    assert sign_ins(webview) == 1
    assert notice(webview) == SUCCESS

    # How it got there: the proxy exchanged the native code once (PKCE, native client); the
    # app redeemed a relay code at the relay endpoint with its web client (client_secret_post and
    # its own PKCE verifier) and got the native tokens; the IdP never saw the web client.
    stats = idp.stats()
    native_id = NATIVE[platform][0]
    assert stats["clients"][native_id]["successes"] == 1
    assert stats["token"]["requests"] == 1
    assert WEB_CLIENT not in stats["clients"]
    [(form, code, answer)] = relay_records(token_tap)
    assert code == 200, answer
    assert form["client_id"] == WEB_CLIENT and form["client_secret"] == WEB_SECRET
    assert form["grant_type"] == "authorization_code"
    assert form["redirect_uri"] == f"{relay_proxy.url}{APP_CALLBACK}"
    assert form["code"] != result.code and "code_verifier" in form
    assert answer["token_type"].lower() == "bearer" and answer["access_token"]
    claims = idp.verify_id_token(answer["id_token"], native_id)
    assert claims["email"] == username

    # The relay code and the tokens stayed between the proxy and the app.
    for value in (form["code"], answer["access_token"], answer["id_token"]):
        assert not [u for u in wrapper.seen_by_webview if value in u]
    assert any("/_oauth_callback?" in u for u in wrapper.seen_by_webview)


def test_native_sign_in_over_https_and_http2(webview, proxy_factory, pki, wrapper_factory, idp, token_tap,
                                            username):
    """The same sign-in with the proxy serving TLS: Chromium speaks HTTP/2 to it (ALPN h2), so the
    app's pages, the callback and the relayed app callback are all HTTP/2 streams."""
    proxy = proxy_factory("relay", tls=(pki.server_cert, pki.server_key))
    wrapper = wrapper_factory(proxy)
    native_sign_in(webview, proxy, wrapper, "ios", username)
    assert webview.current_url == proxy.url + "/"
    assert status(webview) == f"Signed in as {username}"
    assert sign_ins(webview) == 1
    assert webview.execute_script(
        "return performance.getEntriesByType('navigation')[0].nextHopProtocol") == "h2"
    assert idp.stats()["token"]["requests"] == 1
    [(form, code, _)] = relay_records(token_tap)
    assert code == 200 and form["redirect_uri"] == f"{proxy.url}{APP_CALLBACK}"
    metrics = requests.get(proxy.internal_url + "/metrics", timeout=5).text
    streams = [line for line in metrics.splitlines() if line.startswith("callback_proxy_http2_streams_total ")]
    assert streams and float(streams[0].split()[1]) >= 3, streams


@pytest.mark.parametrize("platform", ["ios", "android"])
@pytest.mark.parametrize("action", ["deny", "cancel"])
def test_denied_or_cancelled_sign_in_lands_on_the_apps_failure_page(
        webview, relay_proxy, wrapper_factory, idp, token_tap, action, platform, username):
    """Deny at the IdP's form (its `error=access_denied` passed through by the library), or
    close the system browser on the login page (`.cancelled`, which the library hands back as
    `error=access_denied`): the app's own failure path, nobody signed in, no token request."""
    wrapper = wrapper_factory(relay_proxy)
    open_home(webview, relay_proxy.url)
    tap_sign_in(webview)
    result = wrapper.sign_in(platform, username=username, action=action)
    assert result.error == "access_denied" and result.code is None
    assert (result.browser_result == "cancelled") == (action == "cancel")
    wait_home(webview, "the app's failure page")
    assert status(webview) == "Not signed in"
    assert alert(webview) == f'{FAILURE} "Access denied".'
    stats = idp.stats()
    assert stats["authorize"]["denied"] == (1 if action == "deny" else 0)
    assert stats["token"]["requests"] == 0
    assert token_tap.records == []


def test_the_same_callback_twice_signs_in_once(webview, relay_proxy, wrapper_factory, idp,
                                               username):
    """The WebView loads the same callback again (a reload, a restored WebView). The proxy's
    replay guard refuses the code before any IdP call and, like every failure the app can
    answer, hands it to the app's callback (`error=replayed_code&state=…`, docs/handoff.md):
    the WebView lands on the app's page — OmniAuth finds the state used up (csrf_detected) —
    and the user, signed in by the first load, stays signed in, once."""
    wrapper = wrapper_factory(relay_proxy)
    result = native_sign_in(webview, relay_proxy, wrapper, "ios", username)
    assert status(webview) == f"Signed in as {username}" and sign_ins(webview) == 1

    wrapper.load(result.callback_url)          # the WebView loads the same callback again
    wait_home(webview, "the app's failure page")
    assert webview.current_url == relay_proxy.url + "/"
    assert alert(webview) == f'{FAILURE} "Csrf detected".', body(webview)
    assert status(webview) == f"Signed in as {username}"
    assert sign_ins(webview) == 1, "the replayed callback signed the user in a second time"
    assert idp.stats()["token"]["requests"] == 1, "the code was presented to the IdP twice"
    reasons = [e.get("reason", "verified") for e in relay_proxy.log_events()
               if e.get("msg") in ("callback verified", "callback failed")]
    assert reasons == ["verified", "replayed_code"]


def test_forged_client_id_is_refused_before_any_idp_call(webview, relay_proxy, wrapper_factory,
                                                         idp, token_tap, username):
    wrapper = wrapper_factory(relay_proxy)
    open_home(webview, relay_proxy.url)
    tap_sign_in(webview)
    web_url = wrapper.wait_for_authorization()
    result = wrapper.system_browser_sign_in(web_url, "ios", username=username)
    for forged in (ANDROID_CLIENT, WEB_CLIENT, "evil.apps.googleusercontent.com"):
        wrapper.load(with_field(result.callback_url, client_id=forged))
        assert webview.title == "Sign-in failed", body(webview)   # the proxy's refusal page
    stats = idp.stats()
    assert stats["token"]["requests"] == 0, stats["events"]
    assert token_tap.records == []
    open_home(webview, relay_proxy.url)
    assert status(webview) == "Not signed in"
    # Refused before anything was spent: the genuine callback still signs the user in.
    wrapper.load(result.callback_url)
    wait_home(webview)
    assert status(webview) == f"Signed in as {username}" and sign_ins(webview) == 1


def test_another_sessions_state_is_refused_by_the_app(webview, relay_proxy, wrapper_factory, idp,
                                                      username):
    """Login CSRF: an attacker starts a sign-in in their own browser session, gets a code for
    their own account, and makes the victim's WebView load the callback. The state is not the
    victim's: OmniAuth refuses it (csrf_detected) and the victim is not signed in as the
    attacker."""
    attacker = "mallory-" + username
    attacker_url = attackers_authorization_url(relay_proxy)
    wrapper = wrapper_factory(relay_proxy)
    stolen = wrapper.system_browser_sign_in(attacker_url, "ios", username=attacker)

    open_home(webview, relay_proxy.url)          # the victim started a sign-in of their own
    tap_sign_in(webview)
    victim_url = wrapper.wait_for_authorization()
    assert dict(parse_qsl(urlsplit(victim_url).query))["state"] != stolen.state

    wrapper.load(stolen.callback_url)
    wait_home(webview, "the app's failure page")
    assert status(webview) == "Not signed in"
    assert alert(webview) == f'{FAILURE} "Csrf detected".'


def test_a_redirect_with_another_state_signs_nobody_in(webview, relay_proxy, wrapper_factory, idp,
                                                      token_tap, username):
    """The system browser returns to the app with a redirect of another sign-in: a genuine code
    for the attacker's account, with the attacker's state (a custom-scheme link opened the app
    while its own sign-in was under way). The library hands back `error=state_mismatch` with the
    app's own state and no code: the code never reaches the proxy, nobody is signed in."""
    wrapper = wrapper_factory(relay_proxy)
    theirs = wrapper.start(attackers_authorization_url(relay_proxy), "android")
    their_redirect = wrapper.system_browser(theirs, username="mallory-" + username)
    their_code = parse_qs(urlsplit(their_redirect["redirect"]).query)["code"][0]

    open_home(webview, relay_proxy.url)
    tap_sign_in(webview)
    ours = wrapper.start(wrapper.wait_for_authorization(), "android")
    assert ours["state"] != theirs["state"]
    result = wrapper.hand_back(ours, their_redirect)
    q = parse_qs(urlsplit(result.callback_url).query)
    assert (q["error"], q["state"]) == (["state_mismatch"], [ours["state"]])
    assert "code" not in q and "code_verifier" not in q

    wrapper.load(result.callback_url)
    wait_home(webview, "the app's failure page")
    assert status(webview) == "Not signed in"
    # The proxy passes the library's word on as its own `sign_in_failed` (not an OAuth code
    # it forwards as is), names it in the operator's log, and spent nothing.
    assert alert(webview) == f'{FAILURE} "Sign in failed".', body(webview)
    events = [e for e in relay_proxy.log_events() if e.get("msg") in ("callback verified", "callback failed")]
    assert [(e.get("source"), e.get("reason")) for e in events] == [("client", "sign_in_failed")]
    assert "error=state_mismatch (the browser's redirect carried another state" in events[0]["detail"], events[0]
    assert idp.stats()["token"]["requests"] == 0
    assert token_tap.records == []
    assert not [u for u in wrapper.seen_by_webview if their_code in u]


def test_web_sign_in_through_the_proxy_still_works(webview, relay_proxy, idp, token_tap,
                                                   username):
    """No wrapper: a plain browser signs in on the web with the same app setting; the relay
    endpoint forwards the app's ordinary code to the IdP verbatim."""
    open_home(webview, relay_proxy.url)
    tap_sign_in(webview)
    assert idp_login(webview, username) == f"{relay_proxy.url}{APP_CALLBACK}"
    wait_home(webview)
    assert status(webview) == f"Signed in as {username}"
    assert sign_ins(webview) == 1
    web = idp.stats()["clients"][WEB_CLIENT]
    assert (web["requests"], web["successes"]) == (1, 1)
    [(form, code, answer)] = relay_records(token_tap)
    assert code == 200 and form["client_id"] == WEB_CLIENT
    assert idp.verify_id_token(answer["id_token"], WEB_CLIENT)["email"] == username


def test_no_secret_reaches_the_proxys_logs(webview, relay_proxy, wrapper_factory, idp, token_tap,
                                           username):
    """A native sign-in, its replay, a denial and a web sign-in; then every line the proxy wrote
    (operator log and access log) is searched for each code, verifier, relay code, token and
    state of the run."""
    wrapper = wrapper_factory(relay_proxy)
    result = native_sign_in(webview, relay_proxy, wrapper, "android", username)
    assert status(webview) == f"Signed in as {username}"
    wrapper.load(result.callback_url)

    webview.execute_cdp_cmd("Network.clearBrowserCookies", {})
    open_home(webview, relay_proxy.url)
    tap_sign_in(webview)
    denied = wrapper.sign_in("ios", username=username, action="deny")
    wait_home(webview)

    webview.execute_cdp_cmd("Network.clearBrowserCookies", {})
    wrapper.close()                              # a plain browser from here on
    open_home(webview, relay_proxy.url)
    tap_sign_in(webview)
    idp_login(webview, "web-" + username)
    wait_home(webview)
    assert status(webview) == f"Signed in as web-{username}"

    secrets_seen = {"native code": result.code, "native code_verifier": result.code_verifier,
                    "state (native)": result.state, "state (denied)": denied.state}
    for i, (form, _, answer) in enumerate(relay_records(token_tap)):
        secrets_seen[f"app's code #{i}"] = form.get("code")
        secrets_seen[f"app's code_verifier #{i}"] = form.get("code_verifier")
        secrets_seen[f"app's client_secret #{i}"] = form.get("client_secret")
        if isinstance(answer, dict):
            for name in ("access_token", "id_token", "refresh_token"):
                if answer.get(name):
                    secrets_seen[f"{name} #{i}"] = answer[name]
                    if name == "id_token":
                        secrets_seen[f"id_token signature #{i}"] = answer[name].rsplit(".", 1)[1]
    assert len(token_tap.records) == 2       # the relay code, then the web code
    assert any(k.startswith("access_token") for k in secrets_seen)
    secrets_seen = {k: v for k, v in secrets_seen.items() if v}

    lines = relay_proxy.log_lines()
    assert len(lines) > 10
    leaks = [(name, n) for name, value in secrets_seen.items()
             for n, line in enumerate(lines) if value in line]
    assert not leaks, f"secrets in the proxy's log lines: {leaks}"
