"""No secret in anything the proxy wrote, across the whole end-to-end run (secret_scan.py says
what is collected and how it is searched). The scan runs last; the two tests before it prove
that it can fail: the scanner flags planted values in every form it searches for, and it reads
the proxy's real access log, where a value the access log does record (a request path) is
found."""

from __future__ import annotations

import json
import secrets
import time
from urllib.parse import quote

import requests

from harness import Proxy, SECRET_KEY_BASE, WEB_SECRET
from secret_scan import MIN_SECRET_LENGTH, Ledger, find_leaks, proxy_output
from wrapper import WrapperApp


def test_the_scanner_flags_a_planted_secret():
    planted = "4/0AX4XfWh-" + secrets.token_urlsafe(24)     # a Google-shaped code: '/' in it
    ledger = Ledger()
    ledger.add("code", planted)
    ledger.add("short", "abc123")                            # below MIN_SECRET_LENGTH: ignored
    assert len("abc123") < MIN_SECRET_LENGTH
    clean = ['{"msg":"callback verified","provider":"google"}', "abc123 is too short to count"]
    assert find_leaks({"log": clean}, ledger) == []
    for line in (f'{{"path":"/x","detail":"{planted}"}}',           # as it is
                 "GET /cb?code=" + quote(planted, safe=""),           # URL-encoded
                 json.dumps({"q": planted}).replace("/", "\\/")):     # JSON-escaped
        assert find_leaks({"log": clean + [line]}, ledger) == ["code in log line 3"], line
    # An id_token's signature alone is searched for too.
    ledger.add_token("id_token", "eyJhbGciOi.eyJzdWIiOiIx." + "s" * 40)
    assert find_leaks({"log": ["sig=" + "s" * 40]}, ledger) == ["id_token signature in log line 1"]
    # Shapes are found with no ledger at all: a relay code, a JWT, a credential.
    for line, kind in (("code=cpr1." + secrets.token_urlsafe(32), "a relay code (cpr1.…)"),
                       ("t=eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiIxMjMifQ.sig", "a JWT"),
                       ('"authorization":"Bearer ' + secrets.token_urlsafe(24) + '"',
                        "a Bearer/Basic credential")):
        assert find_leaks({"log": [line]}, Ledger()) == [f"{kind} in log line 1"], line


def test_the_scan_reads_the_proxys_access_log(proxy_factory, secret_ledger):
    """A request through the proxy with an Authorization header and a cookie, to a path that
    carries a canary: the access log records the path (the scan must find the canary there, or
    it is not reading the real lines) and neither header value (checked here and, through the
    ledger, by the run-wide scan)."""
    proxy = proxy_factory(None)
    canary = "canary-" + secrets.token_hex(12)
    bearer = "Bearer " + secrets.token_urlsafe(32)
    cookie = secrets.token_urlsafe(32)
    resp = requests.get(f"{proxy.url}/{canary}?token={canary}-q", timeout=10,
                        headers={"Authorization": bearer, "Cookie": f"_legacy_app_session={cookie}"})
    assert resp.status_code == 404          # the app's answer, through the proxy
    deadline = time.monotonic() + 5         # the access log is written after the response
    while f'"path":"/{canary}"' not in "".join(proxy.log_lines()) and time.monotonic() < deadline:
        time.sleep(0.02)
    planted = Ledger()
    planted.add("canary", canary)
    found = find_leaks(proxy_output([proxy]), planted)
    assert len(found) == 1 and found[0].startswith(f"canary in {proxy.stdout_path} line "), \
        (found, proxy.log_lines())
    sent = Ledger()
    sent.add("Authorization sent through the proxy", bearer)
    sent.add("cookie sent through the proxy", cookie)
    sent.add("query sent through the proxy", canary + "-q")
    assert find_leaks(proxy_output([proxy]), sent) == []
    for kind, values in sent.secrets.items():
        for value in values:
            secret_ledger.add(kind, value)


def test_no_secret_in_any_line_the_proxy_wrote(secret_ledger, idp_server, token_tap):
    """Every line of every proxy of this run, searched for every secret of this run."""
    proxies = list(Proxy.started)
    assert proxies, "no proxy ran in this session: nothing to scan (run the whole suite)"
    ledger = secret_ledger
    ledger.add("web client secret", WEB_SECRET)
    ledger.add("Rails secret_key_base", SECRET_KEY_BASE)
    ledger.add_idp(idp_server.issued_secrets())
    ledger.add_tap(token_tap.history)
    for wrapper in WrapperApp.instances:
        for result in wrapper.results:
            ledger.add_sign_in(result)
    sources = proxy_output(proxies)
    lines = sum(len(v) for v in sources.values())
    print(f"\n[log scan] {len(proxies)} proxies, {lines} lines; secrets by kind: {ledger.kinds()}")
    assert lines > 0
    assert "IdP code" in ledger.secrets          # the IdP hook answered: the ledger is not empty
    leaks = find_leaks(sources, ledger)
    assert not leaks, f"secrets in the proxy's output: {leaks}"


test_no_secret_in_any_line_the_proxy_wrote.run_last = True
