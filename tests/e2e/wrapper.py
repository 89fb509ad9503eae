"""The native wrapper app, simulated: what the iOS / Android shell around the WebView does for
"Sign in with Google", following the seed's rules (shared/seeds/003) to the letter.

1. **Intercept.** The WebView (headless Chromium, driven by Selenium) is watched for a main-frame
   navigation to the IdP's authorization endpoint. The wrapper opens its own DevTools (CDP)
   connection to the WebView's page target and enables `Fetch` request interception for
   `<authorization endpoint>*` at the request stage. When the site's redirect sends the WebView
   there, Chromium pauses the request (`Fetch.requestPaused`, `resourceType: Document`, the main
   frame's id); the wrapper records the URL and fails the request with `Aborted` — the WebView
   stays on the site, exactly like WKWebView's `decidePolicyFor navigationAction → .cancel` or
   Android's `shouldOverrideUrlLoading → true`. The IdP never sees the WebView's request.
   (Why not the alternatives: `Network.setBlockedURLs` does not stop main-frame navigations in
   Chromium 156 — the IdP received the request — and Selenium 4.51's BiDi request handler
   deadlocked when failing a request. Reading the performance log would see the URL but not stop
   the navigation.)
2. **Restart natively.** The outbound URL is only a trigger: the wrapper keeps `scope`, `state`
   and the allowlisted parameters the site set (`access_type`, `prompt`, `login_hint`,
   `include_granted_scopes`, `nonce`, `hd`), drops everything else (the web `client_id`,
   `redirect_uri`, the site's own PKCE challenge…), and substitutes its native `client_id`,
   custom-scheme `redirect_uri`, `response_type=code` and a fresh PKCE pair (S256).
3. **Sign in at the IdP** as the system browser would (ASWebAuthenticationSession / Custom Tab):
   plain HTTPS requests — GET the login page, POST its form (approve or deny) — and read the
   custom-scheme redirect (`Location: com.example.app:/oauth2redirect?code=…&state=…`), which is
   where the system browser hands control back to the app. The returned `state` must be the one
   sent (AppAuth checks it too).
4. **Hand back.** Build `<initialUrl>/_oauth_callback?provider=google&platform=…&client_id=…
   &redirect_uri=…&code=…&state=…&code_verifier=…` (on failure `…&state=…&error=…`, no code) and
   load it into the WebView as a full navigation.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import secrets
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from urllib.parse import parse_qs, urlencode, urlsplit

import requests
import websocket

KEPT = ("scope", "state")
ALLOWLISTED = ("access_type", "prompt", "login_hint", "include_granted_scopes", "nonce", "hd")


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

    def send(self, method, params=None) -> int:
        with self._send_lock:
            self._next_id += 1
            msg_id = self._next_id
            self.ws.send(json.dumps({"id": msg_id, "method": method, "params": params or {}}))
        return msg_id

    def call(self, method, params=None, timeout=10.0) -> dict:
        event, box = threading.Event(), []
        with self._send_lock:
            self._next_id += 1
            msg_id = self._next_id
            self._pending[msg_id] = (event, box)
            self.ws.send(json.dumps({"id": msg_id, "method": method, "params": params or {}}))
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
            for handler in self._handlers.get(msg.get("method"), ()):
                try:
                    handler(msg.get("params", {}))
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
    outbound_url: str              # the native authorization URL the system browser opened
    client_id: str
    redirect_uri: str
    state: str
    code: str | None = None
    code_verifier: str | None = None
    error: str | None = None
    callback_url: str = ""
    secrets: list[str] = field(default_factory=list)   # code, verifier (for the log checks)


class WrapperApp:
    """The wrapper around one WebView. `native` maps platform → (client_id, redirect_uri)."""

    # Every wrapper of the test session, whoever made it: the run-wide log scan reads their
    # sign-ins (codes, verifiers, states).
    instances: list["WrapperApp"] = []

    def __init__(self, driver, *, initial_url: str, authorization_endpoint: str, native: dict,
                 ca_file: str, provider: str = "google"):
        self.driver = driver
        self.initial_url = initial_url.rstrip("/")
        self.authorization_endpoint = authorization_endpoint
        self.native = native
        self.ca_file = ca_file
        self.provider = provider
        self.intercepted: list[str] = []
        self.results: list[NativeSignIn] = []     # every native sign-in, for the log scan
        WrapperApp.instances.append(self)
        self.passed_through: list[str] = []
        self._handled = 0
        self._seen = threading.Condition()
        self.cdp = CDPSession.for_driver(driver)
        self.cdp.on("Fetch.requestPaused", self._paused)
        # Every URL the WebView requested and every Location it was sent to (for checks that a
        # relay code or token never reaches the browser).
        self.seen_by_webview: list[str] = []
        self.cdp.on("Network.requestWillBeSent", self._request_sent)
        self.cdp.call("Network.enable")
        self.cdp.call("Fetch.enable", {"patterns": [
            {"urlPattern": authorization_endpoint + "*", "requestStage": "Request"}]})

    def close(self):
        with contextlib.suppress(Exception):
            self.cdp.call("Fetch.disable", timeout=3)
        self.cdp.close()

    # -- 1. interception ---------------------------------------------------------------------------

    def _request_sent(self, params):
        self.seen_by_webview.append(params["request"]["url"])
        redirect = params.get("redirectResponse") or {}
        for name, value in (redirect.get("headers") or {}).items():
            if name.lower() in ("location", "set-cookie"):
                self.seen_by_webview.append(f"{name}: {value}")

    def _paused(self, params):
        url = params["request"]["url"]
        main_frame = params.get("resourceType") == "Document" and \
            params.get("frameId") == self.cdp.target_id
        if main_frame and url.split("?", 1)[0] == self.authorization_endpoint:
            self.cdp.send("Fetch.failRequest", {"requestId": params["requestId"],
                                                "errorReason": "Aborted"})
            with self._seen:
                self.intercepted.append(url)
                self._seen.notify_all()
        else:
            self.cdp.send("Fetch.continueRequest", {"requestId": params["requestId"]})
            self.passed_through.append(url)

    def wait_for_authorization(self, timeout=15.0) -> str:
        """The next intercepted authorization URL not yet handled."""
        deadline = time.monotonic() + timeout
        with self._seen:
            while len(self.intercepted) <= self._handled:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(
                        f"the WebView never navigated to {self.authorization_endpoint} "
                        f"(now at {self.driver.current_url}; CDP errors: {self.cdp.errors})")
                self._seen.wait(min(left, 0.2))
            self._handled += 1
            return self.intercepted[self._handled - 1]

    # -- 2 + 3. the native authorization step ------------------------------------------------------

    def native_request(self, intercepted_url: str, platform: str) -> tuple[dict, str]:
        """The native authorization request's parameters, and the PKCE verifier."""
        query = parse_qs(urlsplit(intercepted_url).query, keep_blank_values=True)
        client_id, redirect_uri = self.native[platform]
        verifier = secrets.token_urlsafe(64)[:86]
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest())
        params = {"client_id": client_id, "redirect_uri": redirect_uri, "response_type": "code"}
        for name in KEPT + ALLOWLISTED:
            if name in query:
                params[name] = query[name][0]
        params["code_challenge"] = challenge.rstrip(b"=").decode()
        params["code_challenge_method"] = "S256"
        return params, verifier

    def system_browser_sign_in(self, intercepted_url: str, platform: str, *,
                               username: str, action: str = "approve") -> NativeSignIn:
        """ASWebAuthenticationSession / Custom Tab: the login page, its form, the redirect."""
        params, verifier = self.native_request(intercepted_url, platform)
        endpoint = self.authorization_endpoint
        outbound = endpoint + "?" + urlencode(params)
        with requests.Session() as browser:
            # verify= on each call: a Session's own .verify loses to REQUESTS_CA_BUNDLE.
            page = browser.get(endpoint, params=params, allow_redirects=False, timeout=10,
                               verify=self.ca_file)
            if page.status_code != 200:
                raise AssertionError(f"the IdP refused the native authorization request: "
                                     f"{page.status_code} {page.headers.get('X-OAuth-Error')} "
                                     f"{page.headers.get('Location')}")
            form = {"username": username, "action": action}
            resp = browser.post(endpoint, params=params, data=form, allow_redirects=False,
                                timeout=10, verify=self.ca_file)
        location = resp.headers.get("Location", "")
        client_id, redirect_uri = params["client_id"], params["redirect_uri"]
        if resp.status_code != 302 or not location.startswith(redirect_uri + "?"):
            raise AssertionError(f"the IdP did not redirect to the custom scheme: "
                                 f"{resp.status_code} {location!r}")
        got = parse_qs(urlsplit(location).query)
        state = (got.get("state") or [None])[0]
        if state != params.get("state"):
            raise AssertionError("the IdP returned another state than the one sent")
        result = NativeSignIn(platform=platform, intercepted_url=intercepted_url,
                              outbound_url=outbound, client_id=client_id,
                              redirect_uri=redirect_uri, state=state)
        if "code" in got:
            result.code, result.code_verifier = got["code"][0], verifier
            result.secrets = [result.code, verifier]
        else:
            result.error = (got.get("error") or ["unknown_error"])[0]
        result.callback_url = self.callback_url(result)
        self.results.append(result)
        return result

    # -- 4. hand back to the WebView ---------------------------------------------------------------

    def callback_url(self, r: NativeSignIn, **overrides) -> str:
        fields = [("provider", self.provider), ("platform", r.platform),
                  ("client_id", r.client_id), ("redirect_uri", r.redirect_uri)]
        if r.code is not None:
            fields += [("code", r.code), ("state", r.state), ("code_verifier", r.code_verifier)]
        else:
            fields += [("state", r.state), ("error", r.error)]
        fields = [(k, overrides.get(k, v)) for k, v in fields]
        return f"{self.initial_url}/_oauth_callback?{urlencode(fields)}"

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
