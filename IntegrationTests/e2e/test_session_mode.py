"""CallbackProxy's `session` mode end to end: a site that trusts `X-Forwarded-Email` (header_app.py),
behind the proxy with every path protected but `/public`, sessions kept server-side (memory
store, `server_side: true`), the strict IdP, headless Chromium — each scenario asserted on what
the *app* shows and on the identity headers it received.

    WebView (headless Chromium)  ──►  callback-proxy :P (session mode)  ──►  header app :A
        │  plain browser: /_oauth/start → the IdP's login page → /_oauth/web_callback
        │  wrapper app:   /_oauth/start intercepted → native sign-in → /_oauth_callback
        └────────────────────────►  strict test IdP (its own clients file: the web client's
                                      redirect URI is http://127.0.0.1:P/_oauth/web_callback)

Needs no Rails: its own IdP, app and proxy (module fixtures); the session's Chromium and PKI.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
from urllib.parse import parse_qsl, urlencode, urlsplit

import pytest
import requests

from harness import (ANDROID_CLIENT, ANDROID_REDIRECT, IOS_CLIENT, IOS_REDIRECT, NATIVE, WEB_CLIENT,
                     WEB_SECRET, Proxy, free_port, tail)
from header_app import HeaderApp, folded
from idp_harness import IdP
from site_pages import body, idp_login, status, wait_for
from wrapper import WrapperApp

SESSION_SECRET = "e2e-session-secret-of-at-least-32-characters"
WEB_CALLBACK = "/_oauth/web_callback"
FORGED = [
    ("X-Forwarded-Email", "evil1@attacker.test"), ("x-forwarded-email", "evil2@attacker.test"),
    ("X-FORWARDED-EMAIL", "evil3@attacker.test"), ("X_Forwarded_Email", "evil4@attacker.test"),
    ("x_forwarded_email", "evil5@attacker.test"), ("X-Forwarded_Email", "evil6@attacker.test"),
    ("X_Forwarded-Email", "evil7@attacker.test"), ("X-Forwarded-User", "attacker-root"),
    ("X_Forwarded_User", "attacker-root2"), ("X-Forwarded-Preferred-Username", "attacker-admin"),
    ("X-Forwarded-Groups", "attacker-admins"), ("X-Auth-Request-Email", "evil8@attacker.test"),
    ("X_Auth_Request_Email", "evil9@attacker.test"),
]


# -------------------------------------------------------------------------------------------------
# Fixtures


@pytest.fixture(scope="module")
def sm_ports():
    taken: list[int] = []
    for _ in range(3):
        taken.append(free_port(taken))
    proxy, internal, app = taken
    return dict(proxy=proxy, internal=internal, app=app)


@pytest.fixture(scope="module")
def sm_idp(pki, e2e_dir, sm_ports):
    """The strict IdP with the site's web client registered for the proxy's web callback (exact
    string, PKCE required, client_secret_post) and the two native clients."""
    path = e2e_dir / "session-mode-clients.json"
    path.write_text(json.dumps({"clients": [
        {"client_id": WEB_CLIENT, "type": "web", "client_secret": WEB_SECRET, "require_pkce": True,
         "token_endpoint_auth_method": ["client_secret_post"],
         "redirect_uris": [f"http://127.0.0.1:{sm_ports['proxy']}{WEB_CALLBACK}"]},
        {"client_id": IOS_CLIENT, "type": "native", "platform": "ios",
         "token_endpoint_auth_method": "none", "redirect_uris": [IOS_REDIRECT]},
        {"client_id": ANDROID_CLIENT, "type": "native", "platform": "android",
         "token_endpoint_auth_method": "none", "redirect_uris": [ANDROID_REDIRECT]},
    ]}))
    srv = IdP.start(pki, e2e_dir / "session-mode-idp", clients_file=str(path))
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def header_app(sm_ports):
    app = HeaderApp(sm_ports["app"])
    yield app
    app.stop()


def proxy_yaml(ports, idp, tls=None) -> str:
    """`tls`: (cert, key) — HTTPS (and with it HTTP/2) on the public listener, secure cookies."""
    q = json.dumps
    return "\n".join([
        *([f"tls: {{ cert: {q(str(tls[0]))}, key: {q(str(tls[1]))} }}"] if tls else []),
        f"listen: {q('127.0.0.1:%d' % ports['proxy'])}",
        f"internal_listen: {q('127.0.0.1:%d' % ports['internal'])}",
        f"upstream: {q('http://127.0.0.1:%d' % ports['app'])}",
        "loops: 1", "access_log: stdout", "log: { level: debug, format: json }", "store: memory",
        "oauth:",
        f"  ca_file: {q(str(idp.ca_cert))}",
        "  idp_timeout: 5s",
        f"  session: {{ secret_env: SESSION_SECRET, secure: {'true' if tls else 'false'}, protect: all, "
        "skip: [/public], server_side: true, allowed_email_domains: [example.test] }",
        "providers:",
        "  google:",
        "    kind: google",
        "    handoff: session",
        f"    app_client: {{ id: {q(WEB_CLIENT)}, secret_env: WEB_CLIENT_SECRET }}",
        f"    endpoints: {{ authorization: {q(idp.discovery()['authorization_endpoint'])}, "
        f"token: {q(idp.url('/token'))}, jwks: {q(idp.url('/jwks'))}, issuer: {q(idp.issuer)} }}",
        f"    native: {{ ios: {{ client_id: {q(IOS_CLIENT)} }}, "
        f"android: {{ client_id: {q(ANDROID_CLIENT)}, redirect_uri: {q(ANDROID_REDIRECT)} }} }}",
    ]) + "\n"


@pytest.fixture
def proxy(proxy_bin, sm_ports, sm_idp, header_app, tmp_path, request):
    sm_idp.reset()
    header_app.clear()
    os.environ["SESSION_SECRET"] = SESSION_SECRET
    p = Proxy(proxy_bin, tmp_path, proxy_yaml(sm_ports, sm_idp), port=sm_ports["proxy"],
              internal_port=sm_ports["internal"], name="session-proxy")
    yield p
    alive = p.alive()
    p.stop()
    rep = getattr(request.node, "rep_call", None)
    if (rep is not None and rep.failed) or not alive:
        print(f"--- proxy log\n{tail(p.stderr_path)}\n--- access log\n{tail(p.stdout_path, 3000)}")
        print(f"--- app saw {header_app.seen()}\n--- IdP log\n{tail(sm_idp.log_path, 3000)}")
    if not alive:
        pytest.fail("the proxy exited during the test", pytrace=False)


@pytest.fixture
def tls_proxy(proxy_bin, sm_ports, sm_idp, pki, header_app, tmp_path):
    """The same proxy serving HTTPS with the test PKI's certificate (the browser trusts it)."""
    sm_idp.reset()
    header_app.clear()
    os.environ["SESSION_SECRET"] = SESSION_SECRET
    p = Proxy(proxy_bin, tmp_path, proxy_yaml(sm_ports, sm_idp, tls=(pki.server_cert, pki.server_key)),
              port=sm_ports["proxy"], internal_port=sm_ports["internal"], name="session-tls-proxy", tls=True)
    yield p
    p.stop()


@pytest.fixture
def wrapper(webview, sm_idp, pki, proxy, simulators, tmp_path):
    w = WrapperApp(webview, initial_url=proxy.url,
                   authorization_endpoint=sm_idp.discovery()["authorization_endpoint"],
                   native=NATIVE, ca_file=pki.ca_cert, sims=simulators, workdir=tmp_path)
    yield w
    w.close()


# -------------------------------------------------------------------------------------------------
# Helpers


def signed_in_as(driver, username):
    wait_for(driver, lambda d: status(d) == f"Signed in as {username}", f"the app to show {username}")


def browser_sign_in(webview, proxy, username, path="/account?tab=1"):
    """A plain browser: a protected page → /_oauth/start → the IdP's login page → back."""
    webview.get(proxy.url + path)
    redirect_uri = idp_login(webview, username)
    assert redirect_uri == proxy.url + WEB_CALLBACK, redirect_uri
    signed_in_as(webview, username)
    assert webview.current_url == proxy.url + path
    return webview.get_cookie("_oauth_session")["value"]


def raw_get(proxy, path, headers=(), cookie=None):
    """A request with exactly these header lines (several spellings of one name included)."""
    conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=10)
    try:
        conn.putrequest("GET", path, skip_accept_encoding=True)
        for name, value in headers:
            conn.putheader(name, value)
        if cookie:
            conn.putheader("Cookie", f"_oauth_session={cookie}")
        conn.endheaders()
        r = conn.getresponse()
        return r.status, r.getheader("Location"), r.read().decode(errors="replace")
    finally:
        conn.close()


def state_cookies(driver):
    """Names of the browser's state cookies (one per sign-in in flight: `_oauth_state_<digest>`)."""
    return [c["name"] for c in driver.get_cookies() if c["name"].startswith("_oauth_state")]


def emails_seen(app):
    """X-Forwarded-Email values of the app's page requests (the browser's favicon fetches aside)."""
    return [v for r in app.seen() if r["path"] != "/favicon.ico"
            for k, v in r["identity"] if folded(k) == "x-forwarded-email"]


# -------------------------------------------------------------------------------------------------
# Scenarios


def test_a_plain_browser_signs_in_at_the_idp_and_the_app_shows_the_user(webview, proxy, sm_idp,
                                                                       header_app, username):
    browser_sign_in(webview, proxy, username)
    # The web client redeemed the code once (secret + PKCE + the exact redirect URI).
    stats = sm_idp.stats()
    assert stats["clients"][WEB_CLIENT]["successes"] == 1 and stats["token"]["requests"] == 1
    assert emails_seen(header_app) == [username]
    # The state cookie was single use, and no code or state ever reached the app.
    assert state_cookies(webview) == []
    assert all("code=" not in r["path"] and "state=" not in r["path"] for r in header_app.seen())


@pytest.mark.parametrize("platform", ["ios", "android"])
def test_the_wrapper_apps_native_sign_in_signs_the_user_into_the_app(webview, proxy, wrapper, sm_idp,
                                                                    header_app, platform, username):
    # The protected page sends the WebView to /_oauth/start and on to the IdP: the wrapper
    # intercepts that navigation, signs in natively and loads /_oauth_callback.
    webview.execute_script("window.location.href = arguments[0]", proxy.url + "/inbox")
    result = wrapper.sign_in(platform, username=username)
    signed_in_as(webview, username)
    assert webview.current_url == proxy.url + "/inbox"
    assert dict(parse_qsl(urlsplit(result.intercepted_url).query))["client_id"] == WEB_CLIENT
    stats = sm_idp.stats()
    assert stats["clients"][NATIVE[platform][0]]["successes"] == 1
    assert WEB_CLIENT not in stats["clients"], "the native code, not a web one"
    assert emails_seen(header_app) == [username]


def test_native_sign_in_in_session_mode_over_https_and_http2(webview, tls_proxy, sm_idp, pki, simulators, tmp_path,
                                                            header_app, username):
    """Session mode with the proxy on TLS: Chromium speaks HTTP/2 (ALPN h2); the protected page, the
    /_oauth/start redirect, the callback and the signed-in page are streams; the cookie is Secure."""
    w = WrapperApp(webview, initial_url=tls_proxy.url,
                   authorization_endpoint=sm_idp.discovery()["authorization_endpoint"],
                   native=NATIVE, ca_file=pki.ca_cert, sims=simulators, workdir=tmp_path)
    try:
        webview.execute_script("window.location.href = arguments[0]", tls_proxy.url + "/inbox")
        w.sign_in("ios", username=username)
        signed_in_as(webview, username)
    finally:
        w.close()
    assert webview.current_url == tls_proxy.url + "/inbox"
    assert webview.execute_script(
        "return performance.getEntriesByType('navigation')[0].nextHopProtocol") == "h2"
    assert emails_seen(header_app) == [username]
    cookies = [c for c in webview.get_cookies() if c["name"] == "__Host-_oauth_session"]
    assert cookies and all(c["secure"] for c in cookies), webview.get_cookies()


def test_two_tabs_signing_in_at_once_both_end_signed_in(webview, proxy, sm_idp, header_app, username):
    """Two windows of one browser opened on protected pages: each starts its own sign-in before
    either finishes. The second start must not undo the first (one state cookie per sign-in):
    finishing the first tab, then the second, leaves both on their page, signed in."""
    first = webview.current_window_handle
    webview.get(proxy.url + "/account?tab=1")
    wait_for(webview, lambda d: d.find_elements("id", "username"), "the IdP's login page in the first tab")
    webview.switch_to.new_window("window")
    second = webview.current_window_handle
    try:
        webview.get(proxy.url + "/inbox")
        wait_for(webview, lambda d: d.find_elements("id", "username"), "the IdP's login page in the second tab")
        assert len(state_cookies(webview)) == 2, state_cookies(webview)
        sm_idp.reset_stats()
        for handle, path in ((first, "/account?tab=1"), (second, "/inbox")):
            webview.switch_to.window(handle)
            assert idp_login(webview, username) == proxy.url + WEB_CALLBACK
            signed_in_as(webview, username)
            assert webview.current_url == proxy.url + path
        assert sm_idp.stats()["clients"][WEB_CLIENT]["successes"] == 2
        assert state_cookies(webview) == [], "each state cookie cleared by its own sign-in"
        webview.switch_to.window(first)
        webview.refresh()
        signed_in_as(webview, username)
        assert set(emails_seen(header_app)) == {username}
    finally:
        with contextlib.suppress(Exception):
            webview.switch_to.window(second)
            webview.close()
        webview.switch_to.window(first)


def test_forged_identity_headers_never_reach_the_app(webview, proxy, header_app, username):
    cookie = browser_sign_in(webview, proxy, username)
    header_app.clear()
    # Raw requests, every spelling at once, with and without the session.
    for path, session in (("/public", None), ("/public", cookie), ("/account", cookie)):
        code, _, text = raw_get(proxy, path, FORGED, cookie=session)
        assert code == 200, (path, code)
        expected = f"Signed in as {username}" if session else "Not signed in"
        assert expected in text
    code, location, _ = raw_get(proxy, "/account", FORGED)
    assert code == 302 and location.startswith("/_oauth/start?"), "no session: never reaches the app"
    assert not [v for v in header_app.identity_values() if "attacker" in v]
    assert emails_seen(header_app) == [username, username]
    for record in header_app.seen():
        names = [folded(k) for k, _ in record["identity"]]
        assert len(names) == len(set(names)), f"one spelling of each identity header: {record}"

    # The browser sending them too: the app shows who signed in, or nobody.
    webview.execute_cdp_cmd("Network.enable", {})
    webview.execute_cdp_cmd("Network.setExtraHTTPHeaders", {"headers": {
        "X-Forwarded-Email": "evil1@attacker.test", "X_Forwarded_Email": "evil4@attacker.test",
        "X-Forwarded-User": "attacker-root", "X-Auth-Request-Email": "evil8@attacker.test"}})
    try:
        webview.get(proxy.url + "/public")
        assert status(webview) == f"Signed in as {username}"
        webview.delete_all_cookies()
        webview.get(proxy.url + "/public")
        assert status(webview) == "Not signed in"
    finally:
        webview.execute_cdp_cmd("Network.setExtraHTTPHeaders", {"headers": {}})
    assert not [v for v in header_app.identity_values() if "attacker" in v]


def attacker_flow(proxy, idp):
    """The attacker's own /_oauth/start (their state) and the codes they get for it at the IdP."""
    start = requests.get(proxy.url + "/_oauth/start", allow_redirects=False, timeout=10)
    authorize = start.headers["Location"]
    params = dict(parse_qsl(urlsplit(authorize).query))
    with requests.Session() as s:
        s.get(authorize, verify=idp.ca_cert, timeout=10)
        back = s.post(authorize, data={"username": "mallory@example.test"}, verify=idp.ca_cert,
                      allow_redirects=False, timeout=10).headers["Location"]
    web_callback = proxy.url + WEB_CALLBACK + "?" + urlsplit(back).query
    grant = idp.get_code(IOS_CLIENT, username="mallory@example.test", state=params["state"],
                         nonce=params["nonce"])
    native_callback = proxy.url + "/_oauth_callback?" + urlencode({
        "provider": "google", "platform": "ios", "client_id": IOS_CLIENT,
        "redirect_uri": grant.redirect_uri, "code": grant.code, "state": grant.state,
        "code_verifier": grant.code_verifier})
    return web_callback, native_callback


def test_a_callback_carrying_another_sessions_state_is_refused(webview, proxy, sm_idp, header_app):
    """Login CSRF: the victim's browser is made to load the attacker's callback (web or native)
    while its own sign-in is in flight. Refused before any code is spent; never signed in as the
    attacker."""
    web_callback, native_callback = attacker_flow(proxy, sm_idp)
    webview.get(proxy.url + "/account")          # the victim's own sign-in: state cookie set
    wait_for(webview, lambda d: d.find_elements("id", "username"), "the IdP's login page")
    sm_idp.reset_stats()
    for url in (web_callback, native_callback):
        webview.get(url)
        assert webview.title == "Sign-in failed", body(webview)[:300]
        assert "not started in this browser" in body(webview)
    assert sm_idp.stats()["token"]["requests"] == 0
    assert webview.get_cookie("_oauth_session") is None
    webview.get(proxy.url + "/public")
    assert status(webview) == "Not signed in"
    assert not [v for v in header_app.identity_values() if "mallory" in v]


def test_after_sign_out_the_app_no_longer_sees_the_user_and_the_old_cookie_is_refused(
        webview, proxy, header_app, username):
    old = browser_sign_in(webview, proxy, username)
    header_app.clear()
    webview.get(proxy.url + "/_oauth/sign_out?rd=/public")
    wait_for(webview, lambda d: status(d) == "Not signed in", "the app, signed out")
    assert webview.get_cookie("_oauth_session") is None
    # The cookie as it was before sign-out (copied, or restored by the browser): server-side
    # sessions end at sign-out, so it is worth nothing now.
    webview.add_cookie({"name": "_oauth_session", "value": old, "path": "/"})
    webview.get(proxy.url + "/public")
    assert status(webview) == "Not signed in"
    code, location, _ = raw_get(proxy, "/account", cookie=old)
    assert code == 302 and location.startswith("/_oauth/start?")
    assert header_app.identity_values() == [], "no identity reached the app after sign-out"
    with contextlib.suppress(Exception):
        webview.delete_all_cookies()


def test_another_site_cannot_sign_the_user_out(webview, proxy, header_app, sm_ports, username):
    """The session cookie is SameSite=Lax, so a link on another site to /_oauth/sign_out carries it:
    the browser says `Sec-Fetch-Site: cross-site` and the proxy refuses (403), the user stays signed
    in. The site's own link (same origin) still signs out."""
    browser_sign_in(webview, proxy, username)
    # Another site: the header app under another host name (localhost is not the site 127.0.0.1).
    webview.get(f"http://localhost:{sm_ports['app']}/elsewhere")
    webview.execute_script("window.location.href = arguments[0]", proxy.url + "/_oauth/sign_out?rd=/public")
    wait_for(webview, lambda d: d.title == "Not signed out", "the proxy's refusal page")
    assert "still signed in" in body(webview)
    webview.get(proxy.url + "/public")
    assert status(webview) == f"Signed in as {username}"
    webview.execute_script("window.location.href = arguments[0]", proxy.url + "/_oauth/sign_out?rd=/public")
    wait_for(webview, lambda d: status(d) == "Not signed in", "the app, signed out by the site's own link")
    assert webview.get_cookie("_oauth_session") is None
