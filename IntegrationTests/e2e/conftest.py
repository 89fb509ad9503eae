"""Fixtures of the end-to-end suite: everything real, on loopback.

    WebView (headless Chromium, Selenium)  ──►  callback-proxy :P  ──►  legacy Rails app (puma)
        ▲  the wrapper app (wrapper.py) intercepts          │ internal :I /_oauth/token ◄── app's token URL
        │  the IdP navigation and signs in natively          ▼
        └──────────────────────────────────────────  strict test IdP (HTTPS, throwaway CA)

Session-wide (started once, ~10 s): the throwaway CA, the IdP (with a clients file written for
this run's ports), the Rails app prepared once and served by two pumas — `relay` (its token URL
set to the proxy's relay endpoint, through the recording TokenTap) and `plain` (the app as it was:
token URL = the IdP's) — and one Chromium. Per test: a fresh proxy (on the session's fixed ports:
the IdP's web client needs the exact redirect URI), a clean browser (cookies cleared), the IdP
reset. On failure every process's output of that test is printed.

The wrapper app's decisions are its platform's library's: the iOS app's through
`native-sign-in-sim` (NATIVE_SIGN_IN_SIM, else .build/release/native-sign-in-sim, built here once
if missing), the Android app's through the JVM core's `scripts/native-sign-in-sim-android`
(NATIVE_SIGN_IN_SIM_ANDROID, else that script, which builds its jar on first use).

Run:  CALLBACK_PROXY_BIN=/path/to/callback-proxy NATIVE_SIGN_IN_SIM=/path/to/native-sign-in-sim \
      .venv/bin/python -m pytest -q IntegrationTests/e2e
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

# The suite's helper modules (harness, wrapper, site_pages) are imported by their plain names.
sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import (NATIVE, REPO_ROOT, Proxy, RailsApp, TokenTap, clients_file,  # noqa: E402
                     free_port, prepare_rails_app, proxy_config, start_browser, tail)
from flow_wrapper import FlowApp  # noqa: E402
from native_sim import Simulators, command_from_environment  # noqa: E402
from wrapper import WrapperApp  # noqa: E402
from secret_scan import (_ledger_collects_cookies, pytest_collection_modifyitems,  # noqa: E402,F401
                         secret_ledger)

sys.path.insert(0, str(REPO_ROOT / "IntegrationTests" / "idp"))
from idp_harness import IdP, make_test_pki  # noqa: E402

DEFAULT_BIN = REPO_ROOT / ".build" / "release" / "callback-proxy"


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    rep = yield
    setattr(item, "rep_" + rep.when, rep)
    return rep


def _failed(request) -> bool:
    rep = getattr(request.node, "rep_call", None)
    return rep is not None and rep.failed


# -------------------------------------------------------------------------------------------------
# Session: ports, PKI, IdP, Rails, browser


@pytest.fixture(scope="session")
def proxy_bin():
    path = Path(os.environ.get("CALLBACK_PROXY_BIN", DEFAULT_BIN))
    if not path.is_absolute():
        path = REPO_ROOT / path
    if not os.access(path, os.X_OK):
        pytest.fail(f"proxy binary not found: {path} (build it, or set CALLBACK_PROXY_BIN)",
                    pytrace=False)
    return str(path)


@pytest.fixture(scope="session")
def sim_bin():
    """The iOS-shaped app, `native-sign-in-sim`: NATIVE_SIGN_IN_SIM, else the release build
    (built now if absent)."""
    argv, given = command_from_environment("ios")
    path = Path(argv[0])
    if not given and not os.access(path, os.X_OK):
        build = subprocess.run(["swift", "build", "-c", "release", "--product", "native-sign-in-sim"],
                               cwd=REPO_ROOT, capture_output=True, text=True)
        if build.returncode != 0:
            pytest.fail(f"swift build --product native-sign-in-sim failed:\n{build.stderr[-3000:]}",
                        pytrace=False)
    if not os.access(path, os.X_OK):
        pytest.fail(f"native-sign-in-sim not found: {path} (build it, or set NATIVE_SIGN_IN_SIM)",
                    pytrace=False)
    return argv if len(argv) > 1 else str(path)


@pytest.fixture(scope="session")
def android_sim():
    """The Android-shaped app: NATIVE_SIGN_IN_SIM_ANDROID (a command), else
    scripts/native-sign-in-sim-android. Started once here with no input, which builds its jar if
    it is missing or stale (~20 s), so that no test pays for it."""
    argv, _ = command_from_environment("android")
    try:
        done = subprocess.run(argv, input=b"", capture_output=True, timeout=600)
    except OSError as exc:
        pytest.fail(f"the Android simulator cannot run: {argv} ({exc}; set NATIVE_SIGN_IN_SIM_ANDROID)",
                    pytrace=False)
    if done.returncode != 0:
        pytest.fail(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stderr.decode()[-3000:]}",
                    pytrace=False)
    return argv


@pytest.fixture(scope="session")
def simulators(sim_bin, android_sim) -> Simulators:
    """The one place that says which simulator plays which platform's app (native_sim.py)."""
    return Simulators({"ios": sim_bin, "android": android_sim})


@pytest.fixture(scope="session")
def ports():
    taken: list[int] = []
    for _ in range(5):
        taken.append(free_port(taken))
    proxy, internal, rails_relay, rails_plain, tap = taken
    return SimpleNamespace(proxy=proxy, internal=internal, rails_relay=rails_relay,
                           rails_plain=rails_plain, tap=tap)


@pytest.fixture(scope="session")
def e2e_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("e2e")


@pytest.fixture(scope="session")
def pki(e2e_dir):
    return make_test_pki(e2e_dir / "pki")


@pytest.fixture(scope="session")
def idp_server(pki, ports, e2e_dir):
    """The strict test IdP, HTTPS, test hooks on, with this run's clients file: the web client's
    redirect URIs are the app's callback through the proxy and on each puma's own port."""
    path = clients_file(e2e_dir / "clients.json",
                        [ports.proxy, ports.rails_relay, ports.rails_plain])
    srv = IdP.start(pki, e2e_dir / "idp", clients_file=path)
    yield srv
    srv.stop()


@pytest.fixture
def idp(idp_server, request):
    if idp_server.proc.poll() is not None:
        pytest.fail(f"the IdP died:\n{idp_server.log_tail()}")
    idp_server.reset()
    offset = Path(idp_server.log_path).stat().st_size
    yield idp_server
    if _failed(request):
        with open(idp_server.log_path, errors="replace") as f:
            f.seek(offset)
            print(f"--- IdP log during the test ({idp_server.log_path})\n{f.read()[-6000:]}")


@pytest.fixture(scope="session")
def token_tap(ports):
    tap = TokenTap(ports.tap, ports.internal)
    yield tap
    tap.stop()


@pytest.fixture(scope="session")
def rails(idp_server, pki, ports, token_tap, e2e_dir):
    """Two pumas of the one legacy app, booted together: `relay` (OAUTH_TOKEN_URL = the proxy's
    relay token endpoint, via the tap) and `plain` (no OAUTH_TOKEN_URL: the app before)."""
    app_dir = prepare_rails_app(e2e_dir)
    common = dict(issuer=idp_server.issuer, ca_file=pki.ca_cert)
    apps = SimpleNamespace(
        dir=app_dir,
        relay=RailsApp(app_dir, ports.rails_relay, e2e_dir / "rails-relay.log",
                       token_url=token_tap.token_url, name="rails-relay", **common),
        plain=RailsApp(app_dir, ports.rails_plain, e2e_dir / "rails-plain.log",
                       name="rails-plain", **common))
    try:
        apps.relay.wait_ready()
        apps.plain.wait_ready()
        yield apps
    finally:
        apps.relay.stop()
        apps.plain.stop()


@pytest.fixture(scope="session")
def browser(e2e_dir, pki):
    driver = start_browser(e2e_dir / "chromium-profile", pki.server_cert)
    yield driver
    with contextlib.suppress(Exception):
        driver.quit()


# -------------------------------------------------------------------------------------------------
# Per test


@pytest.fixture
def webview(browser, request, tmp_path):
    """The session's Chromium with no cookies, on about:blank. On failure: the page's URL and
    text, and a screenshot in the test's tmp_path."""
    browser.execute_cdp_cmd("Network.clearBrowserCookies", {})
    browser.get("about:blank")
    yield browser
    if _failed(request):
        with contextlib.suppress(Exception):
            shot = tmp_path / "webview.png"
            browser.save_screenshot(str(shot))
            print(f"--- WebView at {browser.current_url} (screenshot {shot}):\n"
                  f"{browser.find_element('tag name', 'body').text[:3000]}")


@pytest.fixture
def app_logs(rails, request):
    """Prints what each puma logged during a failed test."""
    offsets = {a.process.log_path: a.process.log_path.stat().st_size
               for a in (rails.relay, rails.plain)}
    yield
    if _failed(request):
        for path, offset in offsets.items():
            with open(path, errors="replace") as f:
                f.seek(offset)
                print(f"--- {path.name} during the test\n{f.read()[-6000:]}")


@pytest.fixture
def proxy_factory(proxy_bin, ports, tmp_path, request, idp, rails, token_tap, app_logs):
    """start(handoff="relay"|"params"|None, upstream=…): a proxy on the session's ports (None:
    plain proxying, no providers). One at a time; stopped at teardown, logs printed on failure."""
    started: list[Proxy] = []

    def start(handoff="relay", upstream=None, **config):
        for p in started:
            p.stop()
        upstream = upstream or rails.relay.url
        text = proxy_config(port=ports.proxy, internal_port=ports.internal, upstream=upstream,
                            idp=idp if handoff else None, handoff=handoff, **config)
        p = Proxy(proxy_bin, tmp_path, text, port=ports.proxy, internal_port=ports.internal,
                  name=f"proxy{len(started)}", tls=config.get("tls") is not None)
        started.append(p)
        return p

    token_tap.clear()
    yield start
    died = [p for p in started if not p.alive()]
    for p in started:
        p.stop()
    if _failed(request) or died:
        for p in started:
            print(f"--- {p.config_path.name}\n{p.config_path.read_text()}")
            print(f"--- proxy log ({p.stderr_path})\n{tail(p.stderr_path)}")
            print(f"--- proxy access log ({p.stdout_path})\n{tail(p.stdout_path, 3000)}")
        print(f"--- token tap records: {token_tap.records}")
    if died:
        pytest.fail(f"the proxy exited during the test: {[p.proc.returncode for p in died]}",
                    pytrace=False)


@pytest.fixture
def relay_proxy(proxy_factory):
    return proxy_factory("relay")


@pytest.fixture
def params_proxy(proxy_factory):
    """The relay proxy plus a second provider, `google_params`, in params mode (harness.py)."""
    return proxy_factory("relay", params_provider=True)


@pytest.fixture
def wrapper_factory(webview, idp, pki, simulators, tmp_path):
    """wrapper_factory(proxy, provider="google") → the native wrapper around the WebView (its iOS
    and its Android app), with initialUrl = the proxy's public URL. Closed (interception off, sims
    ended) at teardown."""
    made: list[WrapperApp] = []

    def make(proxy, provider="google"):
        w = WrapperApp(webview, initial_url=proxy.url,
                       authorization_endpoint=idp.discovery()["authorization_endpoint"],
                       native=NATIVE, ca_file=pki.ca_cert, sims=simulators, workdir=tmp_path,
                       provider=provider)
        made.append(w)
        return w

    yield make
    for w in made:
        w.close()


@pytest.fixture
def flow_factory(webview, idp, pki, simulators, tmp_path):
    """flow_factory(proxy, platform="ios", **flow settings) → `platform`'s app driven through its
    SignInFlow (flow_wrapper.py), by that platform's simulator with its own settings (plists on
    iOS, BuildConfig fields on Android; `Simulators.settings`): its Google provider with the
    platform's native client, recognised at the IdP's endpoint; initial_url = the proxy's URL."""
    made: list[FlowApp] = []

    def make(proxy, platform="ios", **flow_settings):
        settings = Simulators.settings(platform, tmp_path / f"{platform}-{len(made)}", provider="google",
                                       client=NATIVE[platform],
                                       authorization_endpoint=idp.discovery()["authorization_endpoint"])
        app = FlowApp(webview, sim=simulators.start(platform, tmp_path / f"sim-{platform}-{len(made)}.log"),
                      settings=settings, initial_url=proxy.url, ca_file=pki.ca_cert, **flow_settings)
        made.append(app)
        return app

    yield make
    for app in made:
        app.close()


@pytest.fixture(scope="session", autouse=True)
def _suite_clock():
    start = time.monotonic()
    yield
    print(f"\n[e2e] session wall time {time.monotonic() - start:.1f}s")


@pytest.fixture
def username(request):
    """A user nobody signed in as before (so the app's sign-in count starts at 0)."""
    import re
    import secrets
    stem = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")[:40]
    return f"{stem}-{secrets.token_hex(3)}@example.test"
