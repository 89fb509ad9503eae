"""The app's lifecycle mid sign-in, against the real proxy, Rails site and IdP, on both platforms
(sim-protocol.md's lifecycle ops). docs/native.md, "The phone's lifecycle".

Android (the JVM core's simulator: `activity_result`, `activity_recreated`, `process_restarted`):

| test | the app shows |
| --- | --- |
| the activity recreated (rotation) while the Custom Tab is in front | signed in, once, from the result delivered to the new activity |
| the process restarted without saved state while the Custom Tab is in front | signed in from the result intent alone (AppAuth's returned request carries state, client and verifier) |
| the same, the user closing the Custom Tab | nothing loaded, outcome `lost` / `no_state` (a cancel carries no state to build the site's failure callback from), not signed in |
| a double tap: the first launch's RESULT_CANCELED arriving after the second launch | ignored; the second launch's code signs the user in |
| hand-back: the activity recreated while the default browser is in front | the App Link still taken, the site's callback loaded, signed in |

iOS (the Swift simulator: the flow outlives the view; ASWebAuthenticationSession dies with the
process, which names it at the next launch from what the app kept in UserDefaults):

| test | the app shows |
| --- | --- |
| the view showing the WebView made again while the browser sheet is up | signed in, once, in the new WebView |
| the process ended while the browser sheet is up | the site's failure page (`error=sign_in_failed`, outcome `failed` / `process_ended`): the session's result can never come; the next tap signs in |
| a double tap: the first session's cancel arriving after the second started | ignored; the second session's code signs the user in |
| hand-back: the process ended while the default browser is in front | the universal link still taken by the new process, signed in |
"""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest

from harness import APP_CALLBACK
from native_sim import SimError
from site_pages import alert, open_home, sign_ins, status, tap_sign_in, wait_for, wait_home


def returned_request(started: dict) -> dict:
    """What AppAuth returns with a response it accepted: the request the launch sent."""
    return {name: started[name] for name in ("state", "client_id", "redirect_uri", "code_verifier")}


def summary(events):
    return [(e["event"], e.get("session"), e.get("outcome")) for e in events]


def mid_sign_in(webview, proxy, app, username):
    """The user taps sign-in and gets through the IdP's form in the browser: s1's start and the
    redirect that browser now holds."""
    open_home(webview, proxy.url)
    tap_sign_in(webview)
    started = app.started("s1")
    return started, app.idp(started, username=username)


def assert_signed_in_once(webview, app, idp, username, state):
    wait_home(webview)
    assert status(webview) == f"Signed in as {username}"
    assert sign_ins(webview) == 1
    [load] = app.loads
    assert parse_qs(urlsplit(load).query)["state"] == [state]
    assert idp.stats()["token"]["requests"] == 1


@pytest.mark.parametrize("platform", ["android", "ios"])
def test_rotation_mid_sign_in_signs_the_user_in(webview, relay_proxy, flow_factory, idp, username, platform):
    """Android: the activity recreated, the result delivered to the new one; iOS: the view made
    again while the flow lives on, the session's completion loading into the new WebView."""
    app = flow_factory(relay_proxy, platform)
    started, redirect = mid_sign_in(webview, relay_proxy, app, username)
    recreated = app.activity_recreated()
    assert recreated["events"] == []
    assert started["code_verifier"] not in recreated["saved"]
    if platform == "android":
        events = app.activity_result(redirect, returned_request(started))
    else:
        events = app.complete("s1", redirect)
    assert summary(events) == [("load", None, None), ("outcome", "s1", "completed")]
    assert_signed_in_once(webview, app, idp, username, started["state"])


def test_process_death_mid_sign_in_signs_the_user_in_from_the_result_alone(
        webview, relay_proxy, flow_factory, idp, username):
    app = flow_factory(relay_proxy, "android")
    started, redirect = mid_sign_in(webview, relay_proxy, app, username)
    assert app.process_restarted() == {"events": [], "saved": None}
    events = app.activity_result(redirect, returned_request(started))
    assert summary(events) == [("load", None, None), ("outcome", None, "completed")]
    assert_signed_in_once(webview, app, idp, username, started["state"])


def test_process_death_then_a_cancel_is_lost_and_loads_nothing(webview, relay_proxy, flow_factory, idp, username):
    app = flow_factory(relay_proxy, "android")
    open_home(webview, relay_proxy.url)
    tap_sign_in(webview)
    started = app.started("s1")
    assert app.idp(started, username=username, action="cancel") == "cancelled"
    app.process_restarted()
    assert app.activity_result("cancelled") == [
        {"event": "outcome", "session": None, "outcome": "lost", "reason": "no_state"}]
    assert app.loads == []
    open_home(webview, relay_proxy.url)
    assert status(webview) == "Not signed in"
    assert idp.stats()["token"]["requests"] == 0


@pytest.mark.parametrize("platform", ["android", "ios"])
def test_a_double_tap_signs_in_with_the_second_code(webview, relay_proxy, flow_factory, idp, username, platform):
    app = flow_factory(relay_proxy, platform)
    open_home(webview, relay_proxy.url)
    tap_sign_in(webview)
    first = app.started("s1")
    app.idp(first, username=username)               # the first browser got that far
    tap_sign_in(webview)
    second = app.started("s2")
    assert second["state"] != first["state"]
    redirect = app.idp(second, username=username)
    if platform == "android":
        # Bringing the app back to the top finished the first launch's activity: RESULT_CANCELED,
        # no data, delivered after the second launch. It must not end the second sign-in.
        assert app.activity_result("finished") == []
        events = app.activity_result(redirect, returned_request(second))
    else:
        # The flow cancelled the first session; its completion says so after the second started.
        assert app.complete("s1", "cancelled") == []
        events = app.complete("s2", redirect)
    assert summary(events) == [("load", None, None), ("outcome", "s2", "completed")]
    assert_signed_in_once(webview, app, idp, username, second["state"])


@pytest.fixture
def plain_proxy(proxy_factory, rails):
    """The proxy with no providers, in front of the app as it was (hand-back needs none)."""
    return proxy_factory(None, upstream=rails.plain.url)


# Android: rotation (a hand-back does not survive Android's process restart: its saved state is
# gone); iOS: the process ended, Safari living on outside the app.
@pytest.mark.parametrize("platform,event", [("android", "activity_recreated"), ("ios", "process_restarted")],
                         ids=["android_rotation", "ios_process_death"])
def test_hand_back_in_the_default_browser_survives_and_signs_in_through_the_link(
        webview, plain_proxy, flow_factory, username, platform, event):
    app = flow_factory(plain_proxy, platform, strategy="hand_back", https_callbacks=False, link_paths=[APP_CALLBACK])
    open_home(webview, plain_proxy.url)
    tap_sign_in(webview)
    opened = app.wait_for(lambda e: e["event"] == "external_browser_opened", "the default browser opened")
    link = app.site_idp(opened["url"], username=username)
    assert getattr(app, event)()["events"] == []
    answer = app.open_link(link)
    assert answer["handled"] is True
    assert summary(answer["events"]) == [("load", None, None), ("outcome", "s1", "completed")]
    wait_for(webview, lambda d: status(d) == f"Signed in as {username}", f"the app to show {username}")
    assert sign_ins(webview) == 1


# -- iOS -----------------------------------------------------------------------------------------

FAILURE = 'Could not authenticate you from GoogleOauth2 because "Sign in failed".'


def test_ios_process_death_mid_sign_in_lands_on_the_sites_failure_page(
        webview, relay_proxy, flow_factory, idp, username):
    app = flow_factory(relay_proxy, "ios")
    started, redirect = mid_sign_in(webview, relay_proxy, app, username)   # that far in the sheet
    restarted = app.process_restarted()
    assert started["code_verifier"] not in restarted["saved"]
    assert summary(restarted["events"]) == [("load", None, None), ("outcome", "s1", "failed")]
    assert restarted["events"][1]["reason"] == "process_ended"
    [load] = app.loads
    query = parse_qs(urlsplit(load).query)
    assert (query["error"], query["state"]) == (["sign_in_failed"], [started["state"]])
    wait_home(webview, "the app's failure page")
    assert status(webview) == "Not signed in"
    assert alert(webview) == FAILURE
    with pytest.raises(SimError, match='no browser session "s1"'):
        app.complete("s1", redirect)                          # it ended with the old process
    assert idp.stats()["token"]["requests"] == 0

    tap_sign_in(webview)                                      # the next tap signs in
    second = app.started("s2")
    events = app.complete("s2", app.idp(second, username=username))
    assert summary(events) == [("load", None, None), ("outcome", "s2", "completed")]
    wait_for(webview, lambda d: status(d) == f"Signed in as {username}", f"the app to show {username}")
    assert sign_ins(webview) == 1
    assert idp.stats()["token"]["requests"] == 1
