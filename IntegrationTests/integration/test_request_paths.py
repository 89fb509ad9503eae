"""One request target, one meaning: session mode's `protect`/`skip` against path spellings, in
front of two real upstream servers that normalize paths differently.

- werkzeug (Flask's server): decodes every escape into PATH_INFO (`%2F` → `/`), routes on it,
  and redirects `//admin` to `/admin` (merge_slashes);
- nginx with `location` blocks: matches on its own decoded, dot-segment-free, slash-merged URI.

For each spelling the proxy must answer 400, or the sign-in redirect (302 to /_oauth/start) or
401, or pass the request on — and then never to a protected page: the upstream's protected
pages say SECRET, and no answer to an anonymous client may. Where a request passes, the target
the upstream received is the canonical one. Signed in, the same spellings do reach the
protected page (so the SECRET check can fail).
"""
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from flask import Flask, jsonify, request
from werkzeug.serving import make_server

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "idp"))
from idp_harness import IdP, make_test_pki  # noqa: E402
from helpers import HTTPConn, free_port  # noqa: E402
from test_session import IOS, SECRET, WEB, session_config, set_cookies, sign_in  # noqa: E402

PROTECTED = ("/admin", "/api/private")

# Spellings of a protected path (werkzeug and nginx vectors from the issue, and more).
PROTECTED_SPELLINGS = [
    "/admin", "/admin/users", "//admin", "/%61dmin", "/%2Fadmin", "/%2fadmin", "/adm%69n/users", "/api%2fprivate",
    "/./admin", "/x/../admin", "/x/%2e%2e/admin", "/x/%2E%2E/admin", "/x/..%2Fadmin", "/admin;x=1", "/x/..;/admin",
    "/%252e%252e/admin", "/x%5C..%5Cadmin", "/x\\..\\admin", "/admin./", "/ADMIN/..//admin", "/a/b/../../admin",
    "/api//private", "/api/./private/", "/%2e/admin", "/%2561dmin",
]
REFUSED = ["/../admin", "/x/../../admin", "/%2e%2e/admin", "/admin%00", "/%c0%ae%c0%ae/admin", "/%e0%80%ae/admin",
           "/adm%in", "/%"]
# (what the client sends, what the upstream must receive)
PASSED = [("/public/x", "/public/x"), ("//public//x", "/public/x"), ("/%70ublic/%7Ex?q=%2F..%2F", "/public/~x?q=%2F..%2F"),
          ("/public/a/./b/../c", "/public/a/c"), ("/queues/%2f/q", "/queues/%2F/q"), ("/publicadmin", "/publicadmin")]
# With `protect: all, skip: [/public]`: spellings that must not count as skipped.
NOT_SKIPPED = ["/admin", "/public/../admin", "/public/%2e%2e/admin", "/public/..%2fadmin", "/public/..%2Fadmin",
               "/publicadmin", "/public-admin", "/public.admin", "/public/..;/admin", "/public;/../admin",
               "/public/%252e%252e/admin", "/public\\..\\admin", "/public%2F..%2Fadmin", "/PUBLIC/x",
               "/public%5c..%5cadmin"]


# --- the two upstreams ------------------------------------------------------------------------

def flask_app():
    app = Flask("paths")

    def page(kind):
        return jsonify(page=kind, secret="SECRET" if kind != "public" and kind != "other" else "",
                       path_info=request.environ["PATH_INFO"], target=request.environ.get("REQUEST_URI"),
                       user=request.headers.get("X-Forwarded-User"))

    @app.route("/admin", defaults={"rest": ""}, strict_slashes=False)
    @app.route("/admin/<path:rest>")
    def admin(rest):
        return page("admin")

    @app.route("/api/private", defaults={"rest": ""}, strict_slashes=False)
    @app.route("/api/private/<path:rest>")
    def private(rest):
        return page("private")

    @app.route("/public", defaults={"rest": ""}, strict_slashes=False)
    @app.route("/public/<path:rest>")
    def public(rest):
        return page("public")

    @app.route("/", defaults={"rest": ""})
    @app.route("/<path:rest>")
    def other(rest):
        return page("other")

    return app


@pytest.fixture(scope="module")
def werkzeug_upstream():
    server = make_server("127.0.0.1", 0, flask_app(), threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()


NGINX_CONF = """
worker_processes 1; pid {d}/nginx.pid; error_log {d}/error.log warn; daemon on;
events {{ worker_connections 128; }}
http {{
  access_log off;
  client_body_temp_path {d}; proxy_temp_path {d}; fastcgi_temp_path {d}; uwsgi_temp_path {d}; scgi_temp_path {d};
  server {{
    listen 127.0.0.1:{port};
    default_type text/plain;
    location = /admin {{ return 200 "SECRET admin target=$request_uri user=$http_x_forwarded_user\\n"; }}
    location /admin/ {{ return 200 "SECRET admin target=$request_uri user=$http_x_forwarded_user\\n"; }}
    location = /api/private {{ return 200 "SECRET private target=$request_uri user=$http_x_forwarded_user\\n"; }}
    location /api/private/ {{ return 200 "SECRET private target=$request_uri user=$http_x_forwarded_user\\n"; }}
    location / {{ return 200 "other target=$request_uri\\n"; }}
  }}
}}
"""


@pytest.fixture(scope="module")
def nginx_upstream(tmp_path_factory):
    d = tmp_path_factory.mktemp("nginx")
    port = free_port()
    (d / "nginx.conf").write_text(NGINX_CONF.format(d=d, port=port))
    subprocess.run(["/usr/sbin/nginx", "-c", str(d / "nginx.conf"), "-e", str(d / "error.log")], check=True)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            with HTTPConn(port, timeout=1) as c:
                c.request("GET", "/")
                c.read_response()
            break
        except OSError:
            time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    subprocess.run(["/usr/sbin/nginx", "-c", str(d / "nginx.conf"), "-e", str(d / "error.log"), "-s", "stop"])


@pytest.fixture(params=["werkzeug", "nginx"])
def app_url(request):
    return request.getfixturevalue(request.param + "_upstream")


@pytest.fixture(scope="module")
def idp(tmp_path_factory):
    d = tmp_path_factory.mktemp("idp")
    with IdP.start(make_test_pki(str(d)), log_dir=d) as srv:
        yield srv


def start(proxy_factory, tmp_path, idp, app_url, rules):
    config = tmp_path / "paths.yaml"
    config.write_text(session_config(idp, rules=rules))
    return proxy_factory(upstream_url=app_url, extra=["--config", str(config)])


def send(p, target, cookies=None):
    headers = [("Cookie", "; ".join(f"{k}={v}" for k, v in cookies.items()))] if cookies else []
    with HTTPConn(p.port) as c:
        c.request("GET", target, headers=headers)
        return c.read_response()


def body(r):
    return r.body.decode("utf-8", "replace")


def assert_kept_out(r, target):
    """400, the sign-in redirect, 401 — or an answer that is not a protected page."""
    if r.status == 400:
        return "refused"
    if r.status == 302 and r.one("location").startswith("/_oauth/start?rd="):
        return "sign-in"
    if r.status == 401:
        return "sign-in"
    assert "SECRET" not in body(r), f"{target} reached a protected page without a session: {r.status} {body(r)}"
    return "passed"


def received_target(r):
    """The request target the upstream received, from its own answer."""
    text = body(r)
    if text.startswith("{"):
        return json.loads(text)["target"]
    return text.split("target=", 1)[1].split()[0]


@pytest.mark.parametrize("rules", ["protect: [/admin, /api/private]", "protect: all, skip: [/public, /queues, /publicadmin]"])
def test_no_spelling_of_a_protected_path_reaches_it_without_a_session(proxy_factory, tmp_path, idp, app_url, rules):
    p = start(proxy_factory, tmp_path, idp, app_url, rules)
    outcomes = {t: assert_kept_out(send(p, t), t) for t in PROTECTED_SPELLINGS + REFUSED}
    assert all(outcomes[t] == "refused" for t in REFUSED), outcomes
    # The plain spellings get the sign-in, not merely "something other than the page".
    for t in ("/admin", "//admin", "/%61dmin", "/x/../admin", "/%2Fadmin", "/x/..;/admin", "/api%2fprivate"):
        assert outcomes[t] == "sign-in", (t, outcomes[t])
    # Absolute-form reaches the same decision.
    assert assert_kept_out(send(p, "http://test.local//admin"), "absolute-form") == "sign-in"


def test_the_sign_in_redirect_remembers_the_canonical_target(proxy_factory, tmp_path, idp, werkzeug_upstream):
    p = start(proxy_factory, tmp_path, idp, werkzeug_upstream, "protect: [/admin]")
    r = send(p, "//adm%69n/./users?tab=%2F")
    assert r.status == 302
    assert r.one("location") == "/_oauth/start?rd=%2Fadmin%2Fusers%3Ftab%3D%252F"


@pytest.mark.parametrize("target,expected", PASSED)
def test_unprotected_paths_reach_the_upstream_as_the_canonical_target(proxy_factory, tmp_path, idp, app_url, target,
                                                                      expected):
    p = start(proxy_factory, tmp_path, idp, app_url, "protect: [/admin, /api/private]")
    r = send(p, target)
    assert r.status == 200, body(r)
    assert received_target(r) == expected


def test_with_protect_all_only_real_skip_paths_are_skipped(proxy_factory, tmp_path, idp, app_url):
    p = start(proxy_factory, tmp_path, idp, app_url, "protect: all, skip: [/public]")
    for t in NOT_SKIPPED:
        r = send(p, t)
        assert r.status in (302, 401, 400), f"{t} was skipped: {r.status} {body(r)}"
    for t in ("/public", "/public/app.css", "//public/x", "/%70ublic/x"):
        r = send(p, t)
        assert r.status == 200 and "SECRET" not in body(r), (t, r.status)


def test_signed_in_every_spelling_reaches_the_page_under_its_canonical_path(proxy_factory, tmp_path, idp, app_url):
    p = start(proxy_factory, tmp_path, idp, app_url, "protect: [/admin, /api/private]")
    r, _, _, _ = sign_in(p, idp, rd="/admin")
    assert r.status == 302, r
    session = {k: v for k, v in set_cookies(r).items() if k.startswith("_oauth_session")}
    for target, expected in [("/admin", "/admin"), ("//admin", "/admin"), ("/%61dmin", "/admin"),
                             ("/x/%2e%2e/admin/users", "/admin/users"), ("/api//private", "/api/private")]:
        r = send(p, target, cookies=session)
        assert r.status == 200 and "SECRET" in body(r), (target, r.status, body(r))
        assert received_target(r) == expected
        assert "user=None" not in body(r) and '"user":null' not in body(r), "identity headers came along"


def test_a_refused_path_is_logged_with_the_rule(proxy_factory, tmp_path, idp, werkzeug_upstream):
    p = start(proxy_factory, tmp_path, idp, werkzeug_upstream, "protect: [/admin]")
    r = send(p, "/a/../../etc/passwd")
    assert r.status == 400
    assert "climbs above the root" in body(r)
    deadline = time.monotonic() + 3
    while "climbs above the root" not in p.stderr_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    line = [json.loads(l) for l in p.stderr_text().splitlines() if "climbs above the root" in l][0]
    assert line["msg"] == "request refused" and line["status"] == "400"


def test_check_refuses_a_prefix_that_is_not_canonical(proxy_bin, tmp_path):
    config = tmp_path / "bad.yaml"
    os.environ["SESSION_SECRET"] = SECRET
    os.environ["WEB_SECRET"] = "test-web-secret-not-a-real-one"
    config.write_text(f"""
upstream: http://127.0.0.1:9
oauth:
  session: {{ secret_env: SESSION_SECRET, protect: [/%61dmin, /ok], skip: [/x/../public] }}
providers:
  google:
    handoff: session
    app_client: {{ id: {WEB}, secret_env: WEB_SECRET }}
    native: {{ ios: {{ client_id: {IOS} }} }}
""")
    r = subprocess.run([proxy_bin, "check", "--config", str(config)], capture_output=True, text=True)
    assert r.returncode == 1
    out = r.stdout + r.stderr
    assert "oauth.session.protect" in out and "write it as /admin" in out, out
    assert "oauth.session.skip" in out and "write it as /public" in out, out
