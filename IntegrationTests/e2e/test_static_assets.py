"""Static files (`static:`) in the WebView's engine (headless Chromium): a page whose stylesheet,
script and images come from the proxy's static root under /assets/ with fingerprinted names, in
front of the legacy Rails app — over plain HTTP/1.1 and over TLS, where Chromium speaks HTTP/2.

The page is a file of the root too (`/welcome.html`, as a Rails app's `public/` holds
`404.html`): the app's layout links no assets, and its views are not this suite's to change.

What the browser shows and reports (Resource Timing) and what the proxy and the app logged:

- the stylesheet applied, the script ran, both images decoded — from the precompressed siblings
  the browser asked for: `contentEncoding` and `encodedBodySize` name the sibling the proxy sent
  (Brotli where there is a `.br`, gzip where the build left only `.gz`, the plain file where there
  is neither), `decodedBodySize` the plain file's size;
- on reload the fingerprinted assets (`Cache-Control: …, immutable`) come from the browser's
  cache, not asked for again, while the page (no `Cache-Control`) is revalidated with a
  conditional request that the proxy answers 304;
- none of it reached the app, which still answers what the root does not hold (its home page).

Chromium 156 asks for `gzip, deflate, br, zstd` on http://127.0.0.1 as well as over TLS (loopback
is a secure context), so Brotli is expected on both; on plain HTTP to any other host it asks for
`gzip, deflate` only, and the `.gz` sibling is what it gets — the SVG, with no `.br`, is that case.
"""

from __future__ import annotations

import gzip
import hashlib
import struct
import time
import zlib
from collections import Counter

import brotli
import pytest

from site_pages import status, text_of, wait_for

CSS = b"body { background-color: rgb(12, 34, 56) }\n" + b"/* a stylesheet the size of a real one */\n" * 60
JS = (b'document.getElementById("script").textContent = "the script ran";\n'
      + b"// a script the size of a real one\n" * 60)
SVG = (b'<svg xmlns="http://www.w3.org/2000/svg" width="40" height="30">'
       + b'<rect width="40" height="30" fill="rgb(200, 30, 30)"/>' + b"<!-- drawn by hand -->" * 40 + b"</svg>")


def png(width, height) -> bytes:
    """A solid-colour RGB PNG (zlib-compressed already: an asset pipeline leaves it alone)."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    rows = b"".join(b"\x00" + b"\x1e\x8c\x50" * width for _ in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


# name → (bytes, the siblings the build wrote): `rails assets:precompile` writes `.gz` for text
# types, and `.br` with a Brotli plugin; images that are compressed already get neither.
ASSETS = {
    "site.css": (CSS, ("br", "gzip")),
    "site.js": (JS, ("br", "gzip")),
    "logo.svg": (SVG, ("gzip",)),
    "photo.png": (png(24, 12), ()),
}
SUFFIX = {"br": ".br", "gzip": ".gz"}


def fingerprinted(name, data) -> str:
    """/assets/<stem>-<sha256>.<ext>, as Sprockets 4 names what it compiles."""
    stem, ext = name.rsplit(".", 1)
    return f"/assets/{stem}-{hashlib.sha256(data).hexdigest()}.{ext}"


def write_root(root) -> dict:
    """public/ with the page and the assets; returns path → (plain size, the coding Chromium
    gets, the size of the file sent: the sibling's, or the plain file's)."""
    (root / "assets").mkdir(parents=True)
    paths = {name: fingerprinted(name, data) for name, (data, _) in ASSETS.items()}
    expected = {}
    for name, (data, siblings) in ASSETS.items():
        path = root / paths[name].lstrip("/")
        path.write_bytes(data)
        encoded = {"br": brotli.compress(data), "gzip": gzip.compress(data, mtime=0)}
        for coding in siblings:
            path.with_name(path.name + SUFFIX[coding]).write_bytes(encoded[coding])
        # Chromium takes both; the proxy prefers Brotli on a tie.
        coding = "br" if "br" in siblings else "gzip" if "gzip" in siblings else ""
        expected[paths[name]] = (len(data), coding, len(encoded.get(coding, data)))
    (root / "welcome.html").write_text(f"""<!doctype html>
<html><head><title>Static assets</title>
<link rel="stylesheet" href="{paths['site.css']}"></head>
<body><p id="script">the script did not run</p>
<img id="logo" src="{paths['logo.svg']}" alt="logo"> <img id="photo" src="{paths['photo.png']}" alt="photo">
<script src="{paths['site.js']}"></script></body></html>
""")
    return expected


RESOURCES = """return performance.getEntriesByType('navigation').concat(performance.getEntriesByType('resource'))
  .map(e => ({url: e.name, protocol: e.nextHopProtocol, transfer: e.transferSize, encoded: e.encodedBodySize,
              decoded: e.decodedBodySize, coding: e.contentEncoding, delivery: e.deliveryType}))"""


def loaded(driver, base) -> dict:
    """The page once its script ran, stylesheet applied and images decoded: path → its Resource
    Timing entry (the page's own is its navigation entry)."""
    wait_for(driver, lambda d: text_of(d, "script") == "the script ran", "the page's script")
    assert driver.execute_script("return getComputedStyle(document.body).backgroundColor") == "rgb(12, 34, 56)"
    images = driver.execute_script(
        "return Array.from(document.images, i => [i.id, i.complete, i.naturalWidth, i.naturalHeight])")
    assert images == [["logo", True, 40, 30], ["photo", True, 24, 12]]
    return {e["url"].removeprefix(base): e for e in driver.execute_script(RESOURCES)}


def access_lines(proxy, until_path, timeout=5.0) -> list[dict]:
    """The access log's lines once the one for `until_path` is written."""
    deadline = time.monotonic() + timeout
    while True:
        lines = [e for e in proxy.log_events() if e.get("type") == "access"]
        if any(e["path"] == until_path for e in lines) or time.monotonic() > deadline:
            return lines
        time.sleep(0.05)


@pytest.mark.parametrize("scheme", ["http", "https"], ids=["http1", "h2-over-tls"])
def test_assets_from_the_static_root_are_precompressed_and_cached_by_the_browser(
        webview, proxy_factory, rails, pki, tmp_path, scheme):
    expected = write_root(tmp_path / "public")
    protocol = "h2" if scheme == "https" else "http/1.1"
    proxy = proxy_factory(None, static_root=tmp_path / "public",
                          tls=(pki.server_cert, pki.server_key) if scheme == "https" else None)
    rails_log = rails.relay.process.log_path
    rails_offset = rails_log.stat().st_size
    webview.execute_cdp_cmd("Network.clearBrowserCache", {})

    webview.get(proxy.url + "/welcome.html")
    first = loaded(webview, proxy.url)
    assert first["/welcome.html"]["protocol"] == protocol
    for path, (size, coding, sent) in expected.items():
        entry = first[path]
        assert (entry["protocol"], entry["coding"], entry["encoded"], entry["decoded"]) == \
            (protocol, coding, sent, size), path
        assert entry["transfer"] > sent, f"{path} came over the network: {entry}"

    # A reload: the page is asked for again (conditionally), the immutable assets are not.
    webview.execute_script("window.beforeReload = true")
    webview.refresh()
    again = loaded(webview, proxy.url)
    assert webview.execute_script("return window.beforeReload") is None, "a new document"
    assert again["/welcome.html"]["transfer"] > 0
    for path, (size, coding, sent) in expected.items():
        entry = again[path]
        assert (entry["transfer"], entry["delivery"], entry["coding"], entry["decoded"]) == \
            (0, "cache", coding, size), path

    # What the root does not hold is the app's, through the same proxy.
    webview.get(proxy.url + "/")
    assert status(webview) == "Not signed in"

    lines = access_lines(proxy, "/")
    assert {e["protocol"] for e in lines} == {protocol}
    served = Counter((e["path"], e["status"], e["upstream_status"]) for e in lines if e["path"] != "/favicon.ico")
    assert served == Counter({("/welcome.html", 200, 0): 1, ("/welcome.html", 304, 0): 1, ("/", 200, 200): 1,
                              **{(path, 200, 0): 1 for path in expected}})
    with open(rails_log, errors="replace") as f:
        f.seek(rails_offset)
        app_saw = f.read()
    assert '"/"' in app_saw and "/assets/" not in app_saw and "/welcome.html" not in app_saw
