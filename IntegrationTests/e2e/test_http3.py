"""The sign-in, end to end, over HTTP/3: headless Chromium told to use QUIC for the proxy's origin
(`--origin-to-force-quic-on`, as a phone's WebView does once Alt-Svc advertised it), the wrapper
app's native sign-in, the unchanged Rails + Devise app behind — the user ends up signed in, every
request of the WebView (the callback among them) having gone over h3.
"""

from __future__ import annotations

import contextlib

import pytest

from harness import NATIVE, start_browser
from site_pages import notice, open_home, sign_ins, status, tap_sign_in, wait_home
from wrapper import WrapperApp

SUCCESS = "Successfully authenticated from Google account."


@pytest.fixture
def quic_webview(e2e_dir, pki, ports):
    """A Chromium of its own (the flag is per process) that speaks only HTTP/3 to the proxy."""
    driver = start_browser(e2e_dir / "chromium-h3-profile", pki.server_cert,
                           extra_args=("--enable-quic", f"--origin-to-force-quic-on=127.0.0.1:{ports.proxy}"))
    yield driver
    with contextlib.suppress(Exception):
        driver.quit()


@pytest.mark.parametrize("platform", ["ios", "android"])
def test_native_sign_in_over_http3_signs_the_user_into_the_app(quic_webview, proxy_factory, pki, idp, simulators,
                                                               tmp_path, username, platform):
    proxy = proxy_factory("relay", tls=(pki.server_cert, pki.server_key), http3=True)
    wrapper = WrapperApp(quic_webview, initial_url=proxy.url,
                         authorization_endpoint=idp.discovery()["authorization_endpoint"],
                         native=NATIVE, ca_file=pki.ca_cert, sims=simulators, workdir=tmp_path, provider="google")
    try:
        open_home(quic_webview, proxy.url)
        assert status(quic_webview) == "Not signed in"
        tap_sign_in(quic_webview)
        wrapper.sign_in(platform, username=username)
        wait_home(quic_webview)
    finally:
        wrapper.close()

    assert quic_webview.current_url == proxy.url + "/"
    assert status(quic_webview) == f"Signed in as {username}"
    assert sign_ins(quic_webview) == 1
    assert notice(quic_webview) == SUCCESS
    assert quic_webview.execute_script(
        "return performance.getEntriesByType('navigation')[0].nextHopProtocol") == "h3"

    lines = [e for e in proxy.log_events() if e.get("type") == "access"]
    callback = [e for e in lines if e["path"] == "/_oauth_callback"]
    assert len(callback) == 1 and callback[0]["protocol"] == "h3" and callback[0]["status"] in (200, 302), callback
    assert {e["protocol"] for e in lines} == {"h3"}, sorted({(e["path"], e["protocol"]) for e in lines})
