"""Self-checks of the end-to-end harness, independent of the proxy's hand-off modes: the legacy app
signs a real browser in at the strict IdP (directly, and through the proxy as a plain reverse
proxy), and the wrapper intercepts the WebView's navigation and obtains a native code that the IdP
redeems. When one of these fails, the relay scenarios' failures say nothing about the proxy."""

from urllib.parse import parse_qs, parse_qsl, urlsplit

import pytest

from harness import APP_CALLBACK, NATIVE, WEB_CLIENT
from idp_harness import CodeGrant
from native_sim import PLATFORMS, SimError, build_config, write_plists
from site_pages import (alert, idp_login, notice, open_home, sign_ins, status, tap_sign_in,
                        tap_sign_out, wait_home)


def test_app_signs_in_at_the_idp_without_the_proxy(webview, rails, idp, app_logs, username):
    """The legacy app on its own: OmniAuth 2 POST + CSRF, the IdP's login page, PKCE, the web
    client's client_secret_post, userinfo, Devise's session — then sign-out."""
    open_home(webview, rails.plain.url)
    assert status(webview) == "Not signed in"
    tap_sign_in(webview)
    redirect_uri = idp_login(webview, username)
    assert redirect_uri == f"{rails.plain.url}{APP_CALLBACK}"
    wait_home(webview)
    assert status(webview) == f"Signed in as {username}"
    assert notice(webview) == "Successfully authenticated from Google account."
    assert sign_ins(webview) == 1
    web = idp.stats()["clients"][WEB_CLIENT]
    assert (web["requests"], web["successes"]) == (1, 1)
    assert idp.stats()["endpoints"]["userinfo"] == 1
    tap_sign_out(webview)
    assert status(webview) == "Not signed in"


def test_app_failure_page_shows_the_reason(webview, rails, idp, app_logs, username):
    """Denying at the IdP lands on the app's own failure path, which shows the reason."""
    open_home(webview, rails.plain.url)
    tap_sign_in(webview)
    idp_login(webview, username, action="deny")
    wait_home(webview)
    assert status(webview) == "Not signed in"
    assert alert(webview) == ('Could not authenticate you from GoogleOauth2 because "The resource '
                              'owner or authorization server denied the request".')   # the IdP's
                                                                       # error_description


def test_web_sign_in_through_a_plain_proxy(webview, rails, idp, proxy_factory, username):
    """The proxy with no providers in front of the app before CallbackProxy's setting: the
    callback URL the app builds carries the proxy's Host (preserved), and the sign-in works."""
    proxy = proxy_factory(None, upstream=rails.plain.url)
    open_home(webview, proxy.url)
    tap_sign_in(webview)
    assert idp_login(webview, username) == f"{proxy.url}{APP_CALLBACK}"
    wait_home(webview)
    assert webview.current_url == proxy.url + "/"
    assert status(webview) == f"Signed in as {username}"
    assert sign_ins(webview) == 1


@pytest.mark.parametrize("platform", ["ios", "android"])
def test_wrapper_intercepts_and_signs_in_natively(webview, rails, idp, proxy_factory,
                                                  wrapper_factory, platform, username):
    """The library stops the WebView's navigation to the IdP (which never sees it) and lets the
    site's own pages load, restarts it with the native client (its allowlist, its PKCE), and
    builds a callback whose code the IdP redeems for the native client with the library's
    verifier. Each app's client comes from its platform's settings (the iOS app's
    GoogleService-Info.plist, the Android app's BuildConfig GOOGLE_CLIENT_ID); its library derives
    the redirect."""
    proxy = proxy_factory(None, upstream=rails.plain.url)
    wrapper = wrapper_factory(proxy)
    client_id, redirect_uri = NATIVE[platform]
    [configured] = wrapper.apps[platform]["providers"]
    assert (configured["name"], configured["client_id"], configured["redirect_uri"]) == \
        ("google", client_id, redirect_uri)
    open_home(webview, proxy.url)
    tap_sign_in(webview)
    web_url = wrapper.wait_for_authorization()
    assert idp.stats()["authorize"]["requests"] == 0, "the WebView's navigation reached the IdP"
    wait_home(webview, "the WebView to stay on the site")
    assert webview.current_url == proxy.url + "/"
    assert proxy.url + "/" in wrapper.passed_through, "the library stopped the site's own page"

    web = dict(parse_qsl(urlsplit(web_url).query))
    assert web["client_id"] == WEB_CLIENT
    assert web["redirect_uri"] == f"{proxy.url}{APP_CALLBACK}"
    assert {"state", "scope", "code_challenge", "access_type", "prompt"} <= set(web)

    result = wrapper.system_browser_sign_in(web_url, platform, username=username)
    native = dict(parse_qsl(urlsplit(result.outbound_url).query))
    assert native == {
        "client_id": client_id, "redirect_uri": redirect_uri, "response_type": "code",
        "scope": web["scope"], "state": web["state"], "access_type": web["access_type"],
        "prompt": web["prompt"], "code_challenge": native["code_challenge"],
        "code_challenge_method": "S256"}
    assert native["code_challenge"] != web["code_challenge"]

    cb = urlsplit(result.callback_url)
    assert f"{cb.scheme}://{cb.netloc}{cb.path}" == f"{proxy.url}/_oauth_callback"
    fields = parse_qsl(cb.query)
    assert [k for k, _ in fields] == ["provider", "platform", "client_id", "redirect_uri", "code",
                                      "state", "code_verifier"]
    q = dict(fields)
    assert (q["provider"], q["platform"], q["client_id"], q["redirect_uri"], q["state"]) == \
        ("google", platform, client_id, redirect_uri, web["state"])

    grant = CodeGrant(client_id=client_id, redirect_uri=redirect_uri, code=q["code"],
                      state=q["state"], code_verifier=q["code_verifier"], code_challenge=None,
                      nonce=None, scope=web["scope"], location="")
    resp = idp.exchange(grant)
    assert resp.status_code == 200, resp.text
    claims = idp.verify_id_token(resp.json()["id_token"], client_id)
    assert claims["email"] == username


def test_wrapper_denial_callback(webview, rails, idp, proxy_factory, wrapper_factory, username):
    """Deny in the system browser: the callback carries error=access_denied and the state, no
    code and no verifier."""
    proxy = proxy_factory(None, upstream=rails.plain.url)
    wrapper = wrapper_factory(proxy)
    open_home(webview, proxy.url)
    tap_sign_in(webview)
    web_url = wrapper.wait_for_authorization()
    result = wrapper.system_browser_sign_in(web_url, "ios", username=username, action="deny")
    q = parse_qs(urlsplit(result.callback_url).query)
    assert q["error"] == ["access_denied"]
    assert q["state"] == parse_qs(urlsplit(web_url).query)["state"]
    assert "code" not in q and "code_verifier" not in q
    assert idp.stats()["authorize"]["denied"] == 1


@pytest.mark.parametrize("platform", PLATFORMS)
def test_the_sim_answers_with_the_librarys_decisions(simulators, tmp_path, platform):
    """Each platform's simulator without a browser: sign-in off in the app's settings (OAuthEnabled
    NO in the Info.plist; OAUTH_ENABLED false in BuildConfig) turns interception off (the library
    gives no interceptor, so everything loads); with it on, a provider URL without `state` is
    refused, a subframe is left alone, and the sim refuses what its protocol does not know rather
    than guess."""
    endpoint = "https://127.0.0.1:1/authorize"
    provider = {"name": "google", "authorization_endpoint": endpoint, "client_id": NATIVE[platform][0],
                "redirect_uri": NATIVE[platform][1], "pkce": True}

    def app(enabled: bool, name: str) -> dict:
        if platform == "ios":
            return write_plists(tmp_path / name, oauth_enabled="YES" if enabled else "NO")
        return {"build_config": build_config(oauth_enabled=enabled)}

    off = simulators.start(platform, tmp_path / "off.log")
    on = simulators.start(platform, tmp_path / "on.log")
    try:
        assert off.configure(platform=platform, providers=[provider], **app(False, "off"))["enabled"] is False
        assert off.decide(endpoint + "?state=s")["decision"] == "allow"
        on.configure(platform=platform, providers=[provider], **app(True, "on"))
        refused = on.decide(endpoint + "?client_id=web")
        assert (refused["decision"], refused["key"]) == ("refuse", "state")
        assert on.decide(endpoint + "?state=s", "subframe")["decision"] == "allow"
        with pytest.raises(SimError, match="unknown field"):
            on.call(op="decide", url=endpoint, target="mainFrame", platform=platform)
        with pytest.raises(SimError, match="no sign-in under way"):
            on.callback("r9", "http://127.0.0.1:1/", "cancelled")
    finally:
        off.close()
        on.close()
