"""The wrapper app's decisions, made by its platform's library itself: a client of the simulators
that speak sim-protocol.md (next to this file), one process per simulated app, JSON lines on its
stdin and stdout.

- **iOS**: `native-sign-in-sim` (Sources/NativeSignInSim, the Swift `NativeSignIn`), configured
  from the app bundle's plists, which `write_plists` writes (Info.plist, and for Google the
  GoogleService-Info.plist), read by the library's plist reader.
- **Android**: `scripts/native-sign-in-sim-android` (the JVM core under Android/), configured from
  the app's BuildConfig fields (`build_config`), validated by the core as the app does at start-up.

`Simulators` is the one place that picks the program and the settings for a platform.
"""

from __future__ import annotations

import json
import os
import plistlib
import shlex
import subprocess
import threading
from pathlib import Path

from harness import REPO_ROOT, die_with_parent


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
        command = [str(binary)] if isinstance(binary, (str, Path)) else [str(c) for c in binary]
        self.name = Path(command[0]).name
        self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self._log, preexec_fn=die_with_parent)

    def call(self, **request) -> dict:
        line = json.dumps(request) + "\n"
        with self._lock:
            if self.proc.poll() is not None:
                raise SimError(f"{self.name} exited ({self.proc.returncode})")
            self.proc.stdin.write(line.encode())
            self.proc.stdin.flush()
            answer = self.proc.stdout.readline()
        if not answer:
            raise SimError(f"{self.name} gave no answer to {request.get('op')}")
        reply = json.loads(answer)
        if "error" in reply and "decision" not in reply:
            raise SimError(f"{self.name} refused {request.get('op')}: {reply['error']}")
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

    # -- Android only: the phone's lifecycle (sim-protocol.md)

    def activity_result(self, result, request=None) -> dict:
        fields = {"request": request} if request is not None else {}
        return self.call(op="activity_result", result=result, **fields)

    def activity_recreated(self) -> dict:
        return self.call(op="activity_recreated")

    def process_restarted(self) -> dict:
        return self.call(op="process_restarted")

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


def build_config(*, google_client_id=None, oauth_enabled=True) -> dict:
    """The Android app's BuildConfig fields (docs/native.md): OAUTH_ENABLED and, with a Google
    Android client, GOOGLE_CLIENT_ID and OAUTH_REDIRECT_SCHEME (AppAuth's manifest placeholder:
    the reversed client id, as the app's build.gradle.kts derives it)."""
    fields = {"OAUTH_ENABLED": oauth_enabled}
    if google_client_id:
        fields.update(GOOGLE_CLIENT_ID=google_client_id,
                      OAUTH_REDIRECT_SCHEME=reversed_client_id(google_client_id))
    return fields


PLATFORMS = ("ios", "android")
# platform → (environment variable, default command)
COMMANDS = {"ios": ("NATIVE_SIGN_IN_SIM", REPO_ROOT / ".build" / "release" / "native-sign-in-sim"),
            "android": ("NATIVE_SIGN_IN_SIM_ANDROID", REPO_ROOT / "scripts" / "native-sign-in-sim-android")}


def command_from_environment(platform) -> tuple[list[str], bool]:
    """The simulator command for `platform` and whether the environment named it. The variable may
    hold a command with arguments (split as a shell would); a relative path is the repository's."""
    variable, default = COMMANDS[platform]
    given = os.environ.get(variable)
    argv = shlex.split(given) if given else [str(default)]
    if not os.path.isabs(argv[0]) and os.sep in argv[0]:
        argv[0] = str(REPO_ROOT / argv[0])
    return argv, bool(given)


class Simulators:
    """The wrapper app per platform: which simulator plays it, and the platform's own settings for
    it. `commands` maps platform → argv."""

    def __init__(self, commands: dict):
        self.commands = dict(commands)

    def start(self, platform, log_path) -> NativeSignInSim:
        return NativeSignInSim(self.commands[platform], log_path)

    @staticmethod
    def settings(platform, directory, *, provider, client, authorization_endpoint) -> dict:
        """`configure`'s platform fields for an app whose provider `provider` (the proxy's key) is
        at `authorization_endpoint` with the native `client` (client_id, redirect_uri). Google is
        configured the platform's way — GoogleService-Info.plist on iOS, GOOGLE_CLIENT_ID on
        Android, both deriving the redirect from the client id — and recognised at the IdP's
        endpoint instead of accounts.google.com; any other provider is an OpenID provider at it."""
        client_id, redirect_uri = client
        if provider == "google":
            if platform == "ios":
                settings = dict(write_plists(directory, google_client_id=client_id))
            else:
                settings = dict(build_config=build_config(google_client_id=client_id))
            return dict(platform=platform, google_authorization_endpoint=authorization_endpoint, **settings)
        oidc = [{"name": provider, "authorization_endpoint": authorization_endpoint,
                 "client_id": client_id, "redirect_uri": redirect_uri, "pkce": True}]
        settings = write_plists(directory) if platform == "ios" else dict(build_config=build_config())
        return dict(platform=platform, providers=oidc, **settings)
