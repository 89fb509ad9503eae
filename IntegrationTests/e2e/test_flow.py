"""Each platform's app through its one SignInFlow (flow_wrapper.py, sim-protocol.md) — the iOS app by
the Swift `native-sign-in-sim`, the Android app by the JVM core's `native-sign-in-sim-android`, each
configured its platform's way — against the real proxy, Rails site and IdP: the flow's policies,
each asserted on what the app shows, for both platforms.

| test | the app shows |
| --- | --- |
| a second tap while the first sign-in's browser is open | the first session cancelled and `superseded`, its late completion ignored; the second signs the user in, once |
| the browser's completion delivered twice | one callback load, signed in, 1 sign-in, one token request |
| the app cancels | the browser session cancelled, nothing loaded, its late completion ignored, not signed in |
| the browser does not start | the site's failure page (`Sign in failed`); the proxy logged the wrapper's `sign_in_failed` |
| a sign-in in a new tab (`target=_blank`) or a `window.open` popup | the popup's provider load taken by the flow (target `popup`), the window closed, the user signed in in the WebView; the same popup reported again starts nothing |
"""

from __future__ import annotations

import time
from urllib.parse import parse_qs, urlsplit

import pytest

from harness import NATIVE
from native_sim import PLATFORMS
from site_pages import (alert, notice, open_home, sign_ins, status, tap_sign_in, tap_sign_in_in_new_window,
                        wait_home)

# Every test runs once per platform, each by its own simulator (conftest.py's flow_factory).
pytestmark = pytest.mark.parametrize("platform", PLATFORMS)

FAILURE = "Could not authenticate you from GoogleOauth2 because"
SUCCESS = "Successfully authenticated from Google account."


def callback_loads(app) -> list[str]:
    return [u for u in app.loads if urlsplit(u).path == "/_oauth_callback"]


def test_a_second_tap_mid_session_cancels_the_first_and_the_second_signs_in(
        webview, relay_proxy, flow_factory, idp, username, platform):
    app = flow_factory(relay_proxy, platform)
    open_home(webview, relay_proxy.url)
    tap_sign_in(webview)
    first = app.started("s1")
    first_redirect = app.idp(first, username=username)      # the first browser got that far

    tap_sign_in(webview)                                     # the user taps again
    second = app.started("s2")
    assert second["state"] != first["state"]
    kinds = [(e["event"], e.get("session"), e.get("outcome")) for e in app.events]
    assert kinds == [("browser_started", "s1", None), ("browser_cancelled", "s1", None),
                     ("outcome", "s1", "superseded"), ("browser_started", "s2", None)]

    assert app.complete("s1", first_redirect) == []          # the old session's late completion
    events = app.complete("s2", app.idp(second, username=username))
    assert [e["event"] for e in events] == ["load", "outcome"]
    assert events[1]["outcome"] == "completed"
    wait_home(webview)
    assert status(webview) == f"Signed in as {username}"
    assert sign_ins(webview) == 1
    assert len(callback_loads(app)) == 1
    assert parse_qs(urlsplit(app.loads[0]).query)["state"] == [second["state"]]
    assert idp.stats()["token"]["requests"] == 1


def test_a_completion_delivered_twice_loads_the_callback_once(webview, relay_proxy, flow_factory,
                                                             idp, username, platform):
    app = flow_factory(relay_proxy, platform)
    open_home(webview, relay_proxy.url)
    tap_sign_in(webview)
    started = app.started("s1")
    # The platform's own app: its native client, the redirect its library derived.
    assert (started["platform"], started["client_id"], started["redirect_uri"]) == (platform, *NATIVE[platform])
    redirect = app.idp(started, username=username)
    assert [e["event"] for e in app.complete("s1", redirect)] == ["load", "outcome"]
    assert parse_qs(urlsplit(app.loads[0]).query)["platform"] == [platform]
    assert app.complete("s1", redirect) == []
    assert app.complete("s1", "cancelled") == []
    wait_home(webview)
    assert status(webview) == f"Signed in as {username}"
    assert sign_ins(webview) == 1
    assert notice(webview) == SUCCESS
    assert len(callback_loads(app)) == 1
    assert idp.stats()["token"]["requests"] == 1


def test_cancel_closes_the_browser_and_loads_nothing(webview, relay_proxy, flow_factory, idp,
                                                     username, platform):
    app = flow_factory(relay_proxy, platform)
    open_home(webview, relay_proxy.url)
    tap_sign_in(webview)
    started = app.started("s1")
    redirect = app.idp(started, username=username)
    assert app.cancel() == [{"event": "browser_cancelled", "session": "s1"},
                            {"event": "outcome", "session": "s1", "outcome": "cancelled", "reason": None}]
    assert app.complete("s1", redirect) == []
    assert app.cancel() == []
    assert app.loads == []
    open_home(webview, relay_proxy.url)
    assert status(webview) == "Not signed in"
    assert idp.stats()["token"]["requests"] == 0


def test_a_browser_that_does_not_start_shows_the_sites_failure(webview, relay_proxy, flow_factory,
                                                              idp, platform):
    app = flow_factory(relay_proxy, platform)
    assert app.fail_next_start("no window to present from") == []
    open_home(webview, relay_proxy.url)
    tap_sign_in(webview)
    outcome = app.outcome("s1")
    assert (outcome["outcome"], outcome["reason"]) == ("failed", "browser_did_not_start")
    assert not [e for e in app.events if e["event"] == "browser_started"]
    [load] = app.loads
    assert parse_qs(urlsplit(load).query)["error"] == ["sign_in_failed"]
    wait_home(webview, "the app's failure page")
    assert status(webview) == "Not signed in"
    assert alert(webview) == f'{FAILURE} "Sign in failed".'
    events = [e for e in relay_proxy.log_events() if e.get("msg") in ("callback verified", "callback failed")]
    assert [(e.get("source"), e.get("reason")) for e in events] == [("client", "sign_in_failed")]
    assert idp.stats()["token"]["requests"] == 0


@pytest.mark.parametrize("how", ["blank", "popup"])
def test_a_sign_in_in_a_new_window_runs_in_the_browser_and_signs_in_the_webview(
        webview, relay_proxy, flow_factory, idp, username, how, platform):
    app = flow_factory(relay_proxy, platform)
    open_home(webview, relay_proxy.url)
    main = webview.current_window_handle
    tap_sign_in_in_new_window(webview, how)
    started = app.started("s1")
    # The flow took exactly one load, the provider's, reported from the new window.
    taken = [(target, url) for target, url, policy in app.policies if policy == "cancel"]
    assert len(taken) == 1 and taken[0][0] == "popup", app.policies
    intercepted = taken[0][1]
    assert intercepted.startswith(idp.discovery()["authorization_endpoint"] + "?")
    assert parse_qs(urlsplit(intercepted).query)["state"] == [started["state"]]

    # WebKit reports a popup through both createWebViewWith and decidePolicyFor: the second
    # report of the same navigation starts nothing.
    assert app.navigate(intercepted, "popup") == {"policy": "cancel", "events": []}

    events = app.complete("s1", app.idp(started, username=username))
    assert [e["event"] for e in events] == ["load", "outcome"]
    wait_home(webview)
    assert webview.current_window_handle == main
    assert status(webview) == f"Signed in as {username}"
    assert sign_ins(webview) == 1
    assert [e["session"] for e in app.events if e["event"] == "browser_started"] == ["s1"]
    # The window the flow took was closed: only the WebView's is left.
    assert wait_windows(webview, 1), webview.window_handles


def wait_windows(webview, count, timeout=5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if len(webview.window_handles) == count:
            return True
        time.sleep(0.1)
    return False
