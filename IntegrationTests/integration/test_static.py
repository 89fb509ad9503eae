"""Static files (`static:`) through the real binary: a Rails-like `public/` answered over HTTP/1.1
(plain: sendfile; TLS), h2c and h2, byte-exact up to 5 MiB; validators and 304s, 206 and 416;
precompressed siblings chosen by Accept-Encoding; far-future caching under /assets; and what is
never served — a missing file, a directory, a dotfile, a symlink out of the root (each goes to the
app, which the test upstream's /echo shows), a path session mode protects — with the descriptor
closed after a download the client cut."""

import hashlib
import os
import shutil
import socket
import subprocess
import time

import pytest

from helpers import HTTPConn
from test_http2 import cert  # noqa: F401  (the module's TLS certificate fixture)
from test_observability import samples, scrape, value
from test_session import get as session_get, idp, session_config  # noqa: F401

CURL = shutil.which("curl") or "/usr/bin/curl"
BIG = 5 * 1024 * 1024


def big_bytes():
    return hashlib.sha256(b"seed").digest() * (BIG // 32)


@pytest.fixture
def public(tmp_path):
    """public/ as a Rails app has it, plus the things that must never be served."""
    root = tmp_path / "public"
    (root / "assets").mkdir(parents=True)
    (root / "echo" / "dir").mkdir(parents=True)
    (root / "robots.txt").write_bytes(b"User-agent: *\n")
    (root / "assets" / "app-1a2b.css").write_bytes(b"body { color: red }\n" * 50)
    (root / "assets" / "app-1a2b.js").write_bytes(b"plain javascript\n" * 100)
    (root / "assets" / "app-1a2b.js.gz").write_bytes(b"gzip sibling")
    (root / "assets" / "app-1a2b.js.br").write_bytes(b"brotli sibling")
    (root / "assets" / "only-gz.css").write_bytes(b"plain css")
    (root / "assets" / "only-gz.css.gz").write_bytes(b"gzip css")
    (root / "big.bin").write_bytes(big_bytes())
    (root / "echo" / ".env").write_bytes(b"SECRET=1\n")
    (root / "echo" / "dir" / "index.html").write_bytes(b"<p>index</p>")
    (tmp_path / "outside.txt").write_bytes(b"outside the root\n")
    os.symlink("../../outside.txt", root / "echo" / "out.txt")
    os.symlink("../robots.txt", root / "echo" / "in.txt")
    return root


def start(proxy_factory, upstream, tmp_path, public, static="", extra=(), prefix=""):
    cfg = tmp_path / "static.yaml"
    cfg.write_text(f"{prefix}static: {{ root: {public} {static} }}\n")
    return proxy_factory(upstream, extra=["--http2-cleartext", "--config", str(cfg), *extra])


@pytest.fixture
def sproxy(proxy_factory, upstream, tmp_path, public):
    return start(proxy_factory, upstream, tmp_path, public)


def get(p, target, headers=(), method="GET", conn=None):
    c = conn or HTTPConn(p.port)
    try:
        c.request(method, target, headers=list(headers))
        return c.read_response(method=method)
    finally:
        if conn is None:
            c.close()


def upstream_targets(upstream):
    return [r["target"] for r in upstream.record.requests()]


def test_a_file_is_answered_with_its_type_validators_and_no_trip_upstream(sproxy, upstream, public):
    r = get(sproxy, "/robots.txt?v=1")
    assert r.status == 200
    assert r.body == b"User-agent: *\n"
    assert r.one("content-type") == "text/plain; charset=utf-8"
    assert r.one("content-length") == "14"
    assert r.one("x-content-type-options") == "nosniff"
    assert r.one("accept-ranges") == "bytes"
    st = os.stat(public / "robots.txt")
    assert r.one("etag") == f'"{int(st.st_mtime):x}-{st.st_size:x}"'
    assert r.one("last-modified").endswith(" GMT")
    assert r.one("cache-control") is None
    assert r.one("date")
    assert upstream_targets(upstream) == []


def test_keep_alive_holds_across_files_and_proxied_requests(sproxy, upstream):
    with HTTPConn(sproxy.port) as c:
        for _ in range(3):
            assert get(sproxy, "/assets/app-1a2b.css", conn=c).status == 200
            assert get(sproxy, "/echo", conn=c).json()["target"] == "/echo"
        assert c.still_open()
    assert upstream_targets(upstream) == ["/echo"] * 3


def test_assets_get_far_future_caching_and_the_prefixes_are_configurable(sproxy, proxy_factory, upstream, tmp_path,
                                                                      public):
    r = get(sproxy, "/assets/app-1a2b.css")
    assert r.one("cache-control") == "public, max-age=31536000, immutable"
    assert r.one("content-type") == "text/css; charset=utf-8"
    other = start(proxy_factory, upstream, tmp_path, public, ", immutable_paths: [/echo]")
    assert get(other, "/assets/app-1a2b.css").one("cache-control") is None


def test_head_has_the_length_and_no_body(sproxy):
    r = get(sproxy, "/big.bin", method="HEAD")
    assert r.status == 200
    assert r.one("content-length") == str(BIG)
    assert r.body == b""
    # The connection is still in step: the next response is read whole.
    assert get(sproxy, "/robots.txt").body == b"User-agent: *\n"


def test_if_none_match_and_if_modified_since_get_304(sproxy):
    first = get(sproxy, "/assets/app-1a2b.css")
    etag, modified = first.one("etag"), first.one("last-modified")
    for headers in ([("If-None-Match", etag)], [("If-None-Match", f'"x", W/{etag}')], [("If-None-Match", "*")],
                    [("If-Modified-Since", modified)]):
        r = get(sproxy, "/assets/app-1a2b.css", headers)
        assert r.status == 304, headers
        assert r.body == b""
        assert r.one("etag") == etag
        assert r.one("cache-control") == "public, max-age=31536000, immutable"
        assert r.one("content-type") is None and r.one("content-length") is None
    assert get(sproxy, "/assets/app-1a2b.css", [("If-None-Match", '"other"')]).status == 200
    assert get(sproxy, "/assets/app-1a2b.css", [("If-Modified-Since", "Mon, 01 Jan 2001 00:00:00 GMT")]).status == 200


@pytest.mark.parametrize("range_,status,first,last", [
    ("bytes=0-99", 206, 0, 99),
    ("bytes=1000-", 206, 1000, BIG - 1),
    ("bytes=-10", 206, BIG - 10, BIG - 1),
    ("bytes=5-5", 206, 5, 5),
])
def test_one_range_gets_206(sproxy, range_, status, first, last):
    r = get(sproxy, "/big.bin", [("Range", range_)])
    assert r.status == status
    assert r.one("content-range") == f"bytes {first}-{last}/{BIG}"
    assert r.body == big_bytes()[first:last + 1]


def test_an_unsatisfiable_range_gets_416_and_several_ranges_the_whole_file(sproxy):
    r = get(sproxy, "/robots.txt", [("Range", "bytes=100-")])
    assert r.status == 416
    assert r.one("content-range") == "bytes */14"
    assert r.body == b""
    r = get(sproxy, "/robots.txt", [("Range", "bytes=0-1,3-4")])
    assert r.status == 200 and r.body == b"User-agent: *\n"
    etag = r.one("etag")
    assert get(sproxy, "/robots.txt", [("Range", "bytes=0-3"), ("If-Range", etag)]).status == 206
    assert get(sproxy, "/robots.txt", [("Range", "bytes=0-3"), ("If-Range", '"old"')]).status == 200


@pytest.mark.parametrize("accept,body,coding", [
    ("gzip, deflate, br", b"brotli sibling", "br"),
    ("gzip", b"gzip sibling", "gzip"),
    ("br;q=0.5, gzip", b"gzip sibling", "gzip"),
    ("br;q=0, gzip;q=0", b"plain javascript\n" * 100, None),
    (None, b"plain javascript\n" * 100, None),
])
def test_a_precompressed_sibling_is_chosen_by_accept_encoding(sproxy, accept, body, coding):
    r = get(sproxy, "/assets/app-1a2b.js", [] if accept is None else [("Accept-Encoding", accept)])
    assert r.status == 200
    assert r.body == body
    assert r.one("content-encoding") == coding
    assert r.one("content-type") == "text/javascript; charset=utf-8"
    assert "accept-encoding" in r.tokens("vary")


def test_a_missing_sibling_falls_back_and_precompressed_can_be_off(sproxy, proxy_factory, upstream, tmp_path, public):
    r = get(sproxy, "/assets/only-gz.css", [("Accept-Encoding", "br, gzip")])
    assert (r.body, r.one("content-encoding")) == (b"gzip css", "gzip")
    assert get(sproxy, "/assets/only-gz.css", [("Accept-Encoding", "br")]).body == b"plain css"
    off = start(proxy_factory, upstream, tmp_path, public, ", precompressed: false")
    r = get(off, "/assets/app-1a2b.js", [("Accept-Encoding", "br, gzip")])
    assert r.one("content-encoding") is None and r.one("vary") is None


@pytest.mark.parametrize("target", ["/echo/missing.txt", "/echo/dir", "/echo/dir/", "/echo/.env", "/echo/out.txt",
                                    "/echo/%2Eenv"])
def test_what_is_not_a_file_under_the_root_goes_to_the_app(sproxy, upstream, target):
    r = get(sproxy, target)
    assert r.status == 200
    assert r.json()["target"] == target.replace("%2E", ".")
    assert b"SECRET" not in r.body and b"outside" not in r.body


def test_a_symlink_inside_the_root_is_followed_one_out_of_it_only_when_allowed(sproxy, proxy_factory, upstream,
                                                                               tmp_path, public):
    assert get(sproxy, "/echo/in.txt").body == b"User-agent: *\n"
    allowed = start(proxy_factory, upstream, tmp_path, public, ", symlinks_outside_root: true")
    assert get(allowed, "/echo/out.txt").body == b"outside the root\n"


def test_other_methods_and_requests_with_a_body_go_to_the_app(sproxy, upstream):
    for method, body in (("POST", b"x=1"), ("OPTIONS", b""), ("GET", b"x")):
        with HTTPConn(sproxy.port) as c:
            c.request(method, "/robots.txt", body=body)
            c.read_response(method=method)
    assert upstream_targets(upstream) == ["/robots.txt"] * 3


def sha(data):
    return hashlib.sha256(data).hexdigest()


def test_a_large_file_is_byte_exact_over_http1_and_h2c(sproxy):
    want = sha(big_bytes())
    r = get(sproxy, "/big.bin")
    assert r.status == 200 and sha(r.body) == want
    for proto in (["--http1.1"], ["--http2-prior-knowledge"]):
        out = subprocess.run([CURL, "-sS", *proto, "-D", "/dev/stderr", f"http://127.0.0.1:{sproxy.port}/big.bin"],
                             capture_output=True, timeout=30)
        assert out.returncode == 0, out.stderr[-300:]
        assert sha(out.stdout) == want, proto
    out = subprocess.run([CURL, "-sS", "--http2-prior-knowledge", "-H", "Range: bytes=10-19", "-H",
                          "Accept-Encoding: br", f"http://127.0.0.1:{sproxy.port}/big.bin"],
                         capture_output=True, timeout=10)
    assert out.stdout == big_bytes()[10:20]


def test_files_over_tls_http1_and_h2_are_byte_exact(proxy_factory, upstream, tmp_path, public, cert):  # noqa: F811
    crt, key = cert
    p = start(proxy_factory, upstream, tmp_path, public, extra=["--tls-cert", crt, "--tls-key", key])
    want = sha(big_bytes())
    for proto in ("--http1.1", "--http2"):
        out = subprocess.run([CURL, "-sS", "--cacert", crt, proto, "-w", "%{http_version} %{http_code}",
                              "-o", str(tmp_path / "got"), f"https://localhost:{p.port}/big.bin"],
                             capture_output=True, timeout=30)
        assert out.returncode == 0, out.stderr[-300:]
        assert out.stdout.decode() == ("1.1 200" if proto == "--http1.1" else "2 200")
        assert sha((tmp_path / "got").read_bytes()) == want, proto
        out = subprocess.run([CURL, "-sS", "--cacert", crt, proto, "-H", "Accept-Encoding: gzip", "-D", "-",
                              f"https://localhost:{p.port}/assets/app-1a2b.js"], capture_output=True, timeout=10)
        assert b"content-encoding: gzip" in out.stdout.lower() and out.stdout.endswith(b"gzip sibling")


def test_h2_head_304_and_416_end_on_headers(sproxy):
    base = f"http://127.0.0.1:{sproxy.port}"
    out = subprocess.run([CURL, "-sS", "--http2-prior-knowledge", "-I", f"{base}/big.bin"], capture_output=True,
                         timeout=10)
    assert b"content-length: 5242880" in out.stdout
    etag = [line.split(b": ", 1)[1].strip() for line in out.stdout.splitlines() if line.lower().startswith(b"etag")][0]
    for args, code in ((["-H", b"If-None-Match: " + etag], "304"), (["-H", "Range: bytes=9999999-"], "416")):
        out = subprocess.run([CURL, "-sS", "--http2-prior-knowledge", *args, "-o", "/dev/null", "-w", "%{http_code}",
                              f"{base}/big.bin"], capture_output=True, timeout=10)
        assert out.stdout.decode() == code


def test_files_are_logged_and_counted_as_local_answers(sproxy):
    get(sproxy, "/robots.txt")
    get(sproxy, "/big.bin", [("Range", "bytes=0-9")])
    lines = sproxy.wait_access_log(2)
    assert [(line["path"], line["status"]) for line in lines] == [("/robots.txt", 200), ("/big.bin", 206)]
    assert lines[0]["bytes_out"] > 14 and "error" not in lines[0]
    s = samples(scrape(sproxy))
    assert value(s, "callback_proxy_requests_total", route="local", code_class="2xx") >= 2
    assert value(s, "callback_proxy_requests_total", route="proxied", code_class="2xx") == 0


def open_files(p, name):
    fds = f"/proc/{p.pid}/fd"
    found = []
    for fd in os.listdir(fds):
        try:
            if os.readlink(f"{fds}/{fd}").endswith(name):
                found.append(fd)
        except OSError:
            pass
    return found


def test_a_download_the_client_cuts_closes_the_file(sproxy, public):
    huge = public / "huge.bin"
    with open(huge, "wb") as f:
        f.truncate(256 * 1024 * 1024)
    for proto in ("http1", "h2c"):
        if proto == "http1":
            s = socket.create_connection(("127.0.0.1", sproxy.port))
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.sendall(b"GET /huge.bin HTTP/1.1\r\nHost: x\r\n\r\n")
            s.recv(1000)
            deadline = time.monotonic() + 3
            while not open_files(sproxy, "/huge.bin") and time.monotonic() < deadline:
                time.sleep(0.02)
            assert open_files(sproxy, "/huge.bin"), "the file is open while it is sent"
            s.close()
        else:
            proc = subprocess.Popen([CURL, "-sS", "--http2-prior-knowledge", "--limit-rate", "100k", "-o", "/dev/null",
                                     f"http://127.0.0.1:{sproxy.port}/huge.bin"])
            deadline = time.monotonic() + 3
            while not open_files(sproxy, "/huge.bin") and time.monotonic() < deadline:
                time.sleep(0.02)
            assert open_files(sproxy, "/huge.bin")
            proc.kill()
            proc.wait()
        deadline = time.monotonic() + 3
        while open_files(sproxy, "/huge.bin") and time.monotonic() < deadline:
            time.sleep(0.02)
        assert open_files(sproxy, "/huge.bin") == [], proto


def test_check_refuses_a_root_that_is_not_a_directory(proxy_bin, tmp_path, public):
    for root, says in ((public / "robots.txt", "is not a directory"), (tmp_path / "none", "cannot open"),
                       ("public", "is not an absolute path")):
        cfg = tmp_path / "bad.yaml"
        cfg.write_text(f"upstream: http://127.0.0.1:1\nstatic: {{ root: {root} }}\n")
        out = subprocess.run([proxy_bin, "check", "--config", str(cfg)], capture_output=True, timeout=10)
        assert out.returncode != 0
        text = (out.stdout + out.stderr).decode()
        assert "static.root" in text and says in text, text


def test_a_protected_path_is_not_served_without_a_session(proxy_factory, upstream, tmp_path, public, idp):  # noqa: F811
    (public / "private").mkdir()
    (public / "private" / "report.pdf").write_bytes(b"%PDF secret")
    cfg = tmp_path / "session.yaml"
    cfg.write_text(session_config(idp) + f"static: {{ root: {public} }}\n")
    p = proxy_factory(upstream, extra=["--config", str(cfg)])
    r = session_get(p, "/private/report.pdf")
    assert r.status in (302, 401), r.status
    assert b"secret" not in r.body
    # An unprotected file next to it is served.
    assert session_get(p, "/robots.txt").body == b"User-agent: *\n"
    assert upstream_targets(upstream) == []


def test_a_sibling_is_served_even_without_its_file_but_only_to_a_client_that_takes_it(sproxy, public):
    (public / "echo" / "gz-only.css.gz").write_bytes(b"gz only")
    r = get(sproxy, "/echo/gz-only.css", [("Accept-Encoding", "gzip")])
    assert (r.status, r.body, r.one("content-encoding")) == (200, b"gz only", "gzip")
    assert get(sproxy, "/echo/gz-only.css").json()["target"] == "/echo/gz-only.css"
