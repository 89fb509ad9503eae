"""The access log: one JSON object per request with the documented keys, and never a secret —
no query string for /_oauth_callback, no Authorization or Cookie values — in any output."""

import json
import os
import signal
import time

import pytest

from helpers import HTTPConn, closed_port

KEYS = {"method", "path", "protocol", "status", "bytes_in", "bytes_out", "duration_ms", "upstream_status",
        "remote"}


def test_one_line_per_request_with_all_keys(proxy):
    with HTTPConn(proxy.port, source="127.0.0.3") as c:
        c.request("GET", "/echo?q=1")
        assert c.read_response().status == 200
        c.request("POST", "/sink", body=b"p" * 1000)
        assert c.read_response().status == 200
        c.request("GET", "/bytes?n=12345")
        assert c.read_response().body_len == 12345
        c.request("GET", "/status/404")
        assert c.read_response().status == 404
    lines = proxy.wait_access_log(4)
    assert len(lines) == 4, lines
    for line in lines:
        missing = KEYS - set(line)
        assert not missing, f"access log line lacks {missing}: {line}"
        assert str(line["remote"]).startswith("127.0.0.3"), line
        assert isinstance(line["duration_ms"], (int, float)) and line["duration_ms"] >= 0
        assert "error" not in line, line  # an upstream's 404 is its answer, not an engine error
    get, post, big, nf = lines
    assert {line["protocol"] for line in lines} == {"http/1.1"}
    assert get["method"] == "GET" and get["path"].split("?")[0] == "/echo"
    assert get["status"] == 200 and get["upstream_status"] == 200
    assert post["method"] == "POST" and post["bytes_in"] >= 1000
    assert big["bytes_out"] >= 12345
    assert nf["status"] == 404 and nf["upstream_status"] == 404


def test_duration_is_measured(proxy):
    with proxy.conn() as c:
        c.request("GET", "/slow?ms=300")
        assert c.read_response().status == 200
    (line,) = proxy.wait_access_log(1)
    assert 250 <= line["duration_ms"] < 3000, line


def test_gateway_errors_are_logged_without_an_upstream_status(proxy_factory):
    p = proxy_factory(upstream_url=f"http://127.0.0.1:{closed_port()}")
    with p.conn() as c:
        c.request("GET", "/echo")
        assert c.read_response().status == 502
    (line,) = p.wait_access_log(1)
    assert line["status"] == 502
    assert line["upstream_status"] in (None, 0, "", "-"), line
    assert line["error"] == "upstream_unreachable" and line["error_source"] == "upstream", line


SECRETS = ["SECRETCODE4711", "STATE0815xyz", "VERIFIERabc123", "CLIENTSECRETzz"]


@pytest.mark.parametrize("target", [
    "/_oauth_callback?provider=google&platform=ios&client_id=x&redirect_uri=y"
    "&code=SECRETCODE4711&state=STATE0815xyz&code_verifier=VERIFIERabc123",
    "/_oauth_callback?error=access_denied&state=STATE0815xyz&code=SECRETCODE4711",
    "http://site.example/_oauth_callback?code=SECRETCODE4711&state=STATE0815xyz",
])
def test_oauth_callback_query_is_never_logged(proxy, target):
    with proxy.conn() as c:
        c.request("GET", target, [("Authorization", "Bearer CLIENTSECRETzz")])
        r = c.read_response()
    lines = proxy.wait_access_log(1)
    assert len(lines) == 1, lines
    assert lines[0]["path"] == "/_oauth_callback", lines[0]
    time.sleep(0.1)
    out = proxy.stdout_text() + proxy.stderr_text()
    for s in SECRETS:
        assert s not in out, f"{s} appears in the proxy's output"
    assert r.status > 0


def test_credentials_are_never_logged(proxy):
    with proxy.conn() as c:
        c.request("GET", "/echo", [("Authorization", "Basic CLIENTSECRETzz"),
                                   ("Cookie", "session=SECRETCODE4711"),
                                   ("Proxy-Authorization", "Bearer VERIFIERabc123")])
        assert c.read_response().status == 200
    assert len(proxy.wait_access_log(1)) == 1, "the request was not logged at all"
    out = proxy.stdout_text() + proxy.stderr_text()
    for s in SECRETS:
        assert s not in out, f"{s} appears in the proxy's output"


def test_access_log_to_a_file(proxy_factory, upstream, tmp_path):
    path = str(tmp_path / "access.log")
    p = proxy_factory(upstream, extra=["--access-log", path])
    with p.conn() as c:
        for i in range(3):
            c.request("GET", f"/echo?i={i}")
            assert c.read_response().status == 200
    lines = p.wait_access_log(3, path=path)
    assert len(lines) == 3 and all(line["status"] == 200 for line in lines)
    assert p.access_log() == [], "access log also written to stdout"


def test_sigusr1_reopens_the_access_log_file_after_logrotate_renamed_it(proxy_factory, upstream, tmp_path):
    path = str(tmp_path / "access.log")
    p = proxy_factory(upstream, extra=["--access-log", path])

    def requests(target, n):
        with p.conn() as c:
            for _ in range(n):
                c.request("GET", target)
                assert c.read_response().status == 200

    requests("/echo/before", 2)
    p.wait_access_log(2, path=path)
    os.rename(path, path + ".1")          # what logrotate does first
    requests("/echo/between", 1)           # still written to the renamed file
    p.signal(signal.SIGUSR1)
    p.stopped_on_purpose = False          # a reopen, not a stop: the proxy must still be running
    deadline = time.monotonic() + 5
    while '"access log reopened"' not in p.stderr_text():
        assert time.monotonic() < deadline, p.stderr_text()
        time.sleep(0.05)
    requests("/echo/after", 3)
    after = p.wait_access_log(3, path=path)
    assert [l["path"] for l in after] == ["/echo/after"] * 3
    old = [json.loads(l) for l in open(path + ".1").read().splitlines()]
    assert [l["path"] for l in old] == ["/echo/before"] * 2 + ["/echo/between"], "nothing lost, nothing doubled"
    assert oct(os.stat(path).st_mode & 0o777) == "0o640"


def test_access_log_off(proxy_factory, upstream):
    p = proxy_factory(upstream, extra=["--access-log", "off"])
    with p.conn() as c:
        c.request("GET", "/echo")
        assert c.read_response().status == 200
    time.sleep(0.3)
    assert p.stdout_text() == ""
    for line in p.stderr_text().splitlines():
        assert '"path"' not in line or '"status"' not in line, f"access line on stderr: {line}"


def test_stderr_is_json_lines(proxy_factory, upstream):
    p = proxy_factory(upstream_url=f"http://127.0.0.1:{closed_port()}")
    with p.conn() as c:
        c.request("GET", "/echo")       # provokes at least an upstream-connect error log
        assert c.read_response().status == 502
        c.send(b"GET /bad\x01 HTTP/1.1\r\n\r\n")
        c.read_until_close(3)
    time.sleep(0.2)
    text = p.stderr_text()
    for line in text.splitlines():
        if line.strip():
            try:
                json.loads(line)
            except ValueError:
                pytest.fail(f"stderr line is not JSON: {line[:300]!r}")


def test_with_log_format_text_the_access_log_is_plain_lines_too(proxy_factory, upstream):
    import re
    p = proxy_factory(upstream, opts={"--log-format": "text"})
    with p.conn() as c:
        c.request("GET", '/status/404?secret=SECRETCODE4711', headers=[("X-Request-Id", "abc-1")])
        assert c.read_response().status == 404
        c.request("GET", '/echo/a"b')
        assert c.read_response().status == 200
    deadline = time.monotonic() + 3
    while p.stdout_text().count("\n") < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    lines = [l for l in p.stdout_text().splitlines() if "/healthz" not in l]
    line = re.compile(r'^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (\S+) "(\S+) (\S+)" (\d{3}) upstream=(\d+) '
                      r'in=\d+ out=\d+ ms=\d+\.\d{3} upstream_ms=\d+\.\d{3} id=(\S+)$')
    first, second = (line.match(l) for l in lines)
    assert first and second, lines
    assert first.groups() == ("127.0.0.1", "GET", "/status/404", "404", "404", "abc-1")
    assert second.group(3) == '/echo/a\\"b', second.group(3)  # a quote cannot end the field early
    assert "SECRETCODE4711" not in p.stdout_text() + p.stderr_text()
