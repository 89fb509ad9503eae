"""`maintenance:` through the real binary: the page appears within a second of the file (as
`cap maintenance:enable` writes it) and goes with it, browsers get the file and API clients a
JSON 503, allowed paths and clients pass, HTTP/2 too, one log line each way, the gauge, and
`check` warning about a directory that does not exist."""

import json
import subprocess
import time

from helpers import HTTPConn
from test_client_limits import A, B, limited
from test_observability import samples, scrape, value

PAGE = b"<!doctype html><title>Back soon</title><h1>We'll be back soon</h1>"


def get(p, target="/echo", source=A, accept="text/html"):
    with HTTPConn(p.port, source=source) as c:
        c.request("GET", target, headers=[("Accept", accept)])
        return c.read_response()


def until(check, seconds=3.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return False


def test_the_page_follows_the_file_and_says_so(proxy_factory, upstream, tmp_path):
    page = tmp_path / "maintenance.html"
    p = limited(proxy_factory, upstream, tmp_path,
                f"maintenance: {{ file: {page}, allow_paths: [/echo/up], allow_clients: [{B}], retry_after: 90s }}\n")
    assert get(p).status == 200
    page.write_bytes(PAGE)
    assert until(lambda: get(p).status == 503), "the page did not turn on within 3 s"
    r = get(p)
    assert r.body == PAGE and r.one("retry-after") == "90" and r.one("content-type").startswith("text/html")
    j = get(p, accept="application/json")
    assert j.status == 503 and j.json()["error"]["status"] == 503 and j.one("retry-after") == "90"
    # The health check and the team's own address are served as usual.
    assert get(p, "/echo/up").status == 200
    assert get(p, source=B).status == 200
    # HTTP/1.1 keep-alive survives the page: a second request on the same connection.
    with HTTPConn(p.port) as c:
        for _ in range(2):
            c.request("GET", "/echo", headers=[("Accept", "text/html")])
            assert c.read_response().status == 503
    s = samples(scrape(p))
    assert value(s, "callback_proxy_maintenance", listener="public") == 1
    page.unlink()
    assert until(lambda: get(p).status == 200), "the page did not turn off within 3 s"
    assert value(samples(scrape(p)), "callback_proxy_maintenance", listener="public") == 0
    lines = [json.loads(l) for l in p.stderr_text().splitlines() if '"msg":"maintenance page' in l]
    assert [l["msg"].split(":")[0] for l in lines] == ["maintenance page on", "maintenance page off"], lines
    assert lines[0]["setting"] == "maintenance.file" and lines[0]["file"] == str(page)


def test_http2_streams_get_the_page_too(proxy_factory, upstream, tmp_path):
    page = tmp_path / "maintenance.html"
    page.write_bytes(PAGE)
    p = limited(proxy_factory, upstream, tmp_path, f"http2: {{ cleartext: true }}\nmaintenance: {{ file: {page} }}\n")
    out = subprocess.run(["curl", "-s", "--http2-prior-knowledge", "-H", "Accept: text/html", "-w", "\\n%{http_code}",
                          f"http://127.0.0.1:{p.port}/echo"], capture_output=True, timeout=20)
    body, code = out.stdout.rsplit(b"\n", 1)
    assert code == b"503" and body == PAGE, out


def test_check_warns_when_the_directory_does_not_exist(tmp_path, proxy_bin):
    cfg = tmp_path / "m.yaml"
    cfg.write_text("upstream: http://127.0.0.1:9\nmaintenance: { file: /srv/nowhere-at-all/public/system/maintenance.html }\n")
    out = subprocess.run([proxy_bin, "check", "--config", str(cfg)], capture_output=True, text=True, timeout=20)
    assert out.returncode == 0, out
    assert "warning: maintenance.file: the directory /srv/nowhere-at-all/public/system does not exist here" in out.stdout, out
