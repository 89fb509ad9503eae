"""The phone's lifecycle mid sign-in, against the real proxy, Rails site and IdP — Android only (the
JVM core's simulator: `activity_result`, `activity_recreated`, `process_restarted` of sim-protocol.md;
iOS has no activity results and no activity to recreate). docs/native.md, "The phone's lifecycle".

| test | the app shows |
| --- | --- |
| the activity recreated (rotation) while the Custom Tab is in front | signed in, once, from the result delivered to the new activity |
| the process restarted without saved state while the Custom Tab is in front | signed in from the result intent alone (AppAuth's returned request carries state, client and verifier) |
| the same, the user closing the Custom Tab | nothing loaded, outcome `lost` / `no_state` (a cancel carries no state to build the site's failure callback from), not signed in |
| a double tap: the first launch's RESULT_CANCELED arriving after the second launch | ignored; the second launch's code signs the user in |
| hand-back: the activity recreated while the default browser is in front | the App Link still taken, the site's callback loaded, signed in |
"""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest

from harness import APP_CALLBACK
from site_pages import open_home, sign_ins, status, tap_sign_in, wait_for, wait_home


def returned_request(started: dict) -> dict:
    """What AppAuth returns with a response it accepted: the request the launch sent."""
    return {name: started[name] for name in ("state", "client_id", "redirect_uri", "code_verifier")}


def summary(events):
    return [(e["event"], e.get("session"), e.get("outcome")) for e in events]


def assert_signed_in_once(webview, app, idp, username, state):
    wait_home(webview)
    assert status(webview) == f"Signed in as {username}"
    assert sign_ins(webview) == 1
    [load] = app.loads
    assert parse_qs(urlsplit(load).query)["state"] == [state]
    assert idp.stats()["token"]["requests"] == 1


def test_rotation_mid_sign_in_signs_the_user_in(webview, relay_proxy, flow_factory, idp, username):
    app = flow_factory(relay_proxy, "android")
    open_home(webview, relay_proxy.url)
    tap_sign_in(webview)
    started = app.started("s1")
    redirect = app.idp(started, username=username)
    recreated = app.activity_recreated()
    assert recreated["events"] == []
    assert started["code_verifier"] not in recreated["saved"]
    events = app.activity_result(redirect, returned_request(started))
    assert summary(events) == [("load", None, None), ("outcome", "s1", "completed")]
    assert_signed_in_once(webview, app, idp, username, started["state"])


def test_process_death_mid_sign_in_signs_the_user_in_from_the_result_alone(
        webview, relay_proxy, flow_factory, idp, username):
    app = flow_factory(relay_proxy, "android")
    open_home(webview, relay_proxy.url)
    tap_sign_in(webview)
    started = app.started("s1")
    redirect = app.idp(started, username=username)
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


def test_a_double_tap_signs_in_with_the_second_code(webview, relay_proxy, flow_factory, idp, username):
    app = flow_factory(relay_proxy, "android")
    open_home(webview, relay_proxy.url)
    tap_sign_in(webview)
    first = app.started("s1")
    app.idp(first, username=username)               # the first Custom Tab got that far
    tap_sign_in(webview)
    second = app.started("s2")
    assert second["state"] != first["state"]
    # Bringing the app back to the top finished the first launch's activity: RESULT_CANCELED, no
    # data, delivered after the second launch. It must not end the second sign-in.
    assert app.activity_result("finished") == []
    events = app.activity_result(app.idp(second, username=username), returned_request(second))
    assert summary(events) == [("load", None, None), ("outcome", "s2", "completed")]
    assert_signed_in_once(webview, app, idp, username, second["state"])


@pytest.fixture
def plain_proxy(proxy_factory, rails):
    """The proxy with no providers, in front of the app as it was (hand-back needs none)."""
    return proxy_factory(None, upstream=rails.plain.url)


def test_hand_back_survives_rotation_and_signs_in_through_the_app_link(webview, plain_proxy, flow_factory, username):
    app = flow_factory(plain_proxy, "android", strategy="hand_back", https_callbacks=False, link_paths=[APP_CALLBACK])
    open_home(webview, plain_proxy.url)
    tap_sign_in(webview)
    opened = app.wait_for(lambda e: e["event"] == "external_browser_opened", "the default browser opened")
    link = app.site_idp(opened["url"], username=username)
    assert app.activity_recreated()["events"] == []
    answer = app.open_link(link)
    assert answer["handled"] is True
    assert summary(answer["events"]) == [("load", None, None), ("outcome", "s1", "completed")]
    wait_for(webview, lambda d: status(d) == f"Signed in as {username}", f"the app to show {username}")
    assert sign_ins(webview) == 1
