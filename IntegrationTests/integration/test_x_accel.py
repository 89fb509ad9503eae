"""X-Accel-Redirect (`x_accel_redirect:`) through the real binary: the test upstream's /accel
answers as Rack::Sendfile does (an empty body, `X-Accel-Redirect: /_files/…`), and the client gets
the file from the location's root instead — over HTTP/1.1 (plain: sendfile; TLS), h2c and h2,
byte-exact; validators, 304, 206 and HEAD against the client's own request; the upstream's fields
nginx keeps, and none of the others. A client never reaches an internal location itself, in any
spelling; the fields that steer Rack::Sendfile only ever come from the proxy; a path the root may
not serve is a 404, a URI under no location a 502."""

import hashlib
import os
import shutil
import subprocess
import time
from urllib.parse import quote

import pytest

from helpers import HTTPConn
from test_http2 import cert  # noqa: F401  (the module's TLS certificate fixture)
from test_static import get, sha

CURL = shutil.which("curl") or "/usr/bin/curl"
BIG = 3 * 1024 * 1024 + 17


def big_bytes():
    return (hashlib.sha256(b"accel").digest() * (BIG // 32 + 1))[:BIG]


@pytest.fixture
def storage(tmp_path):
    """The app's private files (ActiveStorage's root, say), and what must never be served."""
    root = tmp_path / "storage"
    (root / "sub" / "dir").mkdir(parents=True)
    (root / "a.txt").write_bytes(b"private file a\n")
    (root / "sub" / "my file.txt").write_bytes(b"spaced name\n")
    (root / "sub" / "b.pdf").write_bytes(b"%PDF-1.4 not really\n")
    (root / "big.bin").write_bytes(big_bytes())
    (root / ".secret").write_bytes(b"SECRET=1\n")
    (tmp_path / "outside.txt").write_bytes(b"outside the root\n")
    os.symlink("../outside.txt", root / "out.txt")
    os.symlink("a.txt", root / "in.txt")
    return root


def start(proxy_factory, upstream, tmp_path, storage, extra=(), more=""):
    cfg = tmp_path / "accel.yaml"
    cfg.write_text(f"x_accel_redirect: [{{ location: /_files, root: {storage} }}]\n{more}")
    return proxy_factory(upstream, extra=["--http2-cleartext", "--config", str(cfg), *extra])


@pytest.fixture
def aproxy(proxy_factory, upstream, tmp_path, storage):
    return start(proxy_factory, upstream, tmp_path, storage)


def accel(to, **q):
    return "/accel?" + "&".join([f"to={quote(to, safe='')}"] + [f"{k}={v}" for k, v in q.items()])


def accel_requests(upstream):
    return upstream.record.notes("accel")


def test_the_file_replaces_the_upstream_answer_with_the_fields_nginx_keeps(aproxy, upstream, storage):
    r = get(aproxy, accel("/_files/a.txt"))
    assert r.status == 200
    assert r.body == b"private file a\n"
    assert r.one("content-length") == "15"
    # Kept from the app: its type, the download's name, caching, every cookie.
    assert r.one("content-type") == "application/x-from-app"
    assert r.one("content-disposition") == 'attachment; filename="report.txt"'
    assert r.one("cache-control") == "private, max-age=60"
    assert r.one("expires") == "Thu, 01 Jan 2037 00:00:00 GMT"
    assert r.header("set-cookie") == ["s=1; Path=/; HttpOnly", "t=2; Path=/"]
    # The file's own validators, not the app's for its empty body; nothing else of the app's.
    st = os.stat(storage / "a.txt")
    assert r.one("etag") == f'"{int(st.st_mtime):x}-{st.st_size:x}"'
    assert r.one("last-modified") != "Mon, 01 Jan 2001 00:00:00 GMT"
    assert r.one("accept-ranges") == "bytes"
    for name in ("x-accel-redirect", "x-up-other", "vary"):
        assert r.one(name) is None, name


def test_the_type_comes_from_the_extension_when_the_app_sends_none(aproxy):
    r = get(aproxy, accel("/_files/sub/b.pdf", notype=1))
    assert r.one("content-type") == "application/pdf"
    assert r.body == b"%PDF-1.4 not really\n"


def test_the_uri_is_percent_decoded_and_its_query_ignored(aproxy):
    assert get(aproxy, accel("/_files/sub/my%20file.txt?x=1")).body == b"spaced name\n"
    assert get(aproxy, accel("/_files/sub/my%20file.txt%3F", notype=1)).status == 404


def test_the_upstream_connection_is_reused_after_an_empty_body_and_closed_after_another(aproxy, upstream):
    with HTTPConn(aproxy.port) as c:
        for _ in range(3):
            assert get(aproxy, accel("/_files/a.txt"), conn=c).body == b"private file a\n"
        assert c.still_open()
    assert len(upstream.record.conns()) == 1
    # A body already in (body=5) is dropped and the connection kept; a chunked one closes it.
    assert get(aproxy, accel("/_files/a.txt", body=5)).body == b"private file a\n"
    assert len(upstream.record.conns()) == 1
    assert get(aproxy, accel("/_files/a.txt", chunked=1)).body == b"private file a\n"
    assert get(aproxy, "/echo").status == 200
    assert len(upstream.record.conns()) == 2


def test_conditions_ranges_and_head_are_the_clients(aproxy):
    r = get(aproxy, accel("/_files/big.bin"))
    etag, lm = r.one("etag"), r.one("last-modified")
    assert sha(r.body) == sha(big_bytes())
    r = get(aproxy, accel("/_files/big.bin"), [("If-None-Match", etag)])
    assert r.status == 304 and r.body == b""
    # A 304 keeps the caching fields and the cookies, not the representation's.
    assert r.one("cache-control") == "private, max-age=60" and len(r.header("set-cookie")) == 2
    assert r.one("content-disposition") is None and r.one("content-type") is None
    assert get(aproxy, accel("/_files/big.bin"), [("If-Modified-Since", lm)]).status == 304
    r = get(aproxy, accel("/_files/big.bin"), [("Range", "bytes=10-19")])
    assert r.status == 206 and r.body == big_bytes()[10:20]
    assert r.one("content-range") == f"bytes 10-19/{BIG}"
    assert get(aproxy, accel("/_files/big.bin"), [("Range", f"bytes={BIG}-")]).status == 416
    r = get(aproxy, accel("/_files/big.bin"), method="HEAD")
    assert r.status == 200 and r.body == b"" and r.one("content-length") == str(BIG)


def test_a_large_file_is_byte_exact_over_http1_and_h2c(aproxy):
    for proto in (["--http1.1"], ["--http2-prior-knowledge"]):
        out = subprocess.run([CURL, "-sS", *proto, f"http://127.0.0.1:{aproxy.port}{accel('/_files/big.bin')}"],
                             capture_output=True, timeout=30)
        assert out.returncode == 0, out.stderr[-300:]
        assert sha(out.stdout) == sha(big_bytes()), proto
    out = subprocess.run([CURL, "-sS", "--http2-prior-knowledge", "-D", "-", "-H", "Range: bytes=5-9",
                          f"http://127.0.0.1:{aproxy.port}{accel('/_files/big.bin')}"], capture_output=True, timeout=10)
    assert out.stdout.startswith(b"HTTP/2 206") and out.stdout.endswith(big_bytes()[5:10])
    assert b"content-disposition: attachment" in out.stdout and b"x-accel-redirect" not in out.stdout.lower()


def test_over_tls_http1_and_h2_the_file_is_byte_exact(proxy_factory, upstream, tmp_path, storage, cert):  # noqa: F811
    crt, key = cert
    p = start(proxy_factory, upstream, tmp_path, storage, extra=["--tls-cert", crt, "--tls-key", key])
    for proto in ("--http1.1", "--http2"):
        out = subprocess.run([CURL, "-sS", "--cacert", crt, proto, "-w", "%{http_version} %{http_code}",
                              "-o", str(tmp_path / "got"), f"https://localhost:{p.port}{accel('/_files/big.bin')}"],
                             capture_output=True, timeout=30)
        assert out.returncode == 0, out.stderr[-300:]
        assert out.stdout.decode() == ("1.1 200" if proto == "--http1.1" else "2 200")
        assert sha((tmp_path / "got").read_bytes()) == sha(big_bytes()), proto


@pytest.mark.parametrize("target", [
    "/_files/a.txt", "/_files", "/_files/", "/_files/missing", "//_files/a.txt", "/./_files/a.txt",
    "/x/../_files/a.txt", "/_files%2Fa.txt", "/_files%2fa.txt", "/%5Ffiles/a.txt", "/%5ffiles/a.txt",
    "/_FILES/a.txt", "/_Files%2Fa.txt", "/_files.json", "/_files;x/a.txt", "/_files/a.txt?x=1",
])
def test_a_client_never_reaches_an_internal_location(aproxy, upstream, target):
    r = get(aproxy, target)
    assert r.status == 404, target
    assert b"private file" not in r.body
    assert upstream.record.requests() == []


def test_neighbours_of_a_location_still_go_to_the_app(aproxy, upstream):
    for target in ("/_filesx/a.txt", "/files/a.txt", "/x/_files/a.txt"):
        assert get(aproxy, target).status == 404  # the test upstream's own 404
    assert [r["target"] for r in upstream.record.requests()] == ["/_filesx/a.txt", "/files/a.txt",
                                                                "/x/_files/a.txt"]


def test_only_the_proxy_tells_the_app_about_sendfile(proxy_factory, upstream, tmp_path, storage):
    p = start(proxy_factory, upstream, tmp_path, storage, more="allow_underscores_in_headers: true\n")
    spoofed = [("X-Sendfile-Type", "X-Sendfile"), ("X-Accel-Mapping", "/=/_files/"),
               ("x-sendfile-type", "X-Lighttpd-Send-File"), ("X_Accel_Mapping", "/etc/=/_files/"),
               ("X_SENDFILE_TYPE", "X-Sendfile")]
    get(p, accel("/_files/a.txt"), spoofed)
    fields = accel_requests(upstream)[-1]["headers"]
    steering = [(n, v) for n, v in fields if n.lower().replace("_", "-") in ("x-sendfile-type", "x-accel-mapping")]
    assert steering == [("X-Sendfile-Type", "X-Accel-Redirect"), ("X-Accel-Mapping", f"{storage}/=/_files/")]


def test_without_the_setting_the_fields_are_dropped_and_the_header_never_reaches_the_client(proxy_factory, upstream):
    p = proxy_factory(upstream)
    r = get(p, accel("/_files/a.txt"), [("X-Sendfile-Type", "X-Accel-Redirect"), ("X-Accel-Mapping", "/=/_files/")])
    fields = accel_requests(upstream)[-1]["headers"]
    assert [n for n, _ in fields if n.lower() in ("x-sendfile-type", "x-accel-mapping")] == []
    # Not followed, and not shown: an internal location's path is the site's business (nginx
    # hides it too).
    assert r.status == 200 and r.body == b"" and r.header("x-accel-redirect") == []
    assert get(p, "/_files/a.txt").status == 404  # the test upstream's own


def test_another_groups_app_is_not_told_the_root_nor_followed_unless_the_group_says(proxy_factory, upstream_factory,
                                                                                  tmp_path, storage):
    site, partner, trusted = upstream_factory(), upstream_factory(), upstream_factory()
    cfg = tmp_path / "groups.yaml"
    cfg.write_text(f"""x_accel_redirect: [{{ location: /_files, root: {storage} }}]
upstream_groups:
  partner: {{ upstream: {partner.url} }}
  trusted: {{ upstream: {trusted.url}, x_accel_redirect: true }}
routes:
  - {{ hosts: [partner.example], upstream_group: partner }}
  - {{ hosts: [trusted.example], upstream_group: trusted }}
""")
    p = proxy_factory(site, extra=["--config", str(cfg)])
    with HTTPConn(p.port) as c:
        c.request("GET", accel("/_files/a.txt"), host="partner.example")
        r = c.read_response()
    # The partner's app learns nothing of the root and cannot make the proxy serve its files.
    fields = accel_requests(partner)[-1]["headers"]
    assert [n for n, _ in fields if n.lower() in ("x-sendfile-type", "x-accel-mapping")] == []
    assert r.status == 200 and r.body == b"" and r.header("x-accel-redirect") == []
    with HTTPConn(p.port) as c:
        c.request("GET", accel("/_files/a.txt"), host="trusted.example")
        r = c.read_response()
    assert r.status == 200 and r.body == b"private file a\n"
    assert get(p, accel("/_files/a.txt")).body == b"private file a\n"  # the default group's


def test_several_locations_map_to_their_roots(proxy_factory, upstream, tmp_path, storage):
    other = tmp_path / "exports"
    other.mkdir()
    (other / "e.csv").write_bytes(b"a,b\n")
    cfg = tmp_path / "two.yaml"
    cfg.write_text(f"x_accel_redirect:\n  - {{ location: /_files, root: {storage} }}\n"
                   f"  - {{ location: /_files/exports, root: {other} }}\n")
    p = proxy_factory(upstream, extra=["--config", str(cfg)])
    assert get(p, accel("/_files/a.txt")).body == b"private file a\n"
    # The longest location wins, as nginx's prefix locations.
    assert get(p, accel("/_files/exports/e.csv")).body == b"a,b\n"
    mapping = [v for n, v in accel_requests(upstream)[-1]["headers"] if n == "X-Accel-Mapping"]
    assert mapping == [f"{storage}/=/_files/, {other}/=/_files/exports/"]


@pytest.mark.parametrize("to", [
    "/_files/missing.txt", "/_files/sub", "/_files/sub/", "/_files/sub/dir", "/_files/.secret", "/_files/out.txt",
    "/_files/../outside.txt", "/_files/%2e%2e/outside.txt", "/_files/sub/../../outside.txt", "/_files/sub%2Fb.pdf",
    "/_files//a.txt", "/_files/a.txt%00", "/_files",
])
def test_what_the_root_may_not_serve_is_a_404_and_nothing_leaks(aproxy, to):
    r = get(aproxy, accel(to))
    assert r.status == 404, to
    assert b"outside" not in r.body and b"SECRET" not in r.body and b"private" not in r.body
    assert r.one("x-accel-redirect") is None and r.one("content-disposition") is None


def test_a_symlink_inside_the_root_is_followed(aproxy):
    assert get(aproxy, accel("/_files/in.txt")).body == b"private file a\n"


@pytest.mark.parametrize("to", ["/etc/passwd", "/files/a.txt", "/_filesx/a.txt", "@files", "_files/a.txt", "",
                                "/_FILES/a.txt"])
def test_a_uri_under_no_location_is_a_502_logged_with_the_setting(aproxy, to):
    r = get(aproxy, accel(to))
    assert r.status == 502, to
    assert r.one("x-accel-redirect") is None and b"passwd" not in r.body
    deadline = time.monotonic() + 3
    while "X-Accel-Redirect not followed" not in aproxy.stderr_text() and time.monotonic() < deadline:
        time.sleep(0.02)
    line = [t for t in aproxy.stderr_text().splitlines() if "X-Accel-Redirect not followed" in t][0]
    assert "x_accel_redirect" in line


def test_the_access_log_shows_what_was_sent(aproxy):
    get(aproxy, accel("/_files/a.txt"))
    get(aproxy, accel("/_files/missing.txt"))
    get(aproxy, "/_files/a.txt")
    lines = aproxy.wait_access_log(3)
    assert [(line["status"], line.get("upstream_status"), line.get("error")) for line in lines] == [
        (200, 200, None), (404, 200, "accel_file_not_found"), (404, 0, "internal_location")]


def test_check_names_the_key_of_a_bad_location_or_root(proxy_bin, tmp_path, storage):
    for entry, key, says in (
            (f"{{ location: /_files, root: {storage / 'a.txt'} }}", "x_accel_redirect[0].root", "is not a directory"),
            ("{ location: /_files, root: storage }", "x_accel_redirect[0].root", "is not an absolute path"),
            (f"{{ location: _files, root: {storage} }}", "x_accel_redirect[0].location", "must start with /"),
            (f"{{ location: /, root: {storage} }}", "x_accel_redirect[0].location", "every path"),
            (f"{{ root: {storage} }}", "x_accel_redirect[0].location", "is required")):
        cfg = tmp_path / "bad.yaml"
        cfg.write_text(f"upstream: http://127.0.0.1:1\nx_accel_redirect: [{entry}]\n")
        out = subprocess.run([proxy_bin, "check", "--config", str(cfg)], capture_output=True, timeout=10)
        assert out.returncode != 0
        text = (out.stdout + out.stderr).decode()
        assert key in text and says in text, text
