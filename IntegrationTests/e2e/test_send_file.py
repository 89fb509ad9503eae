"""send_file behind the proxy, with the real Rails app and its real Rack::Sendfile: the app, with
`config.action_dispatch.x_sendfile_header = "X-Accel-Redirect"` and nothing else changed, answers
a download with an empty body and `X-Accel-Redirect` because the proxy (`x_accel_redirect`) told
it where its internal location is (`X-Accel-Mapping`); the client gets the file's bytes from the
proxy, with the app's `Content-Disposition`. Client-sent `X-Sendfile-Type` / `X-Accel-Mapping`
never reach the app (CVE-2025-61780), and nobody reaches the internal location from outside."""

from __future__ import annotations

import http.client
import os
from pathlib import Path

import pytest

LOCATION = "/_files"


def request(url_port, path, headers=None, method="GET"):
    host, port = url_port
    c = http.client.HTTPConnection(host, port, timeout=10)
    try:
        c.request(method, path, headers=headers or {})
        r = c.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        c.close()


def port_of(url):
    return ("127.0.0.1", int(url.rsplit(":", 1)[1]))


@pytest.fixture
def storage(rails):
    """storage/ of the app as Rails spells it (Rails.root is the real path): the root the proxy
    maps, with downloads/report.bin in it."""
    root = Path(os.path.realpath(rails.dir)) / "storage"
    (root / "downloads").mkdir(parents=True, exist_ok=True)
    data = os.urandom(300_000)
    (root / "downloads" / "report.bin").write_bytes(data)
    return root, data


def test_the_app_hands_the_download_to_the_proxy_which_sends_the_file(proxy_factory, rails, storage):
    root, data = storage
    p = proxy_factory(handoff=None, x_accel_redirect=[(LOCATION, root)])
    status, headers, body = request(port_of(p.url), "/downloads/report.bin")
    assert status == 200, (headers, body[:300])
    assert body == data
    assert headers["content-disposition"].startswith('attachment; filename="report-report.bin"')
    assert headers["content-length"] == str(len(data))
    assert "x-accel-redirect" not in headers
    # The proxy's validators and ranges: Rails' send_file has neither.
    st = os.stat(root / "downloads" / "report.bin")
    assert headers["etag"] == f'"{int(st.st_mtime):x}-{st.st_size:x}"'
    status, headers, body = request(port_of(p.url), "/downloads/report.bin", {"Range": "bytes=100-199"})
    assert status == 206 and body == data[100:200]
    # What the app itself answered: the header and no bytes — so they came from the proxy.
    status, headers, body = request(port_of(rails.relay.url), "/downloads/report.bin",
                                    {"X-Sendfile-Type": "X-Accel-Redirect",
                                     "X-Accel-Mapping": f"{root}/={LOCATION}/"})
    assert status == 200 and body == b""
    assert headers["x-accel-redirect"] == f"{LOCATION}/downloads/report.bin"


def test_without_the_mapping_the_app_sends_the_bytes_itself(proxy_factory, rails, storage):
    root, data = storage
    p = proxy_factory(handoff=None)
    status, headers, body = request(port_of(p.url), "/downloads/report.bin")
    assert status == 200 and body == data and "x-accel-redirect" not in headers


@pytest.mark.parametrize("configured", [False, True])
def test_a_client_cannot_steer_rack_sendfile(proxy_factory, rails, storage, configured):
    """The app honours X-Accel-Mapping from whoever sends it (shown straight to puma); through
    the proxy, a client's never arrives — with the feature off, and on."""
    root, data = storage
    spoofed = {"X-Sendfile-Type": "X-Accel-Redirect", "X-Accel-Mapping": f"{root}/=/leak/"}
    status, headers, body = request(port_of(rails.relay.url), "/downloads/report.bin", spoofed)
    assert headers.get("x-accel-redirect") == "/leak/downloads/report.bin" and body == b""
    p = proxy_factory(handoff=None, x_accel_redirect=[(LOCATION, root)] if configured else ())
    status, headers, body = request(port_of(p.url), "/downloads/report.bin", spoofed)
    assert status == 200 and body == data and "x-accel-redirect" not in headers


def test_nobody_reaches_the_internal_location_from_outside(proxy_factory, rails, storage):
    root, _ = storage
    p = proxy_factory(handoff=None, x_accel_redirect=[(LOCATION, root)])
    for path in (f"{LOCATION}/downloads/report.bin", "/_files%2Fdownloads/report.bin", "/x/../_files/downloads/report.bin"):
        status, _, body = request(port_of(p.url), path)
        assert status == 404 and len(body) < 1000, path
