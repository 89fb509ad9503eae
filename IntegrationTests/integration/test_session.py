"""`session` hand-off mode: the proxy's own sign-in, identity passed upstream in headers.

The wrapper app's part is played by hand: /_oauth/start's redirect to the IdP is read (that is
the navigation a wrapper intercepts), the native sign-in is done at the strict IdP with the
same state and nonce, and the callback is loaded with the browser's cookies.
"""
import hashlib
import json
import os
import sys
import urllib.parse
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "idp"))
from idp_harness import IdP, make_test_pki  # noqa: E402
from helpers import HTTPConn  # noqa: E402
from callback_fixtures import send_h3  # noqa: E402
from test_http2 import cert  # noqa: E402,F401 (the TLS fixture, shared)

WEB = "123-web.apps.googleusercontent.com"
IOS = "123-ios.apps.googleusercontent.com"
SECRET = "a-session-secret-of-at-least-32-characters"


@pytest.fixture(scope="module")
def idp(tmp_path_factory):
    d = tmp_path_factory.mktemp("idp")
    with IdP.start(make_test_pki(str(d)), log_dir=d) as srv:
        yield srv


def session_config(idp, store="memory", rules="protect: [/private], allowed_redirect_hosts: [app.example.com]",
                   access="allowed_email_domains: [example.test]"):
    """The proxy's YAML for session mode with the native iOS client (and the environment its
    secrets come from)."""
    os.environ["SESSION_SECRET"] = SECRET
    os.environ["WEB_SECRET"] = "test-web-secret-not-a-real-one"
    return f"""
store: {store}
oauth:
  ca_file: {idp.ca_cert}
  session: {{ secret_env: SESSION_SECRET, secure: false, {access}, {rules} }}
providers:
  google:
    kind: google
    handoff: session
    app_client: {{ id: {WEB}, secret_env: WEB_SECRET }}
    endpoints: {{ authorization: {idp.base_url}/authorize, token: {idp.base_url}/token, jwks: {idp.base_url}/jwks, issuer: {idp.base_url} }}
    native: {{ ios: {{ client_id: {IOS} }} }}
"""


@pytest.fixture
def sproxy(proxy_factory, upstream, tmp_path, idp):
    config = tmp_path / "session.yaml"
    config.write_text(session_config(idp))
    return proxy_factory(upstream, extra=["--config", str(config)])


@pytest.fixture
def sproxy_h3(proxy_factory, upstream, tmp_path, idp, cert):
    """The session proxy on TLS with HTTP/3 on: `get` asks it over HTTP/3."""
    config = tmp_path / "session.yaml"
    config.write_text(session_config(idp))
    crt, key = cert
    p = proxy_factory(upstream, extra=["--config", str(config), "--tls-cert", crt, "--tls-key", key],
                      env={"CALLBACK_PROXY_HTTP3__ENABLED": "true"})
    p.h3_ca = crt
    return p


def get(p, target, cookies=None, headers=None):
    h = dict(headers or {})
    if cookies:
        h["Cookie"] = "; ".join(f"{k}={v}" for k, v in cookies.items())
    if getattr(p, "h3_ca", None):
        return send_h3(p, target, headers=[(k.lower(), v) for k, v in h.items()])
    with HTTPConn(p.port) as c:
        c.request("GET", target, headers=list(h.items()))
        return c.read_response()


def set_cookies(r):
    out = {}
    for k, v in r.headers:
        if k.lower() == "set-cookie":
            name, rest = v.split("=", 1)
            out[name] = rest.split(";", 1)[0]
    return out


def state_cookies(cookies):
    """The state cookies among name → value pairs: one per sign-in, `_oauth_state_<digest>`."""
    return {k: v for k, v in cookies.items() if k.startswith("_oauth_state")}


class Jar(dict):
    """A browser's cookies for the site, in the order they were set: a Set-Cookie replaces one of
    the same name, an empty value (Max-Age=0) removes it."""

    def take(self, r):
        for name, value in set_cookies(r).items():
            self.pop(name, None)
            if value:
                self[name] = value
        return r


def sign_in(p, idp, rd="/private/page", username="alice@example.test", login=None):
    """/_oauth/start → (wrapper) native sign-in with the same state and nonce → callback.
    `login`: more fields of the IdP's login form (email, email_verified, groups, hd)."""
    start = get(p, "/_oauth/start?" + urllib.parse.urlencode({"rd": rd}))
    assert start.status == 302, start
    authorize = urllib.parse.urlsplit(start.one("location"))
    q = dict(urllib.parse.parse_qsl(authorize.query))
    assert f"{authorize.scheme}://{authorize.netloc}{authorize.path}" == idp.base_url + "/authorize"
    assert q["client_id"] == WEB
    jar = set_cookies(start)
    assert list(state_cookies(jar)) == ["_oauth_state_" + hashlib.sha256(q["state"].encode()).hexdigest()[:12]]
    grant = idp.get_code(IOS, state=q["state"], nonce=q["nonce"], username=username, login=login)
    callback = "/_oauth_callback?" + urllib.parse.urlencode({
        "provider": "google", "platform": "ios", "client_id": IOS, "redirect_uri": grant.redirect_uri,
        "code": grant.code, "state": grant.state, "code_verifier": grant.code_verifier})
    r = get(p, callback, cookies=jar)
    return r, jar, grant, callback


def test_a_native_sign_in_sets_the_session_and_identity_reaches_the_upstream(sproxy, idp, upstream):
    signs_in_and_identity_reaches_the_upstream(sproxy, idp)


def test_over_http3_a_native_sign_in_sets_the_session_and_identity_reaches_the_upstream(sproxy_h3, idp, upstream):
    signs_in_and_identity_reaches_the_upstream(sproxy_h3, idp)
    assert {l["protocol"] for l in sproxy_h3.access_log()} == {"h3"}


def signs_in_and_identity_reaches_the_upstream(sproxy, idp):
    r, jar, grant, _ = sign_in(sproxy, idp)
    assert r.status == 302, r
    assert r.one("location") == "/private/page"
    cookies = set_cookies(r)
    assert state_cookies(cookies) == {k: "" for k in state_cookies(jar)}, "the state cookie is cleared"
    session = {k: v for k, v in cookies.items() if k.startswith("_oauth_session")}
    assert session and all(session.values())
    # The client tries to claim another identity in every spelling: only ours arrives.
    e = get(sproxy, "/echo", cookies=session, headers={
        "X-Forwarded-Email": "evil@attacker.test", "X_Forwarded_Email": "evil2@attacker.test",
        "x-forwarded-user": "root", "X-Auth-Request-Email": "evil3@attacker.test"}).json()
    names = [(k.lower(), v) for k, v in e["headers"]]
    assert ("x-forwarded-email", "alice@example.test") in names
    assert [v for k, v in names if k in ("x-forwarded-email", "x_forwarded_email")] == ["alice@example.test"]
    assert [v for k, v in names if k == "x-forwarded-user"] != ["root"]
    assert not [k for k, v in names if "attacker" in v or v == "root"]


def test_underscore_spellings_of_forwarding_headers_never_reach_the_upstream_signed_in_or_not(sproxy, idp):
    from test_proxying import UNDERSCORE_SPOOFS, spoofed
    r, _, _, _ = sign_in(sproxy, idp)
    session = {k: v for k, v in set_cookies(r).items() if k.startswith("_oauth_session")}
    for cookies in (None, session):
        e = get(sproxy, "/echo", cookies=cookies, headers=dict(UNDERSCORE_SPOOFS + [("X_Forwarded_Email", "evil@attacker.test")])).json()
        assert spoofed(e) == [], cookies
        assert not [v for _, v in e["headers"] if "attacker" in v]
        assert [v for k, v in e["headers"] if k.lower() == "x-forwarded-for"] == ["127.0.0.1"]


def test_a_session_cookie_value_under_another_name_is_refused_cold_and_warm(sproxy, idp):
    """The proxy runs one loop here, so the second try finds the value opened under its real name."""
    r, _, _, _ = sign_in(sproxy, idp)
    session = {k: v for k, v in set_cookies(r).items() if k.startswith("_oauth_session")}
    assert list(session) == ["_oauth_session"], "a single cookie (not chunked)"
    renamed = {"_oauth_session_0": session["_oauth_session"]}
    headers = {"Accept": "application/json"}
    assert get(sproxy, "/private/x", cookies=renamed, headers=headers).status == 401, "cold"
    assert get(sproxy, "/private/x", cookies=session, headers=headers).status == 404, "signed in: the upstream's own answer"
    assert get(sproxy, "/private/x", cookies=renamed, headers=headers).status == 401, "warm"


def test_without_a_session_identity_headers_are_stripped_and_protected_paths_redirect(sproxy, upstream):
    e = get(sproxy, "/echo", headers={"X-Forwarded-Email": "evil@attacker.test"}).json()
    assert not [k for k, v in e["headers"] if "attacker" in v]
    r = get(sproxy, "/private/x?y=1")
    assert r.status == 302
    assert r.one("location") == "/_oauth/start?rd=%2Fprivate%2Fx%3Fy%3D1"
    r = get(sproxy, "/private/x", headers={"Accept": "application/json"})
    assert r.status == 401
    assert upstream.record.requests() and all(q["target"] != "/private/x" for q in upstream.record.requests())


@pytest.mark.parametrize("path", ["/PRIVATE", "/Private/x", "/pRiVaTe/deeper/page", "/%50rivate/x", "/%2550rivate"])
def test_a_case_insensitive_router_cannot_be_reached_past_protect(sproxy, idp, upstream, path):
    """Express, ASP.NET Core, IIS and Spring route /PRIVATE to /private's handler: protect folds
    case for its decision; signed in, the path is forwarded as the client wrote it."""
    r = get(sproxy, path, headers={"Accept": "application/json"})
    assert r.status == 401, r
    assert all(q["target"].lower() not in (path.lower(), "/private") for q in upstream.record.requests())
    signed, _, _, _ = sign_in(sproxy, idp)
    session = {k: v for k, v in set_cookies(signed).items() if k.startswith("_oauth_session")}
    assert get(sproxy, path, cookies=session, headers={"Accept": "application/json"}).status == 404
    canonical = path.replace("%50", "P")
    assert [q["target"] for q in upstream.record.requests()][-1] == canonical


def test_case_folding_never_widens_protect(sproxy, upstream):
    for path in ("/PRIVATES", "/x/PRIVATE", "/privatex"):
        assert get(sproxy, path, headers={"Accept": "application/json"}).status == 404, path


def test_sub_resources_get_a_401_and_never_replace_a_sign_in_in_flight(sproxy, idp):
    """A browser fetches /favicon.ico (and images, scripts) on its own while the user signs in.
    Redirected to /_oauth/start, such fetches would set state cookies of their own and, beyond the
    limit, push out the one of the user's own sign-in."""
    for dest in ("image", "script", "empty", "iframe"):
        r = get(sproxy, "/private/favicon.ico", headers={"Sec-Fetch-Dest": dest})
        assert r.status == 401 and not set_cookies(r), (dest, r)
        # and if one got to /_oauth/start anyway, no state cookie is issued to it
        r = get(sproxy, "/_oauth/start?rd=/", headers={"Sec-Fetch-Dest": dest})
        assert r.status == 401 and not state_cookies(set_cookies(r)), (dest, r)
    # a page navigation (or a client without Fetch Metadata) is sent to sign in
    for headers in ({"Sec-Fetch-Dest": "document"}, {}):
        r = get(sproxy, "/private/page", headers=headers)
        assert r.status == 302 and r.one("location").startswith("/_oauth/start?"), r
        assert get(sproxy, "/_oauth/start?rd=/", headers=headers).status == 302


def test_userinfo_auth_and_sign_out(sproxy, idp):
    r, _, _, _ = sign_in(sproxy, idp)
    session = {k: v for k, v in set_cookies(r).items() if k.startswith("_oauth_session")}
    info = get(sproxy, "/_oauth/userinfo", cookies=session)
    assert info.status == 200 and info.json()["email"] == "alice@example.test"
    auth = get(sproxy, "/_oauth/auth", cookies=session)
    assert auth.status == 202 and auth.one("x-auth-request-email") == "alice@example.test"
    assert get(sproxy, "/_oauth/auth").status == 401
    assert get(sproxy, "/_oauth/userinfo").status == 401
    out = get(sproxy, "/_oauth/sign_out?rd=/bye", cookies=session)
    assert out.status == 302 and out.one("location") == "/bye"
    assert all(v == "" for k, v in set_cookies(out).items() if k.startswith("_oauth_session"))


def test_a_callback_from_another_browser_is_refused_before_the_idp(sproxy, idp):
    """Login CSRF: a callback whose state this browser never got (no state cookie, or another one)."""
    _, _, grant, callback = sign_in(sproxy, idp)  # spends that browser's own flow
    idp.request("POST", "/_test/reset-stats")
    fresh = idp.get_code(IOS)
    target = "/_oauth_callback?" + urllib.parse.urlencode({
        "provider": "google", "platform": "ios", "client_id": IOS, "redirect_uri": fresh.redirect_uri,
        "code": fresh.code, "state": fresh.state, "code_verifier": fresh.code_verifier})
    r = get(sproxy, target)
    assert r.status == 400
    assert idp.request("GET", "/_test/stats").json()["token"]["requests"] == 0
    # With a state cookie from a different start: refused just the same, before the code is spent.
    other = set_cookies(get(sproxy, "/_oauth/start"))
    r = get(sproxy, target, cookies=other)
    assert r.status == 400
    assert not [k for k in set_cookies(r) if k.startswith("_oauth_session")]
    assert idp.request("GET", "/_test/stats").json()["token"]["requests"] == 0
    # The code was not spent: the browser whose state it is can still use it.
    start = get(sproxy, "/_oauth/start")
    q = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(start.one("location")).query))
    mine = idp.get_code(IOS, state=q["state"], nonce=q["nonce"])
    r = get(sproxy, "/_oauth_callback?" + urllib.parse.urlencode({
        "provider": "google", "platform": "ios", "client_id": IOS, "redirect_uri": mine.redirect_uri,
        "code": mine.code, "state": q["state"], "code_verifier": mine.code_verifier}), cookies=set_cookies(start))
    assert r.status == 302


@pytest.mark.parametrize("rd,expected", [
    ("/account?tab=1", "/account?tab=1"),
    ("https://app.example.com/x", "https://app.example.com/x"),
    ("//evil.example/x", "/"),
    ("https://evil.example/", "/"),
    ("/\\evil.example", "/"),
])
def test_rd_targets_are_validated(sproxy, idp, rd, expected):
    r, _, _, _ = sign_in(sproxy, idp, rd=rd)
    assert r.status == 302 and r.one("location") == expected


# -------------------------------------------------------------------------------------------------
# A plain browser's web sign-in: /_oauth/start → the IdP's login page → /_oauth/web_callback.
# The IdP's web client is registered for the proxy's configured web_redirect_uri only, with PKCE
# required, so the exchange succeeds only with the web client's secret, that exact redirect URI and
# the verifier the proxy kept in its state cookie.

WEB_REDIRECT = "http://127.0.0.1/_oauth/web_callback"
WEB_SECRET = "web-secret-of-the-session-tests"
SIGNED_OUT = "http://127.0.0.1/signed-out"


def idp_with_clients(tmp_path_factory, name, clients):
    """A test IdP of its own (its own CA) with exactly these registered clients."""
    d = tmp_path_factory.mktemp(name)
    path = d / "clients.json"
    path.write_text(json.dumps({"clients": clients}))
    return IdP.start(make_test_pki(str(d)), log_dir=d, clients_file=str(path))


@pytest.fixture(scope="module")
def web_idp(tmp_path_factory):
    with idp_with_clients(tmp_path_factory, "web-idp", [
        {"client_id": WEB, "type": "web", "client_secret": WEB_SECRET, "require_pkce": True,
         "token_endpoint_auth_method": ["client_secret_post", "client_secret_basic"],
         "redirect_uris": [WEB_REDIRECT], "post_logout_redirect_uris": [SIGNED_OUT]},
        {"client_id": IOS, "type": "native", "platform": "ios", "token_endpoint_auth_method": "none",
         "redirect_uris": ["com.googleusercontent.apps.123-ios:/oauth2redirect"],
         "post_logout_redirect_uris": [SIGNED_OUT]}]) as srv:
        yield srv


def web_proxy_config(idp, *, client_auth="client_secret_post", store="memory", server_side=None,
                     extra_session="", rate_limit=None, endpoints_extra=""):
    side = "" if server_side is None else f", server_side: {str(server_side).lower()}"
    limit = f"\n  rate_limit: {rate_limit}" if rate_limit else ""
    return f"""
store: {store}
oauth:
  ca_file: {idp.ca_cert}{limit}
  session: {{ secret_env: SESSION_SECRET, secure: false, protect: [/private], error_url: /signin-failed,
             allowed_email_domains: [example.test],
             web_redirect_uri: "{WEB_REDIRECT}"{side}{extra_session} }}
providers:
  google:
    kind: google
    handoff: session
    app_client: {{ id: {WEB}, secret_env: WEB_SECRET, client_auth: {client_auth} }}
    endpoints: {{ authorization: {idp.base_url}/authorize, token: {idp.base_url}/token, jwks: {idp.base_url}/jwks, issuer: {idp.base_url}{endpoints_extra} }}
    native: {{ ios: {{ client_id: {IOS} }} }}
"""


@pytest.fixture
def web_proxy_factory(proxy_factory, upstream, tmp_path, web_idp):
    os.environ["SESSION_SECRET"] = SECRET
    os.environ["WEB_SECRET"] = WEB_SECRET

    def start(name="web", **kw):
        config = tmp_path / f"{name}.yaml"
        config.write_text(web_proxy_config(web_idp, **kw))
        return proxy_factory(upstream, extra=["--config", str(config)])
    return start


def idp_login(idp, authorize_url, username="alice@example.test", action="approve", **fields):
    """What the browser does at the IdP: its login page, then the form. Returns the redirect."""
    page = idp.request("GET", authorize_url)
    assert page.status_code == 200, (page.status_code, page.headers.get("X-OAuth-Error"))
    resp = idp.request("POST", authorize_url, data={"username": username, "action": action, **fields},
                       allow_redirects=False)
    assert resp.status_code == 302, resp.status_code
    return resp.headers["Location"]


def web_sign_in(p, idp, rd="/private/page", **login):
    """start → IdP login → the web callback, with the browser's cookies. Returns (response,
    state cookie jar, callback target)."""
    start = get(p, "/_oauth/start?" + urllib.parse.urlencode({"rd": rd}))
    assert start.status == 302, start
    q = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(start.one("location")).query))
    assert q["client_id"] == WEB and q["redirect_uri"] == WEB_REDIRECT
    assert q["code_challenge_method"] == "S256" and q["code_challenge"]
    jar = set_cookies(start)
    back = idp_login(idp, start.one("location"), **login)
    assert back.startswith(WEB_REDIRECT + "?"), back
    target = "/_oauth/web_callback?" + urllib.parse.urlsplit(back).query
    return get(p, target, cookies=jar), jar, target


def session_of(r):
    return {k: v for k, v in set_cookies(r).items() if k.startswith("_oauth_session")}


@pytest.mark.parametrize("client_auth", ["client_secret_post", "client_secret_basic"])
def test_a_plain_browser_signs_in_through_the_web_callback(web_proxy_factory, web_idp, upstream, client_auth):
    p = web_proxy_factory(client_auth=client_auth)
    web_idp.reset_stats()
    r, jar, _ = web_sign_in(p, web_idp, rd="/private/page?x=1")
    assert r.status == 302, r
    assert r.one("location") == "/private/page?x=1"
    assert r.one("cache-control") == "no-store" and r.one("referrer-policy") == "no-referrer"
    assert state_cookies(set_cookies(r)) == {k: "" for k in state_cookies(jar)}, "the state cookie is single use"
    session = session_of(r)
    assert session and all(session.values())
    # The IdP saw one exchange, by the web client, and it succeeded (secret + PKCE + redirect URI).
    stats = web_idp.stats()
    assert stats["token"]["requests"] == 1
    assert stats["clients"][WEB]["successes"] == 1
    assert get(p, "/private/x", cookies=session).status == 404, "a protected path reaches the upstream"
    e = get(p, "/echo", cookies=session, headers={"X-Forwarded-Email": "evil@attacker.test"})
    assert e.status == 200
    names = [(k.lower(), v) for k, v in e.json()["headers"]]
    assert [v for k, v in names if k == "x-forwarded-email"] == ["alice@example.test"]


def test_a_refused_web_client_is_logged_once_a_minute_naming_its_settings(proxy_factory, upstream, tmp_path, web_idp):
    """A wrong web client secret fails every browser sign-in alike: each user gets the failure
    page, the operator one error line naming the setting (not one per sign-in)."""
    os.environ["SESSION_SECRET"] = SECRET
    config = tmp_path / "wrong-secret.yaml"
    config.write_text(web_proxy_config(web_idp))
    p = proxy_factory(upstream, extra=["--config", str(config)], env={"WEB_SECRET": "not-the-registered-secret"})
    for _ in range(3):
        r, _, _ = web_sign_in(p, web_idp)
        # the configured error_url (the app's failure path), without a session
        assert (r.status, r.one("location")) == (302, "/signin-failed?error=exchange_failed"), r
        assert session_of(r) == {}
    lines = [json.loads(l) for l in p.stderr_text().splitlines() if '"web callback failed"' in l]
    assert len(lines) == 1, lines
    assert (lines[0]["level"], lines[0]["source"], lines[0]["setting"]) == ("error", "config", "providers.google.app_client"), lines[0]
    assert "invalid_client" in lines[0]["detail"]
    assert "not-the-registered-secret" not in p.stderr_text()


def test_a_web_callback_is_answered_once(web_proxy_factory, web_idp):
    """The same callback again with the same cookies (a replay by whoever saw both): refused, and
    the IdP is not asked a second time."""
    p = web_proxy_factory()
    r, jar, target = web_sign_in(p, web_idp)
    assert r.status == 302
    web_idp.reset_stats()
    again = get(p, target, cookies=jar)
    assert again.status == 400, again
    assert not session_of(again)
    assert web_idp.stats()["token"]["requests"] == 0


def test_a_web_callback_with_another_browsers_state_is_refused_before_the_idp(web_proxy_factory, web_idp):
    """Login CSRF: the attacker's own code and state, loaded in the victim's browser (which has
    its own state cookie, or none)."""
    p = web_proxy_factory()
    attacker = get(p, "/_oauth/start")
    back = idp_login(web_idp, attacker.one("location"), username="mallory@example.test")
    target = "/_oauth/web_callback?" + urllib.parse.urlsplit(back).query
    victim = set_cookies(get(p, "/_oauth/start"))
    web_idp.reset_stats()
    for cookies in (victim, None):
        r = get(p, target, cookies=cookies)
        assert r.status == 400, r
        assert not session_of(r)
        assert not state_cookies(set_cookies(r)), "the victim's own sign-in stays usable"
    assert web_idp.stats()["token"]["requests"] == 0
    # The attacker's own browser still completes: nothing was spent.
    r = get(p, target, cookies=set_cookies(attacker))
    assert r.status == 302 and session_of(r)


# -------------------------------------------------------------------------------------------------
# Several sign-ins in flight in one browser (two tabs on protected pages): a state cookie each,
# named after its state, so that the second /_oauth/start does not replace the first's.


def state_cookie_name(authorize_url):
    state = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(authorize_url).query))["state"]
    return "_oauth_state_" + hashlib.sha256(state.encode()).hexdigest()[:12]


def start_in(p, jar, rd="/private/page"):
    """/_oauth/start with the browser's cookies, its Set-Cookie kept; the authorization URL."""
    r = jar.take(get(p, "/_oauth/start?" + urllib.parse.urlencode({"rd": rd}), cookies=jar))
    assert r.status == 302, r
    return r.one("location")


def native_callback(authorize_url, grant):
    q = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(authorize_url).query))
    return "/_oauth_callback?" + urllib.parse.urlencode({
        "provider": "google", "platform": "ios", "client_id": IOS, "redirect_uri": grant.redirect_uri,
        "code": grant.code, "state": q["state"], "code_verifier": grant.code_verifier})


def native_grant(idp, authorize_url, username="alice@example.test"):
    q = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(authorize_url).query))
    return idp.get_code(IOS, username=username, state=q["state"], nonce=q["nonce"])


@pytest.mark.parametrize("way", ["web", "native"])
@pytest.mark.parametrize("first_started_finishes_first", [True, False])
def test_two_sign_ins_in_flight_in_one_browser_both_complete(web_proxy_factory, web_idp, way,
                                                             first_started_finishes_first):
    p = web_proxy_factory()
    jar = Jar()
    flows = [(start_in(p, jar, "/private/one"), "/private/one"), (start_in(p, jar, "/private/two"), "/private/two")]
    assert list(state_cookies(jar)) == [state_cookie_name(a) for a, _ in flows], "one state cookie each"
    if not first_started_finishes_first:
        flows.reverse()
    web_idp.reset_stats()
    for authorize, rd in flows:
        if way == "web":
            target = "/_oauth/web_callback?" + urllib.parse.urlsplit(idp_login(web_idp, authorize)).query
        else:
            target = native_callback(authorize, native_grant(web_idp, authorize))
        r = jar.take(get(p, target, cookies=jar))
        assert r.status == 302 and r.one("location") == rd, r
        assert session_of(r)
        assert state_cookies(set_cookies(r)) == {state_cookie_name(authorize): ""}, "only its own state cookie is cleared"
    assert not state_cookies(jar)
    assert web_idp.stats()["token"]["requests"] == 2
    assert get(p, "/private/x", cookies=jar).status == 404, "signed in: a protected path reaches the upstream"


def test_a_callback_whose_state_has_no_cookie_in_this_browser_is_refused_before_the_idp(web_proxy_factory, web_idp):
    """Login CSRF with the browser's own sign-ins in flight: the attacker's callback (their code and
    state, web or native) finds no cookie for its state here and is refused before any token request
    — and clears none of the browser's state cookies, whose sign-ins still complete."""
    p = web_proxy_factory()
    attacker = get(p, "/_oauth/start").one("location")
    web_target = "/_oauth/web_callback?" + urllib.parse.urlsplit(
        idp_login(web_idp, attacker, username="mallory@example.test")).query
    native_target = native_callback(attacker, native_grant(web_idp, attacker, username="mallory@example.test"))
    jar = Jar()
    mine = [start_in(p, jar, "/private/one"), start_in(p, jar, "/private/two")]
    web_idp.reset_stats()
    for target in (web_target, native_target):
        r = get(p, target, cookies=jar)
        assert r.status == 400, r
        assert "not started in this browser" in r.body.decode()
        assert not set_cookies(r), "neither a session nor any of this browser's state cookies cleared"
    assert web_idp.stats()["token"]["requests"] == 0
    for authorize in mine:
        r = jar.take(get(p, "/_oauth/web_callback?" + urllib.parse.urlsplit(idp_login(web_idp, authorize)).query,
                         cookies=jar))
        assert r.status == 302 and session_of(r), r


def test_at_most_five_state_cookies_live_in_one_browser_the_oldest_cleared_first(web_proxy_factory, web_idp):
    p = web_proxy_factory()
    jar = Jar({"unrelated": "kept"})
    starts = [start_in(p, jar, f"/private/{i}") for i in range(7)]
    assert list(state_cookies(jar)) == [state_cookie_name(a) for a in starts[2:]], "the 6th and 7th cleared the two oldest"
    assert jar["unrelated"] == "kept"
    web_idp.reset_stats()
    for authorize in starts[:2]:   # their cookies are gone: refused like any callback from elsewhere
        r = get(p, "/_oauth/web_callback?" + urllib.parse.urlsplit(idp_login(web_idp, authorize)).query, cookies=jar)
        assert r.status == 400, r
    assert web_idp.stats()["token"]["requests"] == 0
    for i, authorize in enumerate(starts[2:], start=2):
        r = jar.take(get(p, "/_oauth/web_callback?" + urllib.parse.urlsplit(idp_login(web_idp, authorize)).query,
                         cookies=jar))
        assert r.status == 302 and r.one("location") == f"/private/{i}", r
    assert not state_cookies(jar)


# -------------------------------------------------------------------------------------------------
# Sign-out: session cookies are SameSite=Lax, so a link from any site carries them; a sign-out
# that another site asked for (Sec-Fetch-Site: cross-site) is refused and the session kept.


def request(p, method, target, cookies=None, headers=()):
    h = list(headers)
    if cookies:
        h.append(("Cookie", "; ".join(f"{k}={v}" for k, v in cookies.items())))
    if method == "POST":
        h.append(("Content-Type", "application/x-www-form-urlencoded"))
    with HTTPConn(p.port) as c:
        c.request(method, target, headers=h, body=b"x=1" if method == "POST" else b"")
        return c.read_response(method=method)


@pytest.mark.parametrize("server_side", [False, True])
@pytest.mark.parametrize("method", ["GET", "POST"])
def test_a_sign_out_from_another_site_is_refused_and_the_session_kept(web_proxy_factory, web_idp, method, server_side):
    p = web_proxy_factory(server_side=server_side)
    r, _, _ = web_sign_in(p, web_idp)
    session = session_of(r)
    for fetch_site in ("cross-site", "Cross-Site", "something-else"):
        out = request(p, method, "/_oauth/sign_out?rd=/bye", cookies=session, headers=[("Sec-Fetch-Site", fetch_site)])
        assert out.status == 403, (fetch_site, out)
        assert not set_cookies(out), "the session cookie is kept"
        assert "still signed in" in out.body.decode()
        assert out.one("cache-control") == "no-store"
    assert get(p, "/_oauth/userinfo", cookies=session).status == 200, "the session still works"


@pytest.mark.parametrize("server_side", [False, True])
@pytest.mark.parametrize("method,fetch_site", [("GET", "same-origin"), ("GET", "same-site"), ("GET", "none"),
                                                ("GET", None), ("POST", "same-origin"), ("POST", None)])
def test_a_same_site_sign_out_or_one_without_fetch_metadata_signs_out(web_proxy_factory, web_idp, method, fetch_site,
                                                                      server_side):
    p = web_proxy_factory(server_side=server_side)
    r, _, _ = web_sign_in(p, web_idp)
    session = session_of(r)
    headers = [("Sec-Fetch-Site", fetch_site)] if fetch_site else []
    out = request(p, method, "/_oauth/sign_out?rd=/bye", cookies=session, headers=headers)
    assert out.status == 302 and out.one("location") == "/bye", out
    assert session_of(out) and all(v == "" for v in session_of(out).values()), "the session cookie is cleared"
    if server_side:   # the same cookie is worth nothing now
        assert get(p, "/_oauth/userinfo", cookies=session).status == 401


@pytest.mark.parametrize("method", ["HEAD", "PUT", "DELETE"])
def test_sign_out_answers_only_get_and_post(web_proxy_factory, web_idp, method):
    p = web_proxy_factory(server_side=True)
    r, _, _ = web_sign_in(p, web_idp)
    session = session_of(r)
    out = request(p, method, "/_oauth/sign_out", cookies=session)
    assert out.status == 405 and out.one("allow") == "GET, POST", out
    assert not set_cookies(out)
    assert get(p, "/_oauth/userinfo", cookies=session).status == 200


def test_a_denied_web_sign_in_lands_on_the_error_url(web_proxy_factory, web_idp):
    p = web_proxy_factory()
    start = get(p, "/_oauth/start")
    back = idp_login(web_idp, start.one("location"), action="deny")
    r = get(p, "/_oauth/web_callback?" + urllib.parse.urlsplit(back).query, cookies=set_cookies(start))
    assert r.status == 302, r
    assert r.one("location") == "/signin-failed?error=access_denied"
    assert state_cookies(set_cookies(r)) == {k: "" for k in state_cookies(set_cookies(start))}
    assert not session_of(r)


def test_session_endpoints_are_the_oauth_route_and_only_the_callback_path_is_the_callback_route(web_proxy_factory, web_idp):
    """The route is decided once per request (`RequestContext`), when its head arrives: every
    `/_oauth/…` answer is `oauth` in the request metrics, whatever its status, and
    `/_oauth_callback` alone is `callback`; `/_oauthx` is proxied like any other path."""
    from test_observability import samples, scrape, value
    p = web_proxy_factory()
    r, _, _ = web_sign_in(p, web_idp)                                  # /_oauth/start 302, web_callback 302
    assert r.status == 302 and session_of(r)
    assert get(p, "/_oauth/web_callback?code=a&state=s").status == 400  # no state cookie
    assert get(p, "/_oauth_callback?provider=google").status == 400
    assert get(p, "/_oauthx").status == 404  # the app's own answer
    s = samples(scrape(p))
    assert value(s, "callback_proxy_requests_total", route="oauth", code_class="3xx") == 2
    assert value(s, "callback_proxy_requests_total", route="oauth", code_class="4xx") == 1
    assert value(s, "callback_proxy_requests_total", route="callback", code_class="4xx") == 1
    assert value(s, "callback_proxy_requests_total", route="proxied", code_class="4xx") == 1


def test_the_rate_limit_covers_the_web_callback_too(web_proxy_factory, web_idp):
    p = web_proxy_factory(rate_limit="1/m")
    r, _, _ = web_sign_in(p, web_idp)
    assert r.status == 302 and session_of(r)
    web_idp.reset_stats()
    start = get(p, "/_oauth/start")
    r = get(p, "/_oauth/web_callback?code=abc&state=s", cookies=set_cookies(start))
    assert r.status == 429 and r.one("retry-after") == "60"
    assert web_idp.stats()["token"]["requests"] == 0
    # /_oauth/start itself is not limited: it costs nothing but a cookie.
    assert get(p, "/_oauth/start").status == 302


@pytest.mark.parametrize("query", ["", "code=abc", "state=abc", "code=a&code=b&state=s", "code=a&error=x&state=s"])
def test_malformed_web_callbacks_are_refused(web_proxy_factory, web_idp, query):
    p = web_proxy_factory()
    start = get(p, "/_oauth/start")
    web_idp.reset_stats()
    r = get(p, "/_oauth/web_callback?" + query, cookies=set_cookies(start))
    assert r.status == 400, r
    assert web_idp.stats()["token"]["requests"] == 0
    assert "abc" not in p.stderr_text()


def test_the_web_callback_only_accepts_get(web_proxy_factory):
    p = web_proxy_factory()
    with HTTPConn(p.port) as c:
        c.request("POST", "/_oauth/web_callback?code=a&state=b", headers=[("Content-Length", "0")])
        r = c.read_response()
    assert r.status == 405
