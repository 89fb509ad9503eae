"""The Android-shaped wrapper app, `scripts/native-sign-in-sim-android` (the JVM core under Android/),
speaking the JSON-lines protocol of IntegrationTests/e2e/sim-protocol.md: exact answers for
configure / decide / callback and every flow op, and — when the Swift `native-sign-in-sim` is built —
the same answers as the iOS-shaped app for the same requests.

Needs Debian's kotlin and a JDK (scripts/setup); the script builds its jar on first use.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import plistlib
import re
import subprocess
from urllib.parse import parse_qsl, urlsplit

import pytest

from helpers import REPO_ROOT

SCRIPT = os.path.join(REPO_ROOT, "scripts", "native-sign-in-sim-android")
SWIFT_SIM = os.environ.get("NATIVE_SIGN_IN_SIM", os.path.join(REPO_ROOT, ".build", "release", "native-sign-in-sim"))

GOOGLE = "https://accounts.google.com/o/oauth2/v2/auth"
GID = "123-and.apps.googleusercontent.com"
GREV = "com.googleusercontent.apps.123-and"
GRED = GREV + ":/oauth2redirect"
HEAD = ("https://site.example/_oauth_callback?provider=google&platform=android&client_id=" + GID
        + "&redirect_uri=" + GREV + "%3A%2Foauth2redirect")
BUILD_CONFIG = {"OAUTH_ENABLED": True, "GOOGLE_CLIENT_ID": GID, "OAUTH_REDIRECT_SCHEME": GREV, "FACEBOOK_APP_ID": "4242"}
CALLBACK = "https://site.example/users/auth/google_oauth2/callback"
SITE = (GOOGLE + "?client_id=web&redirect_uri=https%3A%2F%2Fsite.example%2Fusers%2Fauth%2Fgoogle_oauth2%2Fcallback"
        "&state=s1&scope=openid")


def challenge(verifier: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()


class Sim:
    def __init__(self, argv, tmp_path):
        self.stderr = open(tmp_path / f"sim-{os.path.basename(argv[0])}.log", "ab")
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr)

    def call(self, **request) -> dict:
        return self.raw(json.dumps(request))

    def raw(self, line: str) -> dict:
        self.proc.stdin.write(line.encode() + b"\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline()
        assert answer, f"no answer to {line}"
        return json.loads(answer)

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(10)
        self.stderr.close()


@pytest.fixture(scope="module")
def built():
    # The first start builds the jar (about 20 s with Kotlin 1.3); later ones only start the JVM.
    done = subprocess.run([SCRIPT], input=b"", capture_output=True, timeout=600)
    assert done.returncode == 0, done.stderr.decode()


@pytest.fixture
def sim(built, tmp_path):
    s = Sim([SCRIPT], tmp_path)
    yield s
    s.close()


def configure(sim, **extra):
    answer = sim.call(op="configure", platform="android", build_config=BUILD_CONFIG,
                      initial_url="https://site.example/app", **extra)
    assert "error" not in answer, answer
    return answer


def test_configure_answers_the_providers_from_build_config(sim):
    assert configure(sim) == {"enabled": True, "providers": [
        {"name": "google", "client_id": GID, "redirect_uri": GRED, "callback_scheme": GREV, "pkce": True},
        {"name": "facebook", "client_id": "4242", "redirect_uri": "fb4242://authorize", "callback_scheme": "fb4242", "pkce": False}]}
    assert sim.call(op="configure", platform="android", build_config={}) == {"error": "configure comes once"}


def test_a_bad_build_config_names_the_field_and_changes_nothing(sim):
    answer = sim.call(op="configure", platform="android",
                      build_config={"OAUTH_ENABLED": True, "GOOGLE_CLIENT_ID": GID, "OAUTH_REDIRECT_SCHEME": "com.example.app"})
    assert answer == {"error": 'BuildConfig: OAUTH_REDIRECT_SCHEME: is "com.example.app", but GOOGLE_CLIENT_ID reversed is "' + GREV + '"'}
    assert sim.call(op="configure", platform="android", build_config={"OAUTH_ENABLED": "yes"})["error"].startswith(
        "BuildConfig: OAUTH_ENABLED: ")
    assert sim.call(op="configure", platform="ios", build_config={})["error"].startswith("this is the Android app")
    assert sim.call(op="configure", platform="android", build_config={"OAUTH_ENABLED": False}) == {"enabled": False, "providers": []}


def test_decide_and_callback_are_the_cores_pure_functions(sim):
    configure(sim)
    start = sim.call(op="decide", url=SITE + "&prompt=consent&response_mode=form_post#x", target="popup")
    verifier = start["code_verifier"]
    assert start == {"decision": "start", "id": "r1", "provider": "google", "platform": "android", "client_id": GID,
                     "redirect_uri": GRED, "callback_scheme": GREV, "state": "s1", "code_verifier": verifier,
                     "url": GOOGLE + "?client_id=" + GID + "&redirect_uri=" + GREV + "%3A%2Foauth2redirect&response_type=code"
                            "&scope=openid&state=s1&prompt=consent&code_challenge=" + challenge(verifier) + "&code_challenge_method=S256"}
    assert sim.call(op="decide", url=SITE, target="subframe") == {"decision": "allow"}
    assert sim.call(op="decide", url=GOOGLE + "?scope=openid", target="mainFrame") == {
        "decision": "refuse", "key": "state",
        "error": "state: the site's google authorization URL has no state; a sign-in without one cannot be checked by the site's callback"}
    url = sim.call(op="callback", id="r1", initial_url="https://site.example/app?x=1",
                   result={"redirect": GRED + "?code=4%2F0A&state=s1"})["url"]
    assert url == HEAD + "&code=4%2F0A&state=s1&code_verifier=" + verifier
    assert sim.call(op="callback", id="r1", initial_url="https://site.example", result="cancelled") == {
        "error": 'no sign-in under way with id "r1"'}
    sim.call(op="decide", url=SITE, target="mainFrame")
    assert sim.call(op="callback", id="r2", initial_url="https://site.example",
                    result={"redirect": GRED + "?code=c&state=s1&authuser=0&authuser=1"}) == {
        "url": HEAD + "&state=s1&error=invalid_response"}


def test_a_sign_in_starts_the_native_request_and_loads_the_callback(sim):
    configure(sim)
    answer = sim.call(op="navigate", url=SITE, target="mainFrame")
    started = answer["events"][0]
    verifier = started["code_verifier"]
    assert answer == {"policy": "cancel", "events": [{
        "event": "browser_started", "session": "s1", "callback": {"scheme": GREV}, "ephemeral": False,
        "provider": "google", "platform": "android", "client_id": GID, "redirect_uri": GRED, "state": "s1",
        "code_verifier": verifier, "url": started["url"]}]}
    assert started["url"].endswith("&code_challenge=" + challenge(verifier) + "&code_challenge_method=S256")
    assert sim.call(op="browser_complete", session="s1", result={"redirect": GRED + "?code=c&state=s1"}) == {"events": [
        {"event": "load", "url": HEAD + "&code=c&state=s1&code_verifier=" + verifier},
        {"event": "outcome", "session": "s1", "outcome": "completed", "reason": None}]}
    # Exactly once: a second completion of the same session does nothing.
    assert sim.call(op="browser_complete", session="s1", result="cancelled") == {"events": []}
    assert sim.call(op="navigate", url="https://site.example/next", target="mainFrame") == {"policy": "allow", "events": []}


def test_the_latest_sign_in_wins(sim):
    configure(sim)
    sim.call(op="navigate", url=SITE, target="mainFrame")
    answer = sim.call(op="navigate", url=SITE.replace("state=s1", "state=s2"), target="popup")
    assert [e["event"] for e in answer["events"]] == ["browser_cancelled", "outcome", "browser_started"]
    assert answer["events"][:2] == [{"event": "browser_cancelled", "session": "s1"},
                                    {"event": "outcome", "session": "s1", "outcome": "superseded", "reason": None}]
    assert answer["events"][2]["session"] == "s2"
    assert sim.call(op="browser_complete", session="s1", result={"redirect": GRED + "?code=c&state=s1"}) == {"events": []}
    assert sim.call(op="browser_complete", session="s2", result="cancelled") == {"events": [
        {"event": "load", "url": HEAD + "&state=s2&error=access_denied"},
        {"event": "outcome", "session": "s2", "outcome": "user_cancelled", "reason": None}]}


def test_the_same_popup_reported_twice_starts_one_session(sim):
    configure(sim)
    sim.call(op="navigate", url=SITE, target="popup")
    assert sim.call(op="navigate", url=SITE, target="mainFrame") == {"policy": "cancel", "events": []}


def test_cancel_then_a_late_completion_does_nothing(sim):
    configure(sim)
    sim.call(op="navigate", url=SITE, target="mainFrame")
    assert sim.call(op="cancel") == {"events": [{"event": "browser_cancelled", "session": "s1"},
                                                {"event": "outcome", "session": "s1", "outcome": "cancelled", "reason": None}]}
    assert sim.call(op="cancel") == {"events": []}
    assert sim.call(op="browser_complete", session="s1", result={"redirect": GRED + "?code=c&state=s1"}) == {"events": []}


def test_a_browser_that_does_not_start_loads_sign_in_failed(sim):
    configure(sim)
    assert sim.call(op="fail_next_start", reason="no browser installed") == {"events": []}
    assert sim.call(op="navigate", url=SITE, target="mainFrame") == {"policy": "cancel", "events": [
        {"event": "load", "url": HEAD + "&state=s1&error=sign_in_failed"},
        {"event": "outcome", "session": "s1", "outcome": "failed", "reason": "browser_did_not_start"}]}
    assert sim.call(op="browser_complete", session="s1", result="cancelled") == {"error": 'no browser session "s1" was started'}
    assert sim.call(op="navigate", url=SITE, target="mainFrame")["events"][0]["session"] == "s2"


def test_state_mismatch_provider_error_and_browser_failure(sim):
    configure(sim)
    sim.call(op="navigate", url=SITE, target="mainFrame")
    assert sim.call(op="browser_complete", session="s1", result={"redirect": GRED + "?code=c&state=evil"})["events"] == [
        {"event": "load", "url": HEAD + "&state=s1&error=state_mismatch"},
        {"event": "outcome", "session": "s1", "outcome": "failed", "reason": "state_mismatch"}]
    sim.call(op="navigate", url=SITE, target="mainFrame")
    assert sim.call(op="browser_complete", session="s2", result={"redirect": GRED + "?error=%3Cb%3E&state=s1"})["events"][1] == {
        "event": "outcome", "session": "s2", "outcome": "provider_error", "reason": "sign_in_failed"}
    sim.call(op="navigate", url=SITE, target="mainFrame")
    assert sim.call(op="browser_complete", session="s3", result={"failed": "custom tab crashed"})["events"][1] == {
        "event": "outcome", "session": "s3", "outcome": "failed", "reason": "browser_failed"}


def test_a_completion_after_the_webview_is_gone_loads_nothing(sim):
    configure(sim)
    sim.call(op="navigate", url=SITE, target="mainFrame")
    assert sim.call(op="webview_gone") == {"events": []}
    assert sim.call(op="browser_complete", session="s1", result={"redirect": GRED + "?code=c&state=s1"}) == {"events": [
        {"event": "outcome", "session": "s1", "outcome": "webview_gone", "reason": None}]}


def test_a_refusal_leaves_the_running_sign_in_alone(sim):
    configure(sim)
    sim.call(op="navigate", url=SITE, target="mainFrame")
    answer = sim.call(op="navigate", url=GOOGLE + "?state=a&state=b", target="mainFrame")
    assert answer == {"policy": "cancel", "events": [{"event": "outcome", "session": None, "outcome": "refused",
                                                      "reason": "state: appears twice in google's authorization URL"}]}
    assert sim.call(op="browser_complete", session="s1", result="cancelled")["events"][1]["outcome"] == "user_cancelled"


def test_hand_back_opens_the_site_url_and_takes_the_app_link_once(sim):
    configure(sim, strategy="hand_back", https_callbacks=False, link_paths=["/users/auth/google_oauth2/callback"])
    assert sim.call(op="open_link", url=CALLBACK + "?code=c&state=s1") == {"handled": False, "events": []}
    assert sim.call(op="navigate", url=SITE, target="mainFrame") == {"policy": "cancel", "events": [
        {"event": "external_browser_opened", "url": SITE}]}
    assert sim.call(op="open_link", url="https://other.example/users/auth/google_oauth2/callback?code=c") == {"handled": False, "events": []}
    assert sim.call(op="open_link", url=CALLBACK + "?code=c&state=s1") == {"handled": True, "events": [
        {"event": "load", "url": CALLBACK + "?code=c&state=s1"},
        {"event": "outcome", "session": "s1", "outcome": "completed", "reason": None}]}
    assert sim.call(op="open_link", url=CALLBACK + "?code=c&state=s1") == {"handled": False, "events": []}
    refused = sim.call(op="navigate", url=GOOGLE + "?state=s9&redirect_uri=https%3A%2F%2Fsite.example%2Felsewhere", target="mainFrame")
    assert refused["events"][0]["outcome"] == "refused" and refused["events"][0]["reason"].startswith("linkPaths: ")


def test_hand_back_defaults_to_the_app_link_as_the_glue_does(sim):
    configure(sim, strategy="hand_back", link_paths=["/users/auth/google_oauth2/callback"])
    assert sim.call(op="navigate", url=SITE, target="mainFrame") == {"policy": "cancel", "events": [
        {"event": "external_browser_opened", "url": SITE}]}


def test_hand_back_with_https_callbacks_waits_for_the_sites_redirect(sim):
    configure(sim, strategy="hand_back", https_callbacks=True, link_paths=["/users/auth/google_oauth2/callback"],
              ephemeral=True)
    started = sim.call(op="navigate", url=SITE, target="popup")["events"][0]
    assert started == {"event": "browser_started", "session": "s1", "url": SITE, "ephemeral": True,
                       "callback": {"https": {"host": "site.example", "path": "/users/auth/google_oauth2/callback"}},
                       "provider": "google", "platform": "android", "client_id": None, "redirect_uri": None,
                       "state": "s1", "code_verifier": None}
    assert sim.call(op="browser_complete", session="s1", result={"redirect": CALLBACK + "?error=access_denied&state=s1"}) == {"events": [
        {"event": "load", "url": CALLBACK + "?error=access_denied&state=s1"},
        {"event": "outcome", "session": "s1", "outcome": "provider_error", "reason": "access_denied"}]}


def test_with_sign_in_off_there_is_no_flow(sim):
    assert sim.call(op="navigate", url=SITE, target="mainFrame") == {"error": "a flow op before configure"}
    sim.call(op="configure", platform="android", build_config={"OAUTH_ENABLED": False}, initial_url="https://site.example")
    assert sim.call(op="navigate", url=SITE, target="mainFrame") == {"policy": "allow", "events": []}
    assert sim.call(op="cancel") == {"events": []}
    assert sim.call(op="open_link", url=CALLBACK) == {"handled": False, "events": []}
    assert sim.call(op="decide", url=SITE, target="mainFrame") == {"decision": "allow"}


def test_malformed_requests_are_errors_and_change_nothing(sim):
    configure(sim)
    assert "error" in sim.raw("not json")
    assert "error" in sim.raw('{"op":"navigate","url":"x","target":"mainFrame",}')
    assert sim.call(op="navigate", url=SITE, target="mainFrame", extra=1) == {"error": 'unknown field "extra"'}
    assert sim.call(op="navigate", url=SITE, target="window")["error"].startswith("target is mainFrame, popup or subframe")
    assert sim.call(op="fly") == {"error": 'unknown op "fly"'}
    assert sim.call(op="browser_complete", session="s1", result="cancelled") == {"error": 'no browser session "s1" was started'}
    # Nothing above started a session: the first one is still s1.
    assert sim.call(op="navigate", url=SITE, target="mainFrame")["events"][0]["session"] == "s1"


# The phone's lifecycle (Android only): results as the platform returns them, without a session
# number; the activity recreated from its saved state; the process restarted with nothing.

def returned(state, verifier):
    return {"state": state, "client_id": GID, "redirect_uri": GRED, "code_verifier": verifier}


def code_result(sim, code, state, verifier):
    return sim.call(op="activity_result", result={"redirect": GRED + f"?code={code}&state={state}"},
                    request=returned(state, verifier))


def test_a_double_tap_ignores_the_first_launchs_cancel_and_signs_in_with_the_second_code(sim):
    configure(sim)
    sim.call(op="navigate", url=SITE, target="mainFrame")
    second = sim.call(op="navigate", url=SITE.replace("state=s1", "state=s2"), target="popup")["events"][-1]
    # Clearing the first launch's activity returns RESULT_CANCELED without data, after the second launch.
    assert sim.call(op="activity_result", result="finished") == {"events": []}
    assert code_result(sim, "new", "s2", second["code_verifier"]) == {"events": [
        {"event": "load", "url": HEAD + "&code=new&state=s2&code_verifier=" + second["code_verifier"]},
        {"event": "outcome", "session": "s2", "outcome": "completed", "reason": None}]}


def test_results_out_of_order_each_find_their_launch(sim):
    configure(sim)
    first = sim.call(op="navigate", url=SITE, target="mainFrame")["events"][0]
    second = sim.call(op="navigate", url=SITE.replace("state=s1", "state=s2"), target="popup")["events"][-1]
    assert code_result(sim, "new", "s2", second["code_verifier"])["events"][1] == {
        "event": "outcome", "session": "s2", "outcome": "completed", "reason": None}
    assert code_result(sim, "old", "s1", first["code_verifier"]) == {"events": []}
    assert sim.call(op="activity_result", result="cancelled") == {"events": []}


def test_rotation_mid_sign_in_keeps_it_and_the_result_completes_it(sim):
    configure(sim)
    verifier = sim.call(op="navigate", url=SITE, target="mainFrame")["events"][0]["code_verifier"]
    assert sim.call(op="activity_recreated") == {
        "events": [], "saved": "v=1&started=1&running=1&state=s1&provider=google&launch=1%3As1"}
    assert code_result(sim, "c", "s1", verifier) == {"events": [
        {"event": "load", "url": HEAD + "&code=c&state=s1&code_verifier=" + verifier},
        {"event": "outcome", "session": "s1", "outcome": "completed", "reason": None}]}
    assert sim.call(op="navigate", url=SITE, target="mainFrame")["events"][0]["session"] == "s2"


def test_a_double_tap_then_rotation_still_ignores_the_first_launch(sim):
    configure(sim)
    sim.call(op="navigate", url=SITE, target="mainFrame")
    verifier = sim.call(op="navigate", url=SITE.replace("state=s1", "state=s2"), target="popup")["events"][-1]["code_verifier"]
    assert sim.call(op="activity_recreated")["events"] == []
    assert sim.call(op="activity_result", result="finished") == {"events": []}
    assert sim.call(op="activity_result", result="cancelled") == {"events": [
        {"event": "load", "url": HEAD + "&state=s2&error=access_denied"},
        {"event": "outcome", "session": "s2", "outcome": "user_cancelled", "reason": None}]}
    assert code_result(sim, "late", "s2", verifier) == {"events": []}


def test_after_a_process_restart_the_result_alone_completes_or_is_lost(sim):
    configure(sim)
    verifier = sim.call(op="navigate", url=SITE, target="mainFrame")["events"][0]["code_verifier"]
    assert sim.call(op="process_restarted") == {"events": [], "saved": None}
    assert code_result(sim, "c", "s1", verifier) == {"events": [
        {"event": "load", "url": HEAD + "&code=c&state=s1&code_verifier=" + verifier},
        {"event": "outcome", "session": None, "outcome": "completed", "reason": None}]}
    assert code_result(sim, "c", "s1", verifier) == {"events": []}
    sim.call(op="process_restarted")
    assert sim.call(op="activity_result", result="cancelled") == {"events": [
        {"event": "outcome", "session": None, "outcome": "lost", "reason": "no_state"}]}
    sim.call(op="process_restarted")
    assert sim.call(op="activity_result", result={"redirect": GRED + "?code=c&state=s1"}) == {"events": [
        {"event": "load", "url": HEAD + "&state=s1&error=sign_in_failed"},
        {"event": "outcome", "session": None, "outcome": "failed", "reason": "verifier_lost"}]}


def test_a_hand_back_sign_in_survives_rotation_and_takes_its_app_link(sim):
    configure(sim, strategy="hand_back", https_callbacks=False, link_paths=["/users/auth/google_oauth2/callback"])
    sim.call(op="navigate", url=SITE, target="mainFrame")
    saved = sim.call(op="activity_recreated")["saved"]
    assert saved.startswith("v=1&started=1&running=1&state=s1&site=https%3A%2F%2Faccounts.google.com"), saved
    assert sim.call(op="open_link", url=CALLBACK + "?code=c&state=s1") == {"handled": True, "events": [
        {"event": "load", "url": CALLBACK + "?code=c&state=s1"},
        {"event": "outcome", "session": "s1", "outcome": "completed", "reason": None}]}


def test_an_activity_finishing_for_good_ends_the_sign_in_without_relaunching_it(sim):
    configure(sim)
    sim.call(op="navigate", url=SITE, target="mainFrame")
    assert sim.call(op="activity_finished") == {"close": "ended", "events": [
        {"event": "outcome", "session": "s1", "outcome": "cancelled", "reason": None}]}
    assert sim.call(op="activity_result", result="cancelled") == {"events": []}


def test_lifecycle_ops_are_checked_like_the_others(sim):
    configure(sim)
    assert sim.call(op="activity_result", result="closed")["error"].startswith("result must be an object")
    assert sim.call(op="activity_result", result="cancelled", request={"state": "s1"}) == {"error": "client_id is required"}
    assert sim.call(op="activity_recreated", extra=1) == {"error": 'unknown field "extra"'}


# One protocol, two implementations: the same requests to the Swift (iOS-shaped) simulator.

def _normalised(answer):
    text = json.dumps(answer, sort_keys=True)
    for verifier in re.findall(r'"code_verifier": "([^"]+)"', text):
        text = text.replace(verifier, "VERIFIER").replace(challenge(verifier), "CHALLENGE")
    text = re.sub(r"code_verifier=[A-Za-z0-9._~-]+", "code_verifier=VERIFIER", text)
    return json.loads(text)


SCENARIO = [
    dict(op="navigate", url=SITE, target="mainFrame"),
    dict(op="navigate", url=SITE, target="popup"),
    dict(op="navigate", url=SITE.replace("state=s1", "state=s2"), target="popup"),
    dict(op="browser_complete", session="s1", result={"redirect": GRED + "?code=c&state=s1"}),
    dict(op="browser_complete", session="s2", result={"redirect": GRED + "?code=c&state=s2"}),
    dict(op="browser_complete", session="s2", result="cancelled"),
    dict(op="navigate", url=GOOGLE + "?scope=openid", target="mainFrame"),
    dict(op="fail_next_start", reason="x"),
    dict(op="navigate", url=SITE, target="mainFrame"),
    dict(op="navigate", url=SITE, target="mainFrame"),
    dict(op="browser_complete", session="s4", result={"redirect": GRED + "?code=c&state=s1&authuser=0&authuser=1"}),
    dict(op="navigate", url=SITE, target="mainFrame"),
    dict(op="cancel"),
    dict(op="navigate", url=SITE, target="mainFrame"),
    dict(op="webview_gone"),
    dict(op="browser_complete", session="s6", result={"failed": "gone"}),
    dict(op="open_link", url=CALLBACK + "?code=c&state=s1"),
]

HAND_BACK = [
    dict(op="navigate", url=SITE, target="mainFrame"),
    dict(op="open_link", url=CALLBACK + "?code=c&state=other"),
    dict(op="navigate", url=SITE, target="mainFrame"),
    dict(op="open_link", url=CALLBACK + "?code=c&state=s1"),
    dict(op="open_link", url=CALLBACK + "?code=c&state=s1"),
    dict(op="navigate", url=GOOGLE + "?state=s1&redirect_uri=https%3A%2F%2Fevil.test%2Fcb", target="mainFrame"),
    dict(op="fail_next_start", reason="x"),
    dict(op="navigate", url=SITE, target="mainFrame"),
    # A callback path the app does not claim: refused, in the same words, when only a link could
    # bring it back; started when the browser catches the https redirect itself.
    dict(op="navigate", url=GOOGLE + "?state=s1&redirect_uri=https%3A%2F%2Fsite.example%2Fother", target="mainFrame"),
]


@pytest.fixture
def swift(tmp_path):
    """The Swift simulator, and the `configure` fields giving it the same app through plists
    (Facebook and the Google client of BUILD_CONFIG). Built by scripts/test; skipped when not."""
    if not os.access(SWIFT_SIM, os.X_OK):
        pytest.skip(f"the Swift simulator is not built ({SWIFT_SIM})")
    info, google = tmp_path / "Info.plist", tmp_path / "GoogleService-Info.plist"
    info.write_bytes(plistlib.dumps({"OAuthEnabled": "YES", "FacebookAppID": "4242"}))
    google.write_bytes(plistlib.dumps({"CLIENT_ID": GID, "REVERSED_CLIENT_ID": GREV}))
    app = Sim([SWIFT_SIM], tmp_path)
    yield app, dict(op="configure", platform="android", info_plist=str(info), google_service_info=str(google))
    app.close()


@pytest.mark.parametrize("flow,scenario", [({}, SCENARIO),
                                           ({"strategy": "hand_back", "https_callbacks": False,
                                             "link_paths": ["/users/auth/google_oauth2/callback"]}, HAND_BACK),
                                           ({"strategy": "hand_back", "https_callbacks": True,
                                             "link_paths": ["/users/auth/google_oauth2/callback"]}, HAND_BACK)],
                         ids=["native", "hand_back_app_link", "hand_back_https"])
def test_the_swift_simulator_answers_the_same(sim, swift, flow, scenario):
    swift, plists = swift
    ios_config = swift.call(**plists, initial_url="https://site.example/app", **flow)
    android_config = sim.call(op="configure", platform="android", build_config=BUILD_CONFIG,
                              initial_url="https://site.example/app", **flow)
    assert ios_config == android_config
    for request in scenario:
        assert _normalised(sim.call(**request)) == _normalised(swift.call(**request)), request


def test_the_swift_simulator_takes_the_universal_link_when_info_plist_chooses_it(swift, tmp_path):
    """OAuthHandBackUniversalLinks: iOS 17.4's browser session could wait for the https callback
    (https_callbacks defaults to true on iOS), but the app chose the universal link."""
    swift, plists = swift
    info = tmp_path / "Info.plist"
    info.write_bytes(plistlib.dumps({"OAuthEnabled": "YES", "FacebookAppID": "4242", "OAuthHandBackUniversalLinks": True}))
    swift.call(**plists, initial_url="https://site.example/app", strategy="hand_back",
               link_paths=["/users/auth/google_oauth2/callback"])
    assert swift.call(op="navigate", url=SITE, target="mainFrame") == {"policy": "cancel", "events": [
        {"event": "external_browser_opened", "url": SITE}]}


@pytest.mark.parametrize("refused", [{"initial_url": "file:///index.html"},
                                     {"initial_url": "https://site.example/app", "strategy": "hand_back"}],
                         ids=["initial_url_no_origin", "hand_back_without_link_paths"])
def test_a_configure_the_flow_refuses_leaves_both_simulators_unconfigured(sim, swift, refused):
    """The flow's settings are checked after the platform's: a refusal there must change nothing
    either, so that the corrected configure that follows is taken (not "configure comes once")."""
    swift, plists = swift
    android = dict(op="configure", platform="android", build_config=BUILD_CONFIG)
    for app, settings in ((sim, android), (swift, plists)):
        assert "error" in app.call(**settings, **refused)
        fixed = app.call(**settings, initial_url="https://site.example/app")
        assert "error" not in fixed, fixed
        assert app.call(op="navigate", url=SITE, target="mainFrame")["policy"] == "cancel"


# The same lifecycle ops on iOS (the Swift simulator), with iOS's meaning: the flow outlives the
# view, ASWebAuthenticationSession ends with the process (sim-protocol.md).

def _ios_flow(swift, **flow):
    app, plists = swift
    configured = app.call(**{**plists, "platform": "ios"}, initial_url="https://site.example/app", **flow)
    assert "error" not in configured, configured
    return app


def test_ios_a_view_made_again_keeps_the_sign_in_and_its_completion_loads(swift):
    app = _ios_flow(swift)
    [started] = app.call(op="navigate", url=SITE, target="mainFrame")["events"]
    recreated = app.call(op="activity_recreated")
    assert recreated["events"] == []
    assert "running=1" in recreated["saved"] and started["code_verifier"] not in recreated["saved"]
    events = app.call(op="browser_complete", session="s1", result={"redirect": GRED + "?code=c&state=s1"})["events"]
    assert [(e["event"], e.get("outcome")) for e in events] == [("load", None), ("outcome", "completed")]


def test_ios_a_process_restart_ends_the_session_on_the_sites_failure_path_once(swift):
    app = _ios_flow(swift)
    app.call(op="navigate", url=SITE, target="mainFrame")
    restarted = app.call(op="process_restarted")
    assert "running=1" in restarted["saved"]
    load, outcome = restarted["events"]
    assert outcome == {"event": "outcome", "session": "s1", "outcome": "failed", "reason": "process_ended"}
    query = dict(parse_qsl(urlsplit(load["url"]).query))
    assert (query["error"], query["state"], query["platform"]) == ("sign_in_failed", "s1", "ios")
    assert app.call(op="browser_complete", session="s1", result="cancelled") == {
        "error": 'no browser session "s1" was started'}
    assert app.call(op="process_restarted") == {"events": [], "saved": None}   # named once only


def test_ios_a_hand_back_in_the_default_browser_survives_a_process_restart(swift):
    app = _ios_flow(swift, strategy="hand_back", https_callbacks=False,
                    link_paths=["/users/auth/google_oauth2/callback"])
    app.call(op="navigate", url=SITE, target="mainFrame")
    assert app.call(op="process_restarted")["events"] == []
    answer = app.call(op="open_link", url=CALLBACK + "?code=c&state=s1")
    assert answer == {"handled": True, "events": [
        {"event": "load", "url": CALLBACK + "?code=c&state=s1"},
        {"event": "outcome", "session": "s1", "outcome": "completed", "reason": None}]}


def test_ios_a_screen_closed_for_good_cancels_and_activity_results_are_androids(swift):
    app = _ios_flow(swift)
    app.call(op="navigate", url=SITE, target="mainFrame")
    assert app.call(op="activity_finished") == {"close": "ended", "events": [
        {"event": "browser_cancelled", "session": "s1"},
        {"event": "outcome", "session": "s1", "outcome": "cancelled", "reason": None}]}
    assert app.call(op="activity_result", result="cancelled")["error"].startswith("activity_result is Android's")
    assert app.call(op="activity_recreated", extra=1) == {"error": 'unknown field "extra"'}
