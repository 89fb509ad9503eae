"""Hand-back (`strategy: hand_back`): no native client. The flow opens the site's own provider URL,
unchanged, in the system browser; the browser signs in at the IdP with the site's *web* client and
is redirected to the site's own callback on the site's origin — the https URL the app claims as a
universal link / App Link. The app hands that link to its flow, which loads it into the WebView, where
the unchanged Rails app finishes its ordinary OmniAuth callback (its state and PKCE verifier are in
the WebView's session). The proxy is a plain reverse proxy here: hand-back needs none of its hand-off
features. Both platforms, each by its own simulator (conftest.py's flow_factory).

| test | the app shows |
| --- | --- |
| the redirect comes back as a universal link / App Link (`open_link`) | links on another path or origin not handled (the sign-in still runs); the site's callback loaded once, signed in, 1 sign-in, Devise's flash; the same link again not handled, nothing loaded; the IdP saw only the web client |
| the browser session catches the https redirect itself (`browser_complete`, iOS 17.4's `.https(host:path:)`; iOS only) | signed in; a second completion does nothing |
| a link with another sign-in's code and state (the attacker's own, from their browser session) | the flow loads the site's callback with `error=state_mismatch` and the app's own state, never the attacker's code: the app's failure page, not signed in, no token request |
"""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest
import requests

from harness import APP_CALLBACK, PARAMS_CALLBACK, WEB_CLIENT
from native_sim import PLATFORMS
from site_pages import alert, notice, open_home, sign_ins, status, tap_sign_in, wait_for

SUCCESS = "Successfully authenticated from Google account."
FAILURE = "Could not authenticate you from GoogleOauth2 because"

pytestmark = pytest.mark.parametrize("platform", PLATFORMS)


@pytest.fixture
def plain_proxy(proxy_factory, rails):
    """The proxy with no providers, in front of the app as it was (its own token URL)."""
    return proxy_factory(None, upstream=rails.plain.url)


def signed_in(webview, username):
    wait_for(webview, lambda d: status(d) == f"Signed in as {username}", f"the app to show {username}")


def assert_the_sites_own_request(url, proxy):
    """The URL the flow opened is the site's: its web client and its callback on the site's origin."""
    q = parse_qs(urlsplit(url).query)
    assert q["client_id"] == [WEB_CLIENT]
    assert q["redirect_uri"] == [proxy.url + APP_CALLBACK]
    assert "code_challenge" in q and "state" in q


def test_hand_back_through_a_universal_link_signs_in_once(webview, plain_proxy, flow_factory, idp,
                                                          username, platform):
    app = flow_factory(plain_proxy, platform, strategy="hand_back", https_callbacks=False,
                       link_paths=[APP_CALLBACK])
    open_home(webview, plain_proxy.url)
    tap_sign_in(webview)
    opened = app.wait_for(lambda e: e["event"] == "external_browser_opened", "the default browser opened")
    assert_the_sites_own_request(opened["url"], plain_proxy)
    assert idp.stats()["authorize"]["requests"] == 0, "the WebView's navigation reached the IdP"

    link = app.site_idp(opened["url"], username=username)   # the browser reaches the site's callback
    parts = urlsplit(link)
    assert f"{parts.scheme}://{parts.netloc}{parts.path}" == plain_proxy.url + APP_CALLBACK

    # Links the app does not claim for this sign-in: another callback path, another origin.
    other_path = parts._replace(path=PARAMS_CALLBACK).geturl()
    other_origin = parts._replace(netloc=f"localhost:{parts.port}").geturl()
    for foreign in (other_path, other_origin):
        assert app.open_link(foreign) == {"handled": False, "events": []}, foreign

    answer = app.open_link(link)
    assert answer["handled"] is True
    assert [(e["event"], e.get("url"), e.get("session"), e.get("outcome")) for e in answer["events"]] == \
        [("load", link, None, None), ("outcome", None, "s1", "completed")]
    signed_in(webview, username)
    assert sign_ins(webview) == 1
    assert notice(webview) == SUCCESS

    # Delivered again (the OS retried, the user tapped the link twice): not the flow's any more.
    assert app.open_link(link) == {"handled": False, "events": []}
    assert app.loads == [link]
    open_home(webview, plain_proxy.url)
    assert status(webview) == f"Signed in as {username}" and sign_ins(webview) == 1

    stats = idp.stats()
    assert set(stats["clients"]) == {WEB_CLIENT}, "only the site's web client was used"
    assert (stats["clients"][WEB_CLIENT]["successes"], stats["token"]["requests"]) == (1, 1)


def test_hand_back_through_the_browsers_https_callback_signs_in(webview, plain_proxy, flow_factory, idp,
                                                                username, platform):
    if platform == "android":
        pytest.skip("iOS 17.4's .https(host:path:) only: the Android glue always takes the App Link")
    app = flow_factory(plain_proxy, platform, strategy="hand_back", link_paths=[APP_CALLBACK])
    open_home(webview, plain_proxy.url)
    tap_sign_in(webview)
    started = app.started("s1")
    assert started["callback"] == {"https": {"host": "127.0.0.1", "path": APP_CALLBACK}}
    assert (started["client_id"], started["redirect_uri"], started["code_verifier"]) == (None, None, None)
    assert_the_sites_own_request(started["url"], plain_proxy)

    redirect = app.site_idp(started["url"], username=username)
    events = app.complete("s1", {"redirect": redirect})
    assert [(e["event"], e.get("url"), e.get("session"), e.get("outcome")) for e in events] == \
        [("load", redirect, None, None), ("outcome", None, "s1", "completed")]
    assert app.complete("s1", {"redirect": redirect}) == []
    signed_in(webview, username)
    assert sign_ins(webview) == 1
    assert app.loads == [redirect]
    assert set(idp.stats()["clients"]) == {WEB_CLIENT}


def test_a_link_of_another_sign_in_signs_nobody_in(webview, plain_proxy, flow_factory, idp, username, platform):
    """Login CSRF through the link: the attacker signs in in their own browser session and gets
    the victim's app to open the resulting callback link while the victim's sign-in runs."""
    with requests.Session() as attacker:
        home = attacker.get(plain_proxy.url + "/", timeout=10)
        token = home.text.split('name="authenticity_token" value="', 1)[1].split('"', 1)[0]
        start = attacker.post(plain_proxy.url + "/users/auth/google_oauth2",   # the site's button
                              data={"authenticity_token": token}, allow_redirects=False, timeout=10)
        assert start.status_code == 302, start.text[:500]
    app = flow_factory(plain_proxy, platform, strategy="hand_back", https_callbacks=False,
                       link_paths=[APP_CALLBACK])
    theirs = app.site_idp(start.headers["Location"], username="mallory-" + username)
    their_code = parse_qs(urlsplit(theirs).query)["code"][0]

    open_home(webview, plain_proxy.url)
    tap_sign_in(webview)
    opened = app.wait_for(lambda e: e["event"] == "external_browser_opened", "the default browser opened")
    ours = parse_qs(urlsplit(opened["url"]).query)["state"][0]
    answer = app.open_link(theirs)
    assert answer["handled"] is True
    [load, outcome] = answer["events"]
    assert (outcome["outcome"], outcome["reason"]) == ("failed", "state_mismatch")
    assert parse_qs(urlsplit(load["url"]).query) == {"error": ["state_mismatch"], "state": [ours]}
    wait_for(webview, lambda d: alert(d), "the app's failure page")
    assert alert(webview).startswith(FAILURE), alert(webview)
    assert status(webview) == "Not signed in"
    assert not [u for u in app.loads if their_code in u]
    assert idp.stats()["token"]["requests"] == 0
