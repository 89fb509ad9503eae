"""The wrapper app's decisions, made by the NativeSignIn library itself: a client of
`native-sign-in-sim` (Sources/NativeSignInSim), one process per simulated app, JSON lines on its
stdin and stdout (the protocol: sim-protocol.md, next to this file).

The client is the same for every simulator that speaks that protocol: the iOS-shaped one
(`native-sign-in-sim`, NativeSignIn) and any other, whose command is passed in as `binary`.

The app's configuration goes through the library's plist reader: `write_plists` writes the
Info.plist (and for Google on iOS the GoogleService-Info.plist) the app bundle would carry.
"""

from __future__ import annotations

import json
import plistlib
import subprocess
import threading
from pathlib import Path

from harness import die_with_parent


class SimError(AssertionError):
    """The sim answered {"error": …}: a request the library (or the protocol) refused."""


class NativeSignInSim:
    """One simulated app: `configure` once, then `decide` and `callback` (the core's pure
    functions) or the flow ops (`navigate`, `browser_complete`, …: the app's one SignInFlow).
    Thread-safe (the WebView's navigations are decided on the CDP reader thread). `binary` is a
    path or a command (a list)."""

    def __init__(self, binary, log_path):
        self._lock = threading.Lock()
        self._log = open(log_path, "ab")
        command = [binary] if isinstance(binary, (str, Path)) else list(binary)
        self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self._log, preexec_fn=die_with_parent)

    def call(self, **request) -> dict:
        line = json.dumps(request) + "\n"
        with self._lock:
            if self.proc.poll() is not None:
                raise SimError(f"native-sign-in-sim exited ({self.proc.returncode})")
            self.proc.stdin.write(line.encode())
            self.proc.stdin.flush()
            answer = self.proc.stdout.readline()
        if not answer:
            raise SimError(f"native-sign-in-sim gave no answer to {request.get('op')}")
        reply = json.loads(answer)
        if "error" in reply and "decision" not in reply:
            raise SimError(f"native-sign-in-sim refused {request.get('op')}: {reply['error']}")
        return reply

    def configure(self, **settings) -> dict:
        return self.call(op="configure", **settings)

    def decide(self, url: str, target: str = "mainFrame") -> dict:
        return self.call(op="decide", url=url, target=target)

    def callback(self, request_id: str, initial_url: str, result) -> str:
        return self.call(op="callback", id=request_id, initial_url=initial_url, result=result)["url"]

    # -- the flow (sim-protocol.md, "The sign-in flow"): each returns the answer, events included

    def navigate(self, url: str, target: str = "mainFrame") -> dict:
        return self.call(op="navigate", url=url, target=target)

    def browser_complete(self, session: str, result) -> dict:
        return self.call(op="browser_complete", session=session, result=result)

    def fail_next_start(self, reason: str) -> dict:
        return self.call(op="fail_next_start", reason=reason)

    def cancel(self) -> dict:
        return self.call(op="cancel")

    def webview_gone(self) -> dict:
        return self.call(op="webview_gone")

    def open_link(self, url: str) -> dict:
        return self.call(op="open_link", url=url)

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()


def reversed_client_id(client_id: str) -> str:
    """GoogleService-Info.plist's REVERSED_CLIENT_ID, as Google's console writes it."""
    return ".".join(reversed(client_id.split(".")))


def write_plists(directory, *, oauth_enabled="YES", google_client_id=None) -> dict:
    """The app bundle's plists: Info.plist with OAuthEnabled (the string Xcode substitutes for
    `$(OAUTH_ENABLED)`), and GoogleService-Info.plist when the app has a Google iOS client.
    Returns the `configure` fields naming them."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    info = directory / "Info.plist"
    info.write_bytes(plistlib.dumps({"CFBundleIdentifier": "com.example.app",
                                     "OAuthEnabled": oauth_enabled}))
    fields = {"info_plist": str(info)}
    if google_client_id:
        google = directory / "GoogleService-Info.plist"
        google.write_bytes(plistlib.dumps({"CLIENT_ID": google_client_id,
                                           "REVERSED_CLIENT_ID": reversed_client_id(google_client_id),
                                           "BUNDLE_ID": "com.example.app"}))
        fields["google_service_info"] = str(google)
    return fields
