"""The native wrapper app, simulated: what the iOS / Android shell around the WebView does for
"Sign in with Google". Every decision is the platform's library's, asked through its simulator
(native_sim.py); this file is only the platform around it.

1. **Intercept.** The WebView (headless Chromium, driven by Selenium) is watched the way WKWebView's
   `decidePolicyFor navigationAction` / Android's `shouldOverrideUrlLoading` watch it: the wrapper
   opens its own DevTools (CDP) connection to the WebView's page target and enables `Fetch`
   request interception for every document load at the request stage. Chromium pauses each one
   (`Fetch.requestPaused`); the library decides (`decide`, main frame or subframe by the frame id):
   `allow` continues the load, `start` or `refuse` fails it with `Aborted` — the WebView stays
   on the site and the IdP never sees its request.
   (Why not the alternatives: `Network.setBlockedURLs` does not stop main-frame navigations in
   Chromium 156 — the IdP received the request — and Selenium 4.51's BiDi request handler
   deadlocked when failing a request. Reading the performance log would see the URL but not stop
   the navigation.)
2. **Restart natively.** The library's `start` carries the native authorization URL (its
   allowlist, the native client, PKCE) and the request's id.
3. **Sign in at the IdP** as the system browser would (ASWebAuthenticationSession / Custom Tab):
   plain HTTPS requests — GET the library's URL (the login page), POST its form (approve or deny),
   or close the browser (cancel) — and read the redirect to the callback scheme
   (`Location: com.example.app:/oauth2redirect?code=…&state=…`), which is where the system
   browser hands control back to the app.
4. **Hand back.** The library builds `/_oauth_callback` from what the browser returned
   (`callback`: the state check, `error=` on cancel, denial or mismatch); the wrapper loads it into
   the WebView as a full navigation.

The wrapper plays the iOS and the Android app at once around the one WebView: each navigation is
decided by both apps' libraries — the Swift `native-sign-in-sim` and the JVM core's
`native-sign-in-sim-android`, each configured its platform's way — and a sign-in continues as the
platform the test names. Two apps that decide differently on a navigation are an error.
"""

from __future__ import annotations

import contextlib
import json
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlsplit

import requests
import websocket

from native_sim import PLATFORMS, NativeSignInSim, Simulators


class CDPSession:
    """A second DevTools client on one page target, next to chromedriver's: commands and events
    over the target's WebSocket. Events are handled on the reader thread."""

    def __init__(self, ws_url: str):
        self.ws = websocket.create_connection(ws_url, suppress_origin=True, timeout=10)
        self.ws.settimeout(None)
        self._send_lock = threading.Lock()
        self._next_id = 0
        self._pending: dict[int, tuple[threading.Event, list]] = {}
        self._handlers: dict[str, list] = {}
        self.errors: list[str] = []
        self._thread = threading.Thread(target=self._read, name="cdp-reader", daemon=True)
        self._thread.start()

    @classmethod
    def for_driver(cls, driver) -> "CDPSession":
        address = driver.capabilities["goog:chromeOptions"]["debuggerAddress"]
        with urllib.request.urlopen(f"http://{address}/json/list", timeout=5) as r:
            targets = json.load(r)
        handle = driver.current_window_handle
        page = next(t for t in targets if t.get("type") == "page" and t["id"] == handle)
        session = cls(page["webSocketDebuggerUrl"])
        session.target_id = handle
        return session

    def on(self, method, handler):
        self._handlers.setdefault(method, []).append(handler)

    @classmethod
    def for_browser(cls, driver) -> "CDPSession":
        """The browser target: with flat sessions, every attached target's messages come over
        it, each event's params carrying its `sessionId`."""
        address = driver.capabilities["goog:chromeOptions"]["debuggerAddress"]
        with urllib.request.urlopen(f"http://{address}/json/version", timeout=5) as r:
            return cls(json.load(r)["webSocketDebuggerUrl"])

    @staticmethod
    def _message(msg_id, method, params, session_id) -> str:
        msg = {"id": msg_id, "method": method, "params": params or {}}
        if session_id:
            msg["sessionId"] = session_id
        return json.dumps(msg)

    def send(self, method, params=None, session_id=None) -> int:
        with self._send_lock:
            self._next_id += 1
            msg_id = self._next_id
            self.ws.send(self._message(msg_id, method, params, session_id))
        return msg_id

    def call(self, method, params=None, timeout=10.0, session_id=None) -> dict:
        event, box = threading.Event(), []
        with self._send_lock:
            self._next_id += 1
            msg_id = self._next_id
            self._pending[msg_id] = (event, box)
            self.ws.send(self._message(msg_id, method, params, session_id))
        if not event.wait(timeout):
            raise TimeoutError(f"CDP {method}: no answer in {timeout}s")
        reply = box[0]
        if "error" in reply:
            raise RuntimeError(f"CDP {method}: {reply['error']}")
        return reply.get("result", {})

    def _read(self):
        while True:
            try:
                msg = json.loads(self.ws.recv())
            except Exception:   # closed
                return
            if "id" in msg:
                waiter = self._pending.pop(msg["id"], None)
                if waiter:
                    waiter[1].append(msg)
                    waiter[0].set()
                elif "error" in msg:
                    self.errors.append(str(msg["error"]))
                continue
            params = msg.get("params", {})
            if "sessionId" in msg:
                params = dict(params, sessionId=msg["sessionId"])
            for handler in self._handlers.get(msg.get("method"), ()):
                try:
                    handler(params)
                except Exception as exc:   # keep reading; the test sees it in .errors
                    self.errors.append(f"{msg.get('method')}: {exc!r}")

    def close(self):
        with contextlib.suppress(Exception):
            self.ws.close()
        self._thread.join(2)


@dataclass
class NativeSignIn:
    """What one native sign-in produced, and the URL the wrapper hands to the WebView."""
    platform: str
    intercepted_url: str           # the site's authorization URL (web client), as intercepted
    outbound_url: str              # the library's native authorization URL (the system browser's)
    client_id: str
    redirect_uri: str
    state: str                     # the state the library sent
    browser_result: object         # what the system browser returned: {"redirect": …} or a word
    callback_url: str = ""         # the library's /_oauth_callback URL
    code: str | None = None        # read back from callback_url
    code_verifier: str | None = None
    error: str | None = None
    secrets: list[str] = field(default_factory=list)   # code, verifier (for the log checks)


@dataclass
class Interception:
    """A WebView navigation the library did not allow: its URL and each app's decision."""
    url: str
    decisions: dict


class WrapperApp:
    """The wrapper around one WebView. `native` maps platform → (client_id, redirect_uri), the
    native clients registered at the IdP; `provider` is the proxy's provider key. Each platform's
    app is its own simulator with its own settings (`Simulators`): provider `google` from a
    GoogleService-Info.plist on iOS and from BuildConfig's GOOGLE_CLIENT_ID on Android (each
    library derives the redirect); any other provider as an OpenID provider at the IdP's endpoint."""

    # Every wrapper of the test session, whoever made it: the run-wide log scan reads their
    # sign-ins (codes, verifiers, states).
    instances: list["WrapperApp"] = []

    def __init__(self, driver, *, initial_url: str, authorization_endpoint: str, native: dict,
                 ca_file: str, sims: Simulators, workdir, provider: str = "google"):
        self.driver = driver
        self.initial_url = initial_url
        self.authorization_endpoint = authorization_endpoint
        self.ca_file = ca_file
        self.provider = provider
        self.intercepted: list[Interception] = []
        self.results: list[NativeSignIn] = []     # every native sign-in, for the log scan
        WrapperApp.instances.append(self)
        self.passed_through: list[str] = []
        self._handled = 0
        self._seen = threading.Condition()
        workdir = tempfile.mkdtemp(prefix="wrapper-", dir=workdir)
        self.sims: dict[str, NativeSignInSim] = {}
        self.apps: dict[str, dict] = {}           # platform → the library's configuration
        for platform in PLATFORMS:               # both processes first: their start-ups overlap
            self.sims[platform] = sims.start(platform, f"{workdir}/sim-{platform}.log")
        for platform in PLATFORMS:
            self.apps[platform] = self.sims[platform].configure(**Simulators.settings(
                platform, f"{workdir}/{platform}", provider=provider, client=native[platform],
                authorization_endpoint=authorization_endpoint))
        self.cdp = CDPSession.for_driver(driver)
        self.cdp.on("Fetch.requestPaused", self._paused)
        # Every URL the WebView requested and every Location it was sent to (for checks that a
        # relay code or token never reaches the browser).
        self.seen_by_webview: list[str] = []
        self.cdp.on("Network.requestWillBeSent", self._request_sent)
        self.cdp.call("Network.enable")
        self.cdp.call("Fetch.enable", {"patterns": [
            {"urlPattern": "*", "resourceType": "Document", "requestStage": "Request"}]})

    def close(self):
        with contextlib.suppress(Exception):
            self.cdp.call("Fetch.disable", timeout=3)
        self.cdp.close()
        for sim in self.sims.values():
            sim.close()

    # -- 1. interception ---------------------------------------------------------------------------

    def _request_sent(self, params):
        self.seen_by_webview.append(params["request"]["url"])
        redirect = params.get("redirectResponse") or {}
        for name, value in (redirect.get("headers") or {}).items():
            if name.lower() in ("location", "set-cookie"):
                self.seen_by_webview.append(f"{name}: {value}")

    def _paused(self, params):
        url, request_id = params["request"]["url"], params["requestId"]
        target = "mainFrame" if params.get("frameId") == self.cdp.target_id else "subframe"
        try:
            decisions = {p: sim.decide(url, target) for p, sim in self.sims.items()}
        except Exception:
            self.cdp.send("Fetch.failRequest", {"requestId": request_id, "errorReason": "Failed"})
            raise                                   # into cdp.errors
        kinds = {d["decision"] for d in decisions.values()}
        if kinds == {"allow"}:
            self.cdp.send("Fetch.continueRequest", {"requestId": request_id})
            self.passed_through.append(url)
            return
        self.cdp.send("Fetch.failRequest", {"requestId": request_id, "errorReason": "Aborted"})
        if len(kinds) > 1:
            self.cdp.errors.append(f"the apps decided differently on {url}: {decisions}")
        with self._seen:
            self.intercepted.append(Interception(url, decisions))
            self._seen.notify_all()

    def wait_for_authorization(self, timeout=15.0) -> str:
        """The next intercepted authorization URL not yet handled."""
        deadline = time.monotonic() + timeout
        with self._seen:
            while len(self.intercepted) <= self._handled:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(
                        f"the library stopped no navigation of the WebView "
                        f"(now at {self.driver.current_url}; CDP errors: {self.cdp.errors})")
                self._seen.wait(min(left, 0.2))
            self._handled += 1
            return self.intercepted[self._handled - 1].url

    # -- 2 + 3. the native authorization step ------------------------------------------------------

    def start(self, url: str, platform: str) -> dict:
        """The library's `start` for `url`: the decision made when the WebView's navigation
        paused, or — for a URL the WebView never loaded (an attacker's own sign-in, in their own
        app) — one asked now."""
        with self._seen:
            made = next((i.decisions.pop(platform) for i in self.intercepted
                         if i.url == url and platform in i.decisions), None)
        decision = made or self.sims[platform].decide(url, "mainFrame")
        if decision["decision"] != "start":
            raise AssertionError(f"the library did not start a sign-in for {url}: {decision}")
        return decision

    def system_browser(self, start: dict, *, username: str, action: str = "approve"):
        """ASWebAuthenticationSession / Custom Tab on the library's URL: the login page, then its
        form (`approve`, `deny`) and the redirect to the callback scheme — or the user closes the
        browser on the login page (`cancel`), or the session cannot run (`fail`). Returns the
        BrowserResult for `callback`."""
        if action == "fail":
            return "failed"
        with requests.Session() as browser:
            # verify= on each call: a Session's own .verify loses to REQUESTS_CA_BUNDLE.
            page = browser.get(start["url"], allow_redirects=False, timeout=10, verify=self.ca_file)
            if page.status_code != 200:
                raise AssertionError(f"the IdP refused the native authorization request: "
                                     f"{page.status_code} {page.headers.get('X-OAuth-Error')} "
                                     f"{page.headers.get('Location')}")
            if action == "cancel":
                return "cancelled"
            resp = browser.post(start["url"], data={"username": username, "action": action},
                                allow_redirects=False, timeout=10, verify=self.ca_file)
        location = resp.headers.get("Location", "")
        if resp.status_code != 302 or urlsplit(location).scheme != start["callback_scheme"]:
            raise AssertionError(f"the IdP did not redirect to the callback scheme "
                                 f"{start['callback_scheme']}: {resp.status_code} {location!r}")
        return {"redirect": location}

    # -- 4. hand back to the WebView ---------------------------------------------------------------

    def hand_back(self, start: dict, browser_result, intercepted_url: str = "") -> NativeSignIn:
        """The library's /_oauth_callback URL for what the browser returned (not loaded yet)."""
        url = self.sims[start["platform"]].callback(start["id"], self.initial_url, browser_result)
        got = dict(parse_qsl(urlsplit(url).query))
        result = NativeSignIn(platform=start["platform"], intercepted_url=intercepted_url,
                              outbound_url=start["url"], client_id=start["client_id"],
                              redirect_uri=start["redirect_uri"], state=start["state"],
                              browser_result=browser_result, callback_url=url,
                              code=got.get("code"), code_verifier=got.get("code_verifier"),
                              error=got.get("error"))
        result.secrets = [v for v in (result.code, start["code_verifier"]) if v]
        self.results.append(result)
        return result

    def system_browser_sign_in(self, intercepted_url: str, platform: str, *,
                               username: str, action: str = "approve") -> NativeSignIn:
        """Steps 2 to 4 for one authorization URL of the site, as `platform`'s app."""
        start = self.start(intercepted_url, platform)
        outcome = self.system_browser(start, username=username, action=action)
        return self.hand_back(start, outcome, intercepted_url)

    def load(self, url: str):
        self.driver.get(url)

    def sign_in(self, platform: str, *, username: str, action: str = "approve",
                timeout: float = 15.0) -> NativeSignIn:
        """After the user tapped "Sign in with Google": intercept, sign in natively, load the
        callback into the WebView. Returns what happened (the callback URL included)."""
        url = self.wait_for_authorization(timeout)
        result = self.system_browser_sign_in(url, platform, username=username, action=action)
        self.load(result.callback_url)
        return result
