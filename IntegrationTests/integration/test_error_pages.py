"""The proxy's own error answers through the real binary: HTML that retries by itself for a
browser or WebView, JSON for an API client, text for everyone else; the operator's template,
and a new one after SIGHUP. (Chromium on such a page: IntegrationTests/e2e/test_error_pages.py.)"""

import json

from helpers import closed_port
from test_reload import reload

NAVIGATION = "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8"


def ask(p, accept=None, method="GET", target="/echo", body=b"", headers=()):
    with p.conn() as c:
        hdrs = list(headers) + ([("Accept", accept)] if accept else [])
        c.request(method, target, headers=hdrs, body=body)
        return c.read_response(method=method)


def test_a_browser_gets_a_page_that_tries_again_by_itself(proxy_factory):
    port = closed_port()
    p = proxy_factory(upstream_url=f"http://127.0.0.1:{port}")
    r = ask(p, NAVIGATION)
    assert r.status == 502
    assert r.one("content-type") == "text/html; charset=utf-8"
    assert r.one("retry-after") == "5" and r.one("cache-control") == "no-store"
    assert r.one("content-security-policy") == "default-src 'none'; style-src 'unsafe-inline'"
    page = r.body.decode()
    assert '<meta http-equiv="refresh" content="5">' in page and 'href="">Try again</a>' in page
    # The request id the page shows is the one the operator's log line has, with the reason.
    request_id = page.split("request id ")[1].split("<")[0]
    failed = [l for l in p.stderr_text().splitlines() if request_id in l and "request failed" in l]
    assert failed and str(port) in failed[0], p.stderr_text()[-1500:]
    assert str(port) not in page and "refused" not in page.lower()
    # A form's POST is not repeated by a refresh.
    posted = ask(p, NAVIGATION, method="POST", body=b"a=1", headers=[("Content-Type", "application/x-www-form-urlencoded")])
    assert posted.status == 502 and b"http-equiv" not in posted.body and b"Try again" in posted.body


def test_an_api_client_gets_json_and_a_script_gets_text(proxy_factory):
    p = proxy_factory(upstream_url=f"http://127.0.0.1:{closed_port()}")
    r = ask(p, "application/json, text/plain, */*")
    assert r.status == 502 and r.one("content-type") == "application/json"
    error = json.loads(r.body)["error"]
    assert error["status"] == 502 and error["title"] == "Bad Gateway" and len(error["request_id"]) == 32
    r = ask(p)
    assert r.one("content-type") == "text/plain; charset=utf-8"
    assert r.body.startswith(b"502 Bad Gateway (request id ")


def test_a_refusal_page_says_what_was_wrong(proxy_factory, upstream):
    p = proxy_factory(upstream, opts={"--max-body-size": "10"})
    r = ask(p, NAVIGATION, method="POST", body=b"x" * 100)
    assert r.status == 413 and r.one("content-type") == "text/html; charset=utf-8"
    assert b"Request body larger than 10 bytes." in r.body
    assert b"refresh" not in r.body and r.one("retry-after") is None


def test_the_operators_page_replaces_ours_and_a_reload_brings_the_next(proxy_factory, tmp_path):
    page = tmp_path / "502.html"
    page.write_text("<h1>{{title}}</h1><p>We are on it. Quote {{request_id}}.</p>")
    cfg = tmp_path / "pages.yaml"
    cfg.write_text(f"error_pages: {{ \"502\": {page} }}\n")
    p = proxy_factory(upstream_url=f"http://127.0.0.1:{closed_port()}", extra=["--config", str(cfg)])
    r = ask(p, NAVIGATION)
    assert r.status == 502 and r.body.decode().startswith("<h1>502 Bad Gateway</h1><p>We are on it. Quote ")
    assert r.one("content-security-policy") is None  # the operator's page may load its own assets
    page.write_text("<p>second edition {{status}}</p>")
    reload(p, "configuration reloaded")
    assert ask(p, NAVIGATION).body == b"<p>second edition 502</p>"


def test_a_missing_page_file_is_a_configuration_error(proxy_bin, tmp_path):
    import subprocess
    cfg = tmp_path / "pages.yaml"
    cfg.write_text(f"upstream: http://127.0.0.1:1\nerror_pages: {{ \"502\": {tmp_path}/none.html, \"302\": {tmp_path}/x.html }}\n")
    out = subprocess.run([proxy_bin, "check", "--config", str(cfg)], capture_output=True, text=True, timeout=10)
    assert out.returncode != 0
    assert "error_pages.502" in out.stderr + out.stdout and "cannot read" in out.stderr + out.stdout
    assert "error_pages.302" in out.stderr + out.stdout
