"""The Redis store: several proxy instances share one redis-server (Debian's), and when Redis
is gone callbacks fail closed (503) while ordinary proxying goes on; service comes back by itself."""
import json
import os
import socket
import subprocess
import threading
import sys
import time
import urllib.parse
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "idp"))
from idp_harness import IdP, make_test_pki  # noqa: E402
from helpers import HTTPConn, free_port  # noqa: E402

IOS = "123-ios.apps.googleusercontent.com"


class Redis:
    def __init__(self, tmp, pki=None):
        """`pki`: serve TLS only (redis-server's tls-port), with its server certificate."""
        self.port = free_port()
        self.tmp = tmp
        self.pki = pki
        self.proc = None
        self.start()

    def start(self):
        ports = ["--port", str(self.port)]
        if self.pki:
            ports = ["--port", "0", "--tls-port", str(self.port), "--tls-cert-file", self.pki.server_cert,
                     "--tls-key-file", self.pki.server_key, "--tls-ca-cert-file", self.pki.ca_cert,
                     "--tls-auth-clients", "no"]
        self.proc = subprocess.Popen(["redis-server", *ports, "--bind", "127.0.0.1",
                                      "--save", "", "--appendonly", "no", "--dir", str(self.tmp)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.02)
        raise RuntimeError("redis-server did not start")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def store_config(self, ca=None):
        """The proxy's store keys: rediss:// trusting `ca` (default: the server's CA) when TLS."""
        if not self.pki:
            return f"store: redis://127.0.0.1:{self.port}/0"
        return f"store: rediss://127.0.0.1:{self.port}/0\nstore_tls_ca: {ca or self.pki.ca_cert}"


@pytest.fixture(scope="module")
def idp(tmp_path_factory):
    d = tmp_path_factory.mktemp("idp")
    with IdP.start(make_test_pki(str(d)), log_dir=d) as srv:
        yield srv


@pytest.fixture
def redis(tmp_path):
    r = Redis(tmp_path)
    yield r
    r.stop()


@pytest.fixture
def tls_redis(tmp_path):
    r = Redis(tmp_path, pki=make_test_pki(str(tmp_path / "redis-pki")))
    yield r
    r.stop()


def start(proxy_factory, upstream, tmp_path, idp, redis, name, ca=None, store=None, env=None):
    """A proxy on `redis` (or on the `store` lines given instead)."""
    config = tmp_path / f"{name}.yaml"
    config.write_text(f"""
{store or redis.store_config(ca)}
oauth: {{ ca_file: {idp.ca_cert} }}
providers:
  google:
    kind: google
    handoff: verify
    endpoints: {{ token: {idp.base_url}/token, jwks: {idp.base_url}/jwks, issuer: {idp.base_url} }}
    native: {{ ios: {{ client_id: {IOS} }} }}
""")
    return proxy_factory(upstream, extra=["--config", str(config)], env=env)


def callback(p, grant):
    target = "/_oauth_callback?" + urllib.parse.urlencode({
        "provider": "google", "platform": "ios", "client_id": IOS, "redirect_uri": grant.redirect_uri,
        "code": grant.code, "state": grant.state, "code_verifier": grant.code_verifier})
    with HTTPConn(p.port, timeout=10) as c:
        c.request("GET", target)
        return c.read_response()


@pytest.mark.parametrize("redis_kind", ["redis", "tls_redis"])
def test_a_code_exchanged_on_one_instance_is_refused_on_another(proxy_factory, upstream, tmp_path, idp, redis_kind,
                                                                request):
    redis = request.getfixturevalue(redis_kind)
    a = start(proxy_factory, upstream, tmp_path, idp, redis, "a")
    b = start(proxy_factory, upstream, tmp_path, idp, redis, "b")
    grant = idp.get_code(IOS)
    idp.request("POST", "/_test/reset-stats")
    assert callback(a, grant).status == 200
    r = callback(b, grant)
    assert r.status == 400, r
    assert idp.request("GET", "/_test/stats").json()["token"]["requests"] == 1
    for p in (a, b):
        assert "redis store unavailable" not in p.stderr_text()


def test_over_tls_a_redis_certificate_that_does_not_verify_fails_closed(proxy_factory, upstream, tmp_path, idp,
                                                                       tls_redis):
    """Trusting another CA (the IdP's): callbacks are refused 503, the log says why."""
    p = start(proxy_factory, upstream, tmp_path, idp, tls_redis, "p", ca=idp.ca_cert)
    grant = idp.get_code(IOS)
    idp.request("POST", "/_test/reset-stats")
    r = callback(p, grant)
    assert r.status == 503, r
    assert idp.request("GET", "/_test/stats").json()["token"]["requests"] == 0
    lines = [line for line in p.stderr_text().splitlines() if "redis store unavailable" in line]
    assert lines and "certificate verify failed" in lines[0], p.stderr_text()
    with HTTPConn(p.port) as c:
        c.request("GET", "/echo")
        assert c.read_response().status == 200


def test_without_redis_callbacks_fail_closed_and_proxying_goes_on(proxy_factory, upstream, tmp_path, idp, redis):
    p = start(proxy_factory, upstream, tmp_path, idp, redis, "p")
    assert callback(p, idp.get_code(IOS)).status == 200
    redis.stop()
    grant = idp.get_code(IOS)
    idp.request("POST", "/_test/reset-stats")
    r = callback(p, grant)
    assert r.status == 503, r
    assert idp.request("GET", "/_test/stats").json()["token"]["requests"] == 0, "never exchange without the replay guard"
    with HTTPConn(p.port) as c:
        c.request("GET", "/echo")
        assert c.read_response().status == 200
    # the operator's view: the store failure is counted, /readyz names the store
    from test_observability import readyz, samples, scrape, value
    s = samples(scrape(p))
    assert value(s, "callback_proxy_store_errors_total", store="redis") >= 1
    assert value(s, "callback_proxy_callbacks_total", provider="google", platform="ios",
                 outcome="store_unavailable") == 1
    status, body = readyz(p)
    assert status == 503 and "store" in body["failed"] and "upstream" not in body["failed"], body
    redis.start()
    deadline = time.monotonic() + 5
    status = None
    while time.monotonic() < deadline:
        status = callback(p, grant).status
        if status != 503:
            break
        time.sleep(0.2)
    assert status == 200, "service must come back by itself when Redis returns"
    assert readyz(p) == (200, {"ready": True})


def test_a_redis_reply_declaring_a_huge_array_is_a_store_error(proxy_factory, upstream, tmp_path, idp):
    """A peer that answers every command with `*288888882\\r\\n` (12 bytes that made hiredis 0.14
    allocate 2.3 GB): refused as a protocol error before the parser sees it; the callback fails
    closed with 503, without an exchange, and the proxy goes on."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    port = server.getsockname()[1]
    stop = threading.Event()

    def serve():
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            with conn:
                try:
                    conn.settimeout(2)
                    if conn.recv(4096):
                        conn.sendall(b"*288888882\r\n")
                        conn.recv(4096)     # until the proxy drops the connection
                except OSError:
                    pass

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        p = start(proxy_factory, upstream, tmp_path, idp, None, "huge", store=f"store: redis://127.0.0.1:{port}")
        grant = idp.get_code(IOS)
        idp.request("POST", "/_test/reset-stats")
        r = callback(p, grant)
        assert r.status == 503, r
        assert idp.request("GET", "/_test/stats").json()["token"]["requests"] == 0
        assert "reply declares 288888882 elements (at most 65536)" in p.stderr_text(), p.stderr_text()[-2000:]
        with HTTPConn(p.port) as c:
            c.request("GET", "/echo")
            assert c.read_response().status == 200
    finally:
        stop.set()
        t.join(2)
        server.close()


def relay_config(tmp_path, idp, redis, store=None):
    """A relay-mode configuration on `redis`, or on the `store` URL given instead (the app's
    secret in the environment)."""
    from test_relay import CALLBACK, WEB, WEB_SECRET
    os.environ["WEB_SECRET"] = WEB_SECRET
    config = tmp_path / "relay.yaml"
    config.write_text(f"""
store: {store or f"redis://127.0.0.1:{redis.port}/0"}
oauth: {{ ca_file: {idp.ca_cert} }}
providers:
  google:
    kind: google
    handoff: relay
    app_callback: {CALLBACK}
    app_client: {{ id: {WEB}, secret_env: WEB_SECRET }}
    endpoints: {{ token: {idp.base_url}/token, jwks: {idp.base_url}/jwks, issuer: {idp.base_url} }}
    native: {{ ios: {{ client_id: {IOS} }} }}
""")
    return str(config)


def test_a_relay_code_minted_on_one_instance_is_redeemed_through_another(proxy_factory, tmp_path, idp, redis):
    """Scale-out: the WebView's callback reaches instance A, the app's token request instance B."""
    from test_relay import App, CALLBACK
    app = App()
    try:
        config = relay_config(tmp_path, idp, redis)
        a = proxy_factory(upstream_url=app.url, extra=["--config", config])
        b = proxy_factory(upstream_url=app.url, extra=["--config", config])
        app.token_url = f"http://127.0.0.1:{b.internal_port}/_oauth/token"
        r = callback(a, idp.get_code(IOS))
        assert r.status == 200, r
        page = r.json()
        assert page["redeemed"] == 200 and page["token"]["access_token"], page
        relay_code = [s for s in app.seen if s["path"] == CALLBACK][-1]["query"]["code"]
        app.token_url = f"http://127.0.0.1:{a.internal_port}/_oauth/token"
        assert app.redeem(relay_code) == (400, {"error": "invalid_grant"}), "single use across instances"
    finally:
        app.stop()


@pytest.mark.parametrize("when", ["after-the-exchange", "before-the-replay-guard"])
def test_redis_lost_mid_callback_lands_in_the_apps_failure_path(proxy_factory, tmp_path, idp, redis, when):
    """Redis killed while the code is being exchanged (the relay code cannot be written), or
    down before the callback arrives: the app's callback gets error=temporarily_unavailable
    with the state, and runs its own failure flow — not the proxy's 503 page."""
    from test_relay import App, CALLBACK
    app = App()
    try:
        p = proxy_factory(upstream_url=app.url, extra=["--config", relay_config(tmp_path, idp, redis)])
        app.token_url = f"http://127.0.0.1:{p.internal_port}/_oauth/token"
        grant = idp.get_code(IOS)
        idp.request("POST", "/_test/reset-stats")
        if when == "after-the-exchange":
            idp.set_mode(token="slow:1500", times=1)
            result = {}
            t = threading.Thread(target=lambda: result.setdefault("r", callback(p, grant)))
            t.start()
            time.sleep(0.6)         # the replay guard has answered; the exchange is under way
            redis.stop()
            t.join(10)
            r = result["r"]
            exchanges = 1
        else:
            redis.stop()
            r = callback(p, grant)
            exchanges = 0
        assert r.status == 200, r
        assert r.json() == {"failure": "temporarily_unavailable", "state": grant.state}, r.json()
        assert [s["query"] for s in app.seen if s["path"] == CALLBACK] == [
            {"error": "temporarily_unavailable", "state": grant.state}]
        assert idp.request("GET", "/_test/stats").json()["token"]["requests"] == exchanges
        from test_observability import samples, scrape, value
        assert value(samples(scrape(p)), "callback_proxy_callbacks_total", provider="google", platform="ios",
                     outcome="store_unavailable") == 1
        failed = [json.loads(l) for l in p.stderr_text().splitlines() if '"callback failed"' in l]
        assert [(f["source"], f["reason"]) for f in failed] == [("internal", "store_unavailable")], failed
    finally:
        idp.request("POST", "/_test/mode", json={"token": "ok"})
        app.stop()


def test_a_session_cookie_issued_by_one_instance_is_honoured_by_another(proxy_factory, upstream, tmp_path, idp, redis):
    from test_session import get, set_cookies, sign_in
    a, b = session_proxies(proxy_factory, upstream, tmp_path, idp, redis)
    r, _, _, _ = sign_in(a, idp)
    assert r.status == 302, r
    session = {k: v for k, v in set_cookies(r).items() if k.startswith("_oauth_session")}
    info = get(b, "/_oauth/userinfo", cookies=session)
    assert info.status == 200 and info.json()["email"] == "alice@example.test"


def session_proxies(proxy_factory, upstream, tmp_path, idp, redis, n=2, store=None,
                    access="allowed_email_domains: [example.test]"):
    """`n` session-mode proxies sharing the redis store, or the `store` URL given instead
    (server-side sessions by default)."""
    from test_session import session_config
    config = tmp_path / "server-side.yaml"
    config.write_text(session_config(idp, store=store or f"redis://127.0.0.1:{redis.port}/0", access=access))
    return [proxy_factory(upstream, extra=["--config", str(config)]) for _ in range(n)]


def redis_keys(redis, pattern):
    with socket.create_connection(("127.0.0.1", redis.port), timeout=2) as s:
        s.sendall(f"*2\r\n$4\r\nKEYS\r\n${len(pattern)}\r\n{pattern}\r\n".encode())
        data = s.recv(65536).decode()
    return [line for line in data.split("\r\n") if line.startswith("session:") or ":session:" in line]


def test_server_side_sessions_end_at_sign_out_on_every_instance(proxy_factory, upstream, tmp_path, idp, redis):
    """With redis the session lives in the store: the cookie is a short sealed id, and signing out
    on one instance makes the same cookie worthless on the other (a copied cookie dies too)."""
    from test_session import get, set_cookies, sign_in
    a, b = session_proxies(proxy_factory, upstream, tmp_path, idp, redis)
    r, _, _, _ = sign_in(a, idp, rd="/private/page")
    assert r.status == 302, r
    session = {k: v for k, v in set_cookies(r).items() if k.startswith("_oauth_session")}
    assert list(session) == ["_oauth_session"] and len(session["_oauth_session"]) < 120, session
    assert len(redis_keys(redis, "*session:*")) == 1
    assert get(b, "/_oauth/userinfo", cookies=session).json()["email"] == "alice@example.test"
    echo = get(b, "/echo", cookies=session).json()
    assert ("x-forwarded-email", "alice@example.test") in [(k.lower(), v) for k, v in echo["headers"]]

    out = get(a, "/_oauth/sign_out?rd=/bye", cookies=session)
    assert out.status == 302 and out.one("location") == "/bye"
    assert redis_keys(redis, "*session:*") == []
    # The old cookie, replayed (say, copied before sign-out) on the other instance:
    assert get(b, "/_oauth/userinfo", cookies=session).status == 401
    assert get(b, "/_oauth/auth", cookies=session).status == 401
    r = get(b, "/private/x", cookies=session)
    assert r.status == 302 and r.one("location").startswith("/_oauth/start?")
    echo = get(b, "/echo", cookies=session).json()
    assert not [k for k, v in echo["headers"] if k.lower() == "x-forwarded-email"]


IDLE = "allowed_email_domains: [example.test], server_side: true, idle_timeout: 3s"


def keep_using(proxies, session, seconds):
    """Asks for a protected page about every second for `seconds`, on each instance in turn: each
    request more than a second (a third of the timeout) after the last write slides the record."""
    from test_session import get
    started, i = time.monotonic(), 0
    while time.monotonic() - started < seconds:
        r = get(proxies[i % len(proxies)], "/private/x", cookies=session, headers={"Accept": "application/json"})
        assert r.status == 404, f"signed out {time.monotonic() - started:.1f} s in: {r.status}"
        i += 1
        time.sleep(1.05)


def test_a_session_in_use_slides_its_idle_timeout_on_every_instance(proxy_factory, upstream, tmp_path, idp, redis):
    """The slide is a compare-and-set (`EVAL`, a script Redis runs atomically): it only replaces the
    record it read, so it can neither bring back a session signed out meanwhile nor put back a
    refresh token rotated meanwhile (SessionRecordRaceTests). Through real Redis here."""
    from test_session import get, set_cookies, sign_in
    a, b = session_proxies(proxy_factory, upstream, tmp_path, idp, redis, access=IDLE)
    used, _, _, _ = sign_in(a, idp)
    idle, _, _, _ = sign_in(a, idp, username="bob@example.test")
    used, idle = [{k: v for k, v in set_cookies(r).items() if k.startswith("_oauth_session")} for r in (used, idle)]
    keep_using((a, b), used, 5)
    assert get(b, "/private/x", cookies=used, headers={"Accept": "application/json"}).status == 404, "in use past the timeout"
    assert get(b, "/private/x", cookies=idle, headers={"Accept": "application/json"}).status == 401, "idle past the timeout"
    assert len(redis_keys(redis, "*session:*")) == 1, "the idle session's record expired"
    for p in (a, b):
        assert "session activity not recorded" not in p.stderr_text(), p.stderr_text()[-2000:]


def test_without_redis_protected_paths_fail_closed_instead_of_looping(proxy_factory, upstream, tmp_path, idp, redis):
    from test_session import get, set_cookies, sign_in
    [p] = session_proxies(proxy_factory, upstream, tmp_path, idp, redis, n=1)
    r, _, _, _ = sign_in(p, idp)
    session = {k: v for k, v in set_cookies(r).items() if k.startswith("_oauth_session")}
    assert get(p, "/private/x", cookies=session).status == 404, "signed in: reaches the upstream"
    redis.stop()
    r = get(p, "/private/x", cookies=session)
    assert r.status == 503, r
    assert get(p, "/private/x", cookies=session, headers={"Accept": "application/json"}).status == 503
    assert get(p, "/_oauth/auth", cookies=session).status == 503
    out = get(p, "/_oauth/sign_out", cookies=session)
    assert out.status == 503 and not set_cookies(out), "not signed out: the cookie stays to try again"
    # Unprotected paths go on, anonymously.
    e = get(p, "/echo", cookies=session)
    assert e.status == 200
    assert not [k for k, v in e.json()["headers"] if k.lower() == "x-forwarded-email"]
    assert not [line for line in p.stderr_text().splitlines() if session["_oauth_session"] in line]


def test_a_redis_name_that_resolves_only_later_is_followed_without_a_reload(proxy_factory, upstream, tmp_path, idp,
                                                                             redis):
    # The proxy started before its Redis had a name (a compose file, a Service created later).
    from test_upstream_names import Hosts, log_lines
    hosts = Hosts(tmp_path)
    p = start(proxy_factory, upstream, tmp_path, idp, redis, "late",
              store=f"store: redis://late-redis.test:{redis.port}/0", env=hosts.env)
    assert callback(p, idp.get_code(IOS)).status == 503
    warned = log_lines(p, "redis name does not resolve")
    assert len(warned) == 1 and warned[0]["name"] == "late-redis.test"
    hosts.set({"late-redis.test": ["127.0.0.1"]})
    deadline = time.monotonic() + 8
    status = None
    while time.monotonic() < deadline and status != 200:
        time.sleep(0.3)
        status = callback(p, idp.get_code(IOS)).status
    assert status == 200, "the store must come up by itself once its name resolves"
    assert log_lines(p, "redis addresses")[-1]["addresses"] == f"127.0.0.1:{redis.port}"


# ---------------------------------------------------------------------------------------------
# check --online tries every command the proxy sends (StoreProbe)


def check_online(proxy_bin, tmp_path, store_lines, env=None):
    config = tmp_path / "check-store.yaml"
    config.write_text(f"upstream: http://127.0.0.1:9\n{store_lines}\n")
    out = subprocess.run([proxy_bin, "check", "--online", "--config", str(config)], capture_output=True, text=True,
                         timeout=30, env={**os.environ, **(env or {})})
    return out.returncode, out.stdout


def redis_cli(redis, *args):
    return subprocess.run(["redis-cli", "-p", str(redis.port), *args], capture_output=True, text=True, timeout=5).stdout


@pytest.mark.parametrize("redis_kind", ["redis", "tls_redis"])
def test_check_online_tries_the_store(proxy_bin, tmp_path, redis_kind, request):
    redis = request.getfixturevalue(redis_kind)
    code, out = check_online(proxy_bin, tmp_path, redis.store_config())
    assert code == 0, out
    assert "online: the store answered every command the proxy sends" in out, out
    if redis_kind == "redis":
        assert redis_cli(redis, "--scan", "--pattern", "*check:*").strip() == "", "the check key was left behind"


def test_check_online_names_the_command_an_acl_user_lacks(proxy_bin, tmp_path, redis):
    """operations.md's ACL line, as written there, passes; without `+eval` (sessions'
    compare-and-set) the check says which command was refused. The user is named as
    operations.md shows it, `redis://user@host`, with the password from the variable."""
    store = f"store: redis://proxy@127.0.0.1:{redis.port}/0"
    env = {"CALLBACK_PROXY_REDIS_PASSWORD": "proxy-pw"}
    assert redis_cli(redis, "ACL", "SETUSER", "proxy", "on", ">proxy-pw", "~cbp:*",
                     "+get", "+set", "+getdel", "+del", "+eval").strip() == "OK"
    code, out = check_online(proxy_bin, tmp_path, store, env)
    assert code == 0, out
    assert redis_cli(redis, "ACL", "SETUSER", "proxy", "-eval").strip() == "OK"
    code, out = check_online(proxy_bin, tmp_path, store, env)
    assert code == 1, out
    line = [l for l in out.splitlines() if ": store: " in l]
    assert line and "EVAL (the compare-and-set script) on a check key failed" in line[0] and "NOPERM" in line[0], out
    assert "proxy-pw" not in out
    # A wrong password is named as such, and never printed.
    code, out = check_online(proxy_bin, tmp_path, store, {"CALLBACK_PROXY_REDIS_PASSWORD": "not-it"})
    assert code == 1 and "AUTH refused" in out and "not-it" not in out, out


def test_check_online_says_when_the_store_is_not_there(proxy_bin, tmp_path):
    from helpers import closed_port
    code, out = check_online(proxy_bin, tmp_path, f"store: redis://127.0.0.1:{closed_port()}/0")
    assert code == 1 and ": store: SET NX" in out and "Connection refused" in out, out
