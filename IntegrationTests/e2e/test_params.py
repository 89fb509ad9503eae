"""CallbackProxy's `params` hand-off, end to end: the proxy redeems the native code itself and
forwards the app's own callback with `access_token`, `id_token`, `token_type`, `expires_in` and
`state`; the app's strategy (rails_app/lib/omniauth/strategies/google_params.rb, the token path
of omniauth-google-oauth2 with `authorized_client_ids` = the native client ids) checks `state`
against its session, verifies the id_token and signs the user in. The app's token URL is the
IdP's own: this mode changes no token URL.

Each test asserts on what the *app* shows, as test_relay.py does.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

import pytest
import requests
from selenium.webdriver.common.by import By

from harness import ANDROID_CLIENT, IOS_CLIENT, PARAMS_CALLBACK, PARAMS_PROVIDER, WEB_CLIENT
from site_pages import alert, body, notice, open_home, sign_ins, status, wait_home

FAILURE = "Could not authenticate you from GoogleParams because"
SUCCESS = "Successfully authenticated from Google account."
NATIVE_ID = {"ios": IOS_CLIENT, "android": ANDROID_CLIENT}


def tap_sign_in_params(driver):
    """Tap the site's second button, "Sign in with Google (token hand-off)" (OmniAuth 2 POST)."""
    driver.find_element(By.ID, "sign-in-google-params").click()


def params_wrapper(wrapper_factory, proxy):
    return wrapper_factory(proxy, provider=PARAMS_PROVIDER)   # /_oauth_callback?provider=google_params&…


def params_sign_in(webview, proxy, wrapper, platform, username, action="approve"):
    open_home(webview, proxy.url)
    assert status(webview) == "Not signed in"
    tap_sign_in_params(webview)
    result = wrapper.sign_in(platform, username=username, action=action)
    wait_home(webview)
    return result


def issued_since(idp, before: dict, kind: str) -> list[str]:
    values = idp.issued_secrets().get(kind, [])
    return values[len(before.get(kind, [])):]


def callback_reasons(proxy) -> list[str]:
    return [e.get("reason", "verified") for e in proxy.log_events()
            if e.get("msg") in ("callback verified", "callback failed")]


@pytest.mark.parametrize("platform", ["ios", "android"])
def test_native_sign_in_hands_the_tokens_to_the_apps_strategy(webview, params_proxy,
                                                              wrapper_factory, idp, token_tap,
                                                              platform, username):
    before = idp.issued_secrets()
    wrapper = params_wrapper(wrapper_factory, params_proxy)
    result = params_sign_in(webview, params_proxy, wrapper, platform, username)

    # What the app shows: its own page, the user signed in once, Devise's success flash.
    assert webview.current_url == params_proxy.url + "/"
    assert status(webview) == f"Signed in as {username}"
    assert sign_ins(webview) == 1
    assert notice(webview) == SUCCESS

    # How it got there: the app's strategy started the sign-in (its own callback, the web
    # client), the proxy redeemed the native code once, and nobody redeemed anything else — the
    # app took the tokens as they came (no relay code, no token request of its own).
    assert result.intercepted_url.startswith(idp.discovery()["authorization_endpoint"])
    assert f"redirect_uri=http%3A%2F%2F127.0.0.1%3A{params_proxy.port}" \
        f"{PARAMS_CALLBACK.replace('/', '%2F')}" in result.intercepted_url
    stats = idp.stats()
    native = stats["clients"][NATIVE_ID[platform]]
    assert (stats["token"]["requests"], native["successes"]) == (1, 1), stats["events"]
    assert WEB_CLIENT not in stats["clients"]
    assert token_tap.records == []
    assert stats["endpoints"]["userinfo"] == 1       # the strategy's identity, with the token
    [access_token] = issued_since(idp, before, "access_token")
    [id_token] = issued_since(idp, before, "id_token")
    assert idp.verify_id_token(id_token, NATIVE_ID[platform])["email"] == username

    # The tokens went from the proxy to the app, never through the browser.
    assert not [u for u in wrapper.seen_by_webview if access_token in u or id_token in u]
    assert any("/_oauth_callback?" in u for u in wrapper.seen_by_webview)
    assert callback_reasons(params_proxy) == ["verified"]


def test_the_same_callback_twice_signs_in_once(webview, params_proxy, wrapper_factory, idp,
                                               username):
    """The WebView loads the same callback again (a reload, a restored WebView): the proxy's
    replay guard refuses the code before any IdP call and hands the failure to the app's
    callback (docs/handoff.md); OmniAuth finds the state used up and fails cleanly, and the
    user, still signed in from the first load, is not signed in a second time."""
    wrapper = params_wrapper(wrapper_factory, params_proxy)
    result = params_sign_in(webview, params_proxy, wrapper, "ios", username)
    assert status(webview) == f"Signed in as {username}" and sign_ins(webview) == 1

    wrapper.load(result.callback_url)
    wait_home(webview, "the app's failure page")
    assert webview.current_url == params_proxy.url + "/"
    assert alert(webview) == f'{FAILURE} "Csrf detected".', body(webview)
    assert status(webview) == f"Signed in as {username}"
    assert sign_ins(webview) == 1, "the replayed callback signed the user in a second time"
    assert idp.stats()["token"]["requests"] == 1, "the code was presented to the IdP twice"
    assert callback_reasons(params_proxy) == ["verified", "replayed_code"]


def test_denied_sign_in_lands_on_the_apps_failure_page(webview, params_proxy, wrapper_factory,
                                                       idp, username):
    wrapper = params_wrapper(wrapper_factory, params_proxy)
    result = params_sign_in(webview, params_proxy, wrapper, "ios", username, action="deny")
    assert result.error == "access_denied"
    assert status(webview) == "Not signed in"
    assert alert(webview) == f'{FAILURE} "Access denied".'
    assert idp.stats()["token"]["requests"] == 0


def test_an_id_token_for_another_audience_is_refused_by_the_proxy(webview, params_proxy,
                                                                  wrapper_factory, idp,
                                                                  username):
    """The IdP answers the native exchange with a genuinely signed id_token whose audience is
    another client: the proxy's own verification refuses it and the app's failure path says so;
    the tokens are never handed to the app."""
    idp.set_mode(id_token="wrong_audience")
    wrapper = params_wrapper(wrapper_factory, params_proxy)
    params_sign_in(webview, params_proxy, wrapper, "ios", username)
    assert status(webview) == "Not signed in"
    assert alert(webview) == f'{FAILURE} "Invalid id token".'
    assert idp.stats()["token"]["successes"] == 1          # the IdP did answer, with that token
    assert idp.stats()["endpoints"]["userinfo"] == 0        # the app never got a token to use
    assert callback_reasons(params_proxy) == ["invalid_id_token"]


# -------------------------------------------------------------------------------------------------
# The app's own check, without the proxy's: tokens sent straight to its callback


def start_in_own_session(s: requests.Session, proxy) -> str:
    """An attacker's own browser session on the site: start a google_params sign-in (so the
    session holds a state, and the CSRF check passes) and return that state."""
    action = f"/users/auth/{PARAMS_PROVIDER}"
    home = s.get(proxy.url + "/", timeout=10)
    # Rails' per-form CSRF tokens: the one in this button's own form.
    form = home.text.split(f'action="{action}"', 1)[1]
    token = form.split('name="authenticity_token" value="', 1)[1].split('"', 1)[0]
    start = s.post(proxy.url + action, data={"authenticity_token": token},
                   allow_redirects=False, timeout=10)
    assert start.status_code == 302, start.text[:500]
    return parse_qs(urlsplit(start.headers["Location"]).query)["state"][0]


def native_tokens(idp, username) -> dict:
    """A token response the IdP issued to the iOS client (whatever id_token mode is set)."""
    resp = idp.exchange(idp.get_code(IOS_CLIENT, username=username))
    assert resp.status_code == 200, resp.text
    return resp.json()


def present(s: requests.Session, proxy, tokens: dict, state: str) -> str:
    """GET the app's callback with the tokens, as the proxy's params hand-off would; returns the
    home page the app redirected to."""
    fields = {k: tokens[k] for k in ("access_token", "id_token", "token_type", "expires_in")}
    page = s.get(proxy.url + PARAMS_CALLBACK, params={**fields, "state": state}, timeout=15)
    assert page.status_code == 200 and 'id="status"' in page.text, page.text[:800]
    return page.text


def shown(page: str, element_id: str) -> str | None:
    m = re.search(rf'id="{element_id}">([^<]*)<', page)
    return m and m.group(1).replace("&quot;", '"').replace("&#39;", "'")


def test_the_apps_strategy_accepts_only_tokens_of_its_authorized_clients(params_proxy, idp,
                                                                         username):
    """Straight at the app's callback (plain traffic through the proxy, no /_oauth_callback):
    a genuinely signed id_token for another audience is refused, and so is a genuine id_token
    presented with someone else's access token; the same request with a matching native token
    pair signs in — so the refusals are the audience and the at_hash binding, nothing else."""
    with requests.Session() as s:
        idp.set_mode(id_token="wrong_audience")
        foreign = native_tokens(idp, username)
        idp.set_mode(id_token="ok")
        page = present(s, params_proxy, foreign, start_in_own_session(s, params_proxy))
        assert shown(page, "alert") == f'{FAILURE} "Id token not issued to an authorized client".'
        assert shown(page, "status") == "Not signed in"

        mine, theirs = native_tokens(idp, username), native_tokens(idp, "other-" + username)
        swapped = {**mine, "access_token": theirs["access_token"]}
        page = present(s, params_proxy, swapped, start_in_own_session(s, params_proxy))
        assert shown(page, "alert") == f'{FAILURE} "Access token not the id token\'s".'
        assert shown(page, "status") == "Not signed in"

        page = present(s, params_proxy, mine, start_in_own_session(s, params_proxy))
        assert shown(page, "status") == f"Signed in as {username}", page[:800]
