"""Header rules (`headers:`) through the real binary: set, add and remove both ways, the two
variables, the proxy's own answers included; and `check` refusing every rule that would touch a
field the proxy owns (forwarding, identity, framing)."""

import subprocess

from helpers import closed_port

RULES = """headers:
  request:
    set: { X-Env: production }
    add: { X-Trace: "req-{request_id} from {client_address}" }
    remove: [X-Debug]
  response:
    set: { X-Frame-Options: DENY }
    add: { X-Served-By: edge }
    remove: [X-Up-Keep]
"""


def rules_proxy(proxy_factory, tmp_path, upstream=None, url=None):
    cfg = tmp_path / "rules.yaml"
    cfg.write_text(RULES)
    return proxy_factory(upstream, upstream_url=url, extra=["--config", str(cfg)])


def test_requests_and_responses_are_rewritten_as_configured(proxy_factory, upstream, tmp_path):
    p = rules_proxy(proxy_factory, tmp_path, upstream)
    with p.conn() as c:
        c.request("GET", "/echo", headers=[("X-Env", "forged"), ("X-Debug", "1"), ("X-Request-Id", "abcdef0123456789")])
        r = c.read_response()
        seen = r.json()["headers"]
        names = [n.lower() for n, _ in seen]
        assert [v for n, v in seen if n.lower() == "x-env"] == ["production"]
        assert "x-debug" not in names
        assert [v for n, v in seen if n.lower() == "x-trace"] == ["req-abcdef0123456789 from 127.0.0.1"]
        assert r.one("x-frame-options") == "DENY" and r.one("x-served-by") == "edge"
        c.request("GET", "/hop")
        r = c.read_response()
        assert r.one("x-up-keep") is None and r.one("x-frame-options") == "DENY"


def test_the_proxys_own_answers_follow_the_response_rules(proxy_factory, tmp_path):
    p = rules_proxy(proxy_factory, tmp_path, url=f"http://127.0.0.1:{closed_port()}")
    with p.conn() as c:
        c.request("GET", "/anything")
        r = c.read_response()
        assert r.status == 502 and r.one("x-frame-options") == "DENY" and r.one("x-served-by") == "edge"


def check(proxy_bin, tmp_path, text):
    cfg = tmp_path / "check.yaml"
    cfg.write_text("upstream: http://127.0.0.1:1\n" + text)
    out = subprocess.run([proxy_bin, "check", "--config", str(cfg)], capture_output=True, text=True, timeout=10)
    return out.returncode, out.stdout + out.stderr


def test_check_refuses_rules_on_fields_the_proxy_owns(proxy_bin, tmp_path):
    for direction, name in [("request", "X-Forwarded-User"), ("request", "x_forwarded_for"), ("request", "Host"),
                            ("request", "X-Request-Id"), ("request", "X-Auth-Request-Email"), ("request", "Content-Length"),
                            ("response", "Transfer-Encoding"), ("response", "Content-Encoding")]:
        for verb in ("set", "add"):
            rc, out = check(proxy_bin, tmp_path, f"headers: {{ {direction}: {{ {verb}: {{ {name}: x }} }} }}\n")
            assert rc != 0 and f"headers.{direction}.{verb}.{name}" in out and "set by the proxy itself" in out, (name, out)
        rc, out = check(proxy_bin, tmp_path, f"headers: {{ {direction}: {{ remove: [{name}] }} }}\n")
        assert rc != 0 and "set by the proxy itself" in out, (name, out)
    rc, out = check(proxy_bin, tmp_path, 'headers: { request: { set: { "X-Bad": "a\\r\\nInjected: 1" } } }\n')
    assert rc != 0 and "line break" in out, out
    rc, out = check(proxy_bin, tmp_path, "headers: { response: { set: { X-Frame-Options: DENY }, remove: [Server] } }\n")
    assert rc == 0, out


def test_check_refuses_a_misspelt_variable(proxy_bin, tmp_path):
    # nginx refuses unknown variables; sent as written, a typo would never show.
    rc, out = check(proxy_bin, tmp_path, 'headers: { request: { add: { X-Client: "{client_addres}" } } }\n')
    assert rc != 0 and "headers.request.add.X-Client" in out and "{client_addres}" in out, out
    rc, out = check(proxy_bin, tmp_path, 'headers: { response: { set: { X-Trace: "{request_id}/{client_address}", '
                                         'X-Json: "{\\"a\\": 1}", X-Braces: "{} {1x} {a-b}" } } }\n')
    assert rc == 0, out
