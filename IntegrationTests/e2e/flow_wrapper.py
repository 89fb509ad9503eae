"""The wrapper app as it ships: one SignInFlow (sim-protocol.md's flow ops) decides every WebView
navigation, runs the browser sessions and loads what comes back. Unlike `wrapper.py` (the core's
pure functions, asked step by step), every policy here — latest sign-in wins, exactly once, cancel,
a browser that does not start, a popup — is the flow's; this file only plays the platform:

- **WebView navigations.** CDP `Fetch` on the page target, as in `wrapper.py`, reported as
  `navigate` (`mainFrame`/`subframe`); and on every **new window** the page opens (`window.open`,
  `target=_blank`): a browser-level CDP connection auto-attaches to new page targets with
  `waitForDebuggerOnStart`, enables `Fetch` on each before it runs, and reports its loads with target
  `popup` — what `createWebViewWith` / a nil `targetFrame` are on iOS. A popup whose load the flow
  cancels is closed (iOS: `createWebViewWith` returns nil, no window).
- **The flow's `load`** is a `Page.navigate` of the WebView's page.
- **The system browser** is the test's: `idp()` signs in at the IdP on a started session's URL
  with plain HTTPS (as `wrapper.py` does) and `complete()` hands its result to the flow.

The simulator is any that speaks the protocol, started by the caller with its platform's settings
(conftest.py's `flow_factory`: the Swift one for iOS, the JVM one for Android).

**Hand-back** (`strategy: hand_back`): the flow opens the site's own provider URL; `site_idp()`
plays the system browser on it — the IdP's login form with the site's *web* client — and returns the
IdP's redirect to the site's callback, which the test delivers as a universal link / App Link
(`open_link`) or as the browser session's https callback (`complete`).
"""

from __future__ import annotations

import contextlib
import threading
import time
from types import SimpleNamespace
from urllib.parse import parse_qsl, urlsplit

import requests

from native_sim import NativeSignInSim
from wrapper import CDPSession, WrapperApp


class FlowApp:
    def __init__(self, driver, *, sim: NativeSignInSim, settings: dict, initial_url: str, ca_file: str,
                 **flow_settings):
        self.driver = driver
        self.ca_file = ca_file
        self.platform = settings["platform"]
        self.events: list[dict] = []            # every event the flow emitted, in order
        self.loads: list[str] = []              # the URLs the flow loaded into the WebView
        self.policies: list[tuple[str, str, str]] = []   # (target, url, policy) of every navigate
        self.results: list = []                 # code, verifier, state of each sign-in (log scan)
        self._changed = threading.Condition()
        WrapperApp.instances.append(self)
        self.sim = sim
        self.configuration = self.sim.configure(**settings, initial_url=initial_url, **flow_settings)

        self.page = CDPSession.for_driver(driver)
        self.page.on("Fetch.requestPaused", self._page_paused)
        self.page.call("Fetch.enable", {"patterns": [
            {"urlPattern": "*", "resourceType": "Document", "requestStage": "Request"}]})

        self.popups: dict[str, str] = {}        # CDP session id → target id of each new window
        self.browser = CDPSession.for_browser(driver)
        self.browser.on("Target.attachedToTarget", self._attached)
        self.browser.on("Fetch.requestPaused", self._popup_paused)
        self.browser.call("Target.setAutoAttach", {"autoAttach": True, "waitForDebuggerOnStart": True,
                                                   "flatten": True, "filter": [{"type": "page"}]})

    @property
    def errors(self) -> list[str]:
        return self.page.errors + self.browser.errors

    def close(self):
        with contextlib.suppress(Exception):
            self.browser.call("Target.setAutoAttach", {"autoAttach": False, "waitForDebuggerOnStart": False},
                              timeout=3)
        with contextlib.suppress(Exception):
            self.page.call("Fetch.disable", timeout=3)
        self.browser.close()
        self.page.close()
        self.sim.close()

    # -- the WebView asks ----------------------------------------------------------------------------

    def _page_paused(self, params):
        target = "mainFrame" if params.get("frameId") == self.page.target_id else "subframe"
        self._decide(params, target, self.page, None)

    def _attached(self, params):
        info, session = params["targetInfo"], params["sessionId"]
        if info.get("type") == "page" and info["targetId"] != self.page.target_id:
            self.popups[session] = info["targetId"]
            # In order on the one socket: Fetch is on before the new window runs.
            self.browser.send("Fetch.enable", {"patterns": [
                {"urlPattern": "*", "resourceType": "Document", "requestStage": "Request"}]}, session_id=session)
        if params.get("waitingForDebugger"):
            self.browser.send("Runtime.runIfWaitingForDebugger", session_id=session)

    def _popup_paused(self, params):
        session = params["sessionId"]
        self._decide(params, "popup", self.browser, session)

    def _decide(self, params, target, cdp, session):
        url, request_id = params["request"]["url"], params["requestId"]
        try:
            answer = self.sim.navigate(url, target)
        except Exception:
            cdp.send("Fetch.failRequest", {"requestId": request_id, "errorReason": "Failed"}, session_id=session)
            raise                                   # into cdp.errors
        if answer["policy"] == "allow":
            cdp.send("Fetch.continueRequest", {"requestId": request_id}, session_id=session)
        else:
            cdp.send("Fetch.failRequest", {"requestId": request_id, "errorReason": "Aborted"}, session_id=session)
            if session in self.popups:
                self.browser.send("Target.closeTarget", {"targetId": self.popups[session]})
        with self._changed:
            self.policies.append((target, url, answer["policy"]))
        self._happened(answer["events"])

    # -- what the flow did -----------------------------------------------------------------------------

    def _happened(self, events: list[dict]) -> list[dict]:
        for event in events:
            if event["event"] == "load":
                self.loads.append(event["url"])
                self.page.send("Page.navigate", {"url": event["url"]})
            if event["event"] == "browser_started":
                self.results.append(SimpleNamespace(code=None, code_verifier=event["code_verifier"],
                                                    state=event["state"]))
        with self._changed:
            self.events += events
            self._changed.notify_all()
        return events

    def wait_for(self, predicate, what: str, timeout: float = 15.0) -> dict:
        """The first event so far matching `predicate` (waiting for it)."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                found = next((e for e in self.events if predicate(e)), None)
                if found:
                    return found
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"no {what} (events {self.events}; policies {self.policies}; "
                                         f"at {self.driver.current_url}; CDP errors {self.errors})")
                self._changed.wait(min(left, 0.2))

    def started(self, session: str) -> dict:
        return self.wait_for(lambda e: e["event"] == "browser_started" and e["session"] == session,
                             f"browser session {session}")

    def outcome(self, session) -> dict:
        return self.wait_for(lambda e: e["event"] == "outcome" and e["session"] == session,
                             f"outcome of {session}")

    # -- the app and the system browser ----------------------------------------------------------------

    def complete(self, session: str, result) -> list[dict]:
        """The browser session's completion handler fires with `result`."""
        return self._completed(self.sim.browser_complete(session, result)["events"])

    def activity_result(self, result, request=None) -> list[dict]:
        """Android: a launch's result as the platform returns it, without a session number;
        `request` is AppAuth's returned request (state, client_id, redirect_uri, code_verifier)."""
        return self._completed(self.sim.activity_result(result, request)["events"])

    def activity_recreated(self) -> dict:
        """Android: the activity destroyed and created again (rotation); iOS: the view showing the
        WebView made again, the flow living on. `{"events", "saved"}`."""
        answer = self.sim.activity_recreated()
        self._happened(answer["events"])
        return answer

    def process_restarted(self) -> dict:
        """The process killed and started again — Android: without saved state; iOS: its browser
        sessions ended with it, the new one restores what the app kept in UserDefaults."""
        answer = self.sim.process_restarted()
        self._happened(answer["events"])
        return answer

    def _completed(self, events: list[dict]) -> list[dict]:
        events = self._happened(events)
        for event in events:
            if event["event"] == "load":
                code = dict(parse_qsl(urlsplit(event["url"]).query)).get("code")
                if code:
                    self.results.append(SimpleNamespace(code=code, code_verifier=None, state=None))
        return events

    def cancel(self) -> list[dict]:
        return self._happened(self.sim.cancel()["events"])

    def fail_next_start(self, reason: str) -> list[dict]:
        return self._happened(self.sim.fail_next_start(reason)["events"])

    def navigate(self, url: str, target: str) -> dict:
        """A navigation reported by hand (a delegate path the browser has no twin of)."""
        answer = self.sim.navigate(url, target)
        self._happened(answer["events"])
        return answer

    def idp(self, started: dict, *, username: str, action: str = "approve"):
        """ASWebAuthenticationSession on the started session's URL: the IdP's login page, then
        its form, and the redirect to the callback scheme (or the user closes it: `cancelled`)."""
        scheme = started["callback"]["scheme"]
        with requests.Session() as browser:
            page = browser.get(started["url"], allow_redirects=False, timeout=10, verify=self.ca_file)
            assert page.status_code == 200, (page.status_code, page.headers.get("Location"))
            if action == "cancel":
                return "cancelled"
            resp = browser.post(started["url"], data={"username": username, "action": action},
                                allow_redirects=False, timeout=10, verify=self.ca_file)
        location = resp.headers.get("Location", "")
        assert resp.status_code == 302 and urlsplit(location).scheme == scheme, (resp.status_code, location)
        return {"redirect": location}

    def open_link(self, url: str) -> dict:
        """A universal link / App Link reached the app: `{"handled", "events"}`."""
        answer = self.sim.open_link(url)
        self._happened(answer["events"])
        return answer

    def site_idp(self, url: str, *, username: str) -> str:
        """The system browser on the site's own provider URL (hand-back): the IdP's login page for
        the site's web client, its form, and the redirect to the site's callback (the https URL the
        app claims). Returns that redirect; the browser does not follow it — the OS hands it to the
        app."""
        with requests.Session() as browser:
            page = browser.get(url, allow_redirects=False, timeout=10, verify=self.ca_file)
            assert page.status_code == 200, (page.status_code, page.headers.get("Location"))
            resp = browser.post(url, data={"username": username, "action": "approve"},
                                allow_redirects=False, timeout=10, verify=self.ca_file)
        location = resp.headers.get("Location", "")
        assert resp.status_code == 302 and urlsplit(location).scheme in ("http", "https"), \
            (resp.status_code, location)
        code = dict(parse_qsl(urlsplit(location).query)).get("code")
        if code:
            self.results.append(SimpleNamespace(code=code, code_verifier=None, state=None))
        return location
