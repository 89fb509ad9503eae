"""Relay and params hand-off through the proxy, against the strict test IdP and a stand-in app.

The stand-in app behaves like an OmniAuth app whose only change is its token URL: on its
callback it posts the code it was given to `token_url` (the proxy's relay token endpoint) with
its web client's credentials, and shows what it got. The Rails + Devise + OmniAuth app with a
real browser is the end-to-end suite (IntegrationTests/e2e); this one pins the proxy's side precisely.
"""
import base64
import http.server
import json
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "idp"))
from idp_harness import IdP, make_test_pki  # noqa: E402
from helpers import serve_http  # noqa: E402
from test_http2 import cert  # noqa: E402,F401 (the TLS fixture, shared)

WEB = "123-web.apps.googleusercontent.com"
WEB_SECRET = "test-web-secret-not-a-real-one"
IOS = "123-ios.apps.googleusercontent.com"
IOS_REDIRECT = "com.googleusercontent.apps.123-ios:/oauth2redirect"
CALLBACK = "/users/auth/google_oauth2/callback"


class App:
    """An OAuth client app behind the proxy: redeems what its callback receives at token_url."""

    def __init__(self):
        self.token_url = None
        self.auth = "post"
        self.seen = []
        app = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):
                url = urllib.parse.urlsplit(self.path)
                q = dict(urllib.parse.parse_qsl(url.query))
                app.seen.append({"path": url.path, "query": q, "cookie": self.headers.get("Cookie"),
                                 "host": self.headers.get("Host"), "headers": list(self.headers.items())})
                if url.path != CALLBACK:
                    return self.reply(200, {"page": "home"})
                if "error" in q:
                    return self.reply(200, {"failure": q["error"], "state": q.get("state")})
                if "access_token" in q:
                    return self.reply(200, {"params": sorted(q), "state": q.get("state")})
                status, body = app.redeem(q["code"])
                self.reply(200, {"redeemed": status, "token": body, "state": q.get("state")},
                           extra=[("Set-Cookie", "app_session=signed-in; HttpOnly")])

            def reply(self, status, obj, extra=()):
                body = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                for k, v in extra:
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a):
                pass

        self.server = serve_http(Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def redeem(self, code, secret=WEB_SECRET, client_id=WEB, verifier="app-own-verifier-" + "x" * 40):
        # Like OmniAuth with PKCE on: the app sends its own verifier; for a relay code it is
        # irrelevant (the proxy already exchanged the native code), for a web code it must match.
        form = {"grant_type": "authorization_code", "code": code,
                "redirect_uri": "http://127.0.0.1" + CALLBACK, "code_verifier": verifier}
        headers = {"Content-Type": "application/x-www-form-urlencoded"}
        if self.auth == "basic":
            pair = f"{urllib.parse.quote_plus(client_id)}:{urllib.parse.quote_plus(secret)}"
            headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
        else:
            form.update(client_id=client_id, client_secret=secret)
        req = urllib.request.Request(self.token_url, data=urllib.parse.urlencode(form).encode(), headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"{}")

    def stop(self):
        self.server.shutdown()


@pytest.fixture(scope="module")
def idp(tmp_path_factory):
    d = tmp_path_factory.mktemp("idp")
    with IdP.start(make_test_pki(str(d)), log_dir=d) as srv:
        yield srv


@pytest.fixture
def app():
    a = App()
    yield a
    a.stop()


def start_proxy(proxy_factory, tmp_path, idp, app, handoff="relay", extra_provider="", relay_ttl="60s", extra=(), env=None):
    config = tmp_path / "proxy.yaml"
    config.write_text(f"""
oauth: {{ ca_file: {idp.ca_cert}, idp_timeout: 5s, relay_code_ttl: {relay_ttl} }}
providers:
  google:
    kind: google
    handoff: {handoff}
    app_callback: {CALLBACK}
    app_client: {{ id: {WEB}, secret_env: WEB_SECRET }}
    endpoints: {{ token: {idp.base_url}/token, jwks: {idp.base_url}/jwks, issuer: {idp.base_url} }}
    native:
      ios: {{ client_id: {IOS} }}
{extra_provider}""")
    import os
    os.environ["WEB_SECRET"] = WEB_SECRET
    p = proxy_factory(upstream_url=app.url, extra=["--config", str(config), *extra], env=env)
    app.token_url = f"http://127.0.0.1:{p.internal_port}/_oauth/token"
    return p


def callback_url(p, grant, **override):
    q = {"provider": "google", "platform": "ios", "client_id": grant.client_id, "redirect_uri": grant.redirect_uri,
         "code": grant.code, "state": grant.state, "code_verifier": grant.code_verifier}
    q.update(override)
    q = {k: v for k, v in q.items() if v is not None}
    return f"http://127.0.0.1:{p.port}/_oauth_callback?" + urllib.parse.urlencode(q)


def get(url, headers=None):
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=15) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def test_relay_forwards_the_apps_callback_with_a_relay_code_the_app_redeems_once(proxy_factory, tmp_path, idp, app):
    p = start_proxy(proxy_factory, tmp_path, idp, app)
    grant = idp.get_code(IOS)
    status, headers, body = get(callback_url(p, grant), headers={"Cookie": "app_session=before"})
    assert status == 200, body
    page = json.loads(body)
    assert page["redeemed"] == 200, page
    assert page["state"] == grant.state
    assert page["token"]["access_token"] and page["token"]["id_token"]
    # The app's response (its cookie) reached the WebView; the callback response is not cached.
    assert headers.get("Set-Cookie") == "app_session=signed-in; HttpOnly"
    assert headers.get("Cache-Control") == "no-store"
    assert headers.get("Referrer-Policy") == "no-referrer"
    forwarded = [s for s in app.seen if s["path"] == CALLBACK][-1]
    relay_code = forwarded["query"]["code"]
    assert relay_code.startswith("cpr1.") and relay_code != grant.code
    assert forwarded["cookie"] == "app_session=before", "the WebView's cookies must reach the app"
    assert forwarded["host"] == f"127.0.0.1:{p.port}", "the public Host must be preserved"
    assert relay_code.encode() not in body, "the relay code must never reach the browser"
    # Single use: the same relay code a second time is refused, locally.
    again_status, again = app.redeem(relay_code)
    assert (again_status, again) == (400, {"error": "invalid_grant"})
    # Nothing secret in any log line.
    logs = p.stdout_text() + p.stderr_text()
    for secret in (grant.code, grant.code_verifier, grant.state, relay_code, page["token"]["access_token"],
                   page["token"]["id_token"], WEB_SECRET):
        assert secret not in logs


@pytest.mark.parametrize("handoff", ["relay", "params"])
def test_over_http3_the_apps_callback_is_forwarded_as_over_http11(proxy_factory, tmp_path, idp, app, handoff, cert):
    """relay and params hand-offs over HTTP/3: the app gets the same forwarded callback, the
    WebView the app's own answer (its cookie), and the relay code never reaches the client."""
    from h3client import H3
    crt, key = cert
    p = start_proxy(proxy_factory, tmp_path, idp, app, handoff=handoff, extra=["--tls-cert", crt, "--tls-key", key],
                    env={"CALLBACK_PROXY_HTTP3__ENABLED": "true"})
    grant = idp.get_code(IOS)
    target = callback_url(p, grant).split(f":{p.port}", 1)[1]
    with H3(p.port, ca=crt) as c:
        r = c.request("GET", target, [("cookie", "app_session=before")])
    assert r.status == 200, r.body[-300:]
    page = json.loads(r.body)
    forwarded = [s for s in app.seen if s["path"] == CALLBACK][-1]
    assert forwarded["cookie"] == "app_session=before"
    assert forwarded["host"] == f"localhost:{p.port}"
    assert r.header("cache-control") == "no-store"
    if handoff == "relay":
        assert page["redeemed"] == 200 and page["state"] == grant.state
        assert r.header("set-cookie") == "app_session=signed-in; HttpOnly"
        relay_code = forwarded["query"]["code"]
        assert relay_code.startswith("cpr1.") and relay_code.encode() not in r.body
    else:
        assert "params" in page
    assert [l["protocol"] for l in p.access_log() if l.get("path") == "/_oauth_callback"] == ["h3"]


@pytest.mark.parametrize("handoff", ["relay", "params"])
def test_the_forwarded_app_callback_carries_no_underscore_spelling_of_a_forwarding_header(proxy_factory, tmp_path, idp,
                                                                                          app, handoff):
    from helpers import HTTPConn
    from test_proxying import UNDERSCORE_SPOOFS, spoofed
    p = start_proxy(proxy_factory, tmp_path, idp, app, handoff=handoff)
    grant = idp.get_code(IOS)
    target = callback_url(p, grant).split(f":{p.port}", 1)[1]
    with HTTPConn(p.port) as c:
        c.request("GET", target, headers=UNDERSCORE_SPOOFS + [("My_Header", "x")])
        r = c.read_response()
    assert r.status == 200, r
    forwarded = [s for s in app.seen if s["path"] == CALLBACK][-1]
    assert "redeemed" in r.json() or "params" in r.json()
    assert spoofed({"headers": forwarded["headers"]}) == []
    assert [v for k, v in forwarded["headers"] if k.lower() == "x-forwarded-for"] == ["127.0.0.1"]


def test_relay_code_needs_the_apps_credentials(proxy_factory, tmp_path, idp, app):
    p = start_proxy(proxy_factory, tmp_path, idp, app)
    # Make the app present a wrong secret: the relay endpoint refuses and the code stays unusable to it.
    real_redeem = app.redeem
    app.redeem = lambda code: real_redeem(code, secret="wrong")
    status, _, body = get(callback_url(p, idp.get_code(IOS)))
    assert json.loads(body)["redeemed"] == 401


# A second provider entry for the same Google project (same web client, same token endpoint):
# legitimate, and dictionary order used to decide which provider a relay code was checked against.
SHARED_CLIENT_PROVIDER = """
  workspace:
    kind: google
    handoff: relay
    app_callback: /users/auth/workspace/callback
    app_client: {{ id: {web}, secret_env: WEB_SECRET }}
    endpoints: {{ token: {base}/token, jwks: {base}/jwks, issuer: {base} }}
    native:
      ios: {{ client_id: 456-ios.apps.googleusercontent.com }}
"""


def test_two_providers_sharing_an_app_client_id_redeem_their_own_codes_on_every_start(proxy_factory, tmp_path, idp,
                                                                                      app):
    """Before, the endpoint checked a relay code against whichever provider came first in a
    per-process dictionary order: about half the starts refused every redemption."""
    extra = SHARED_CLIENT_PROVIDER.format(web=WEB, base=idp.base_url)
    for start in range(20):
        p = start_proxy(proxy_factory, tmp_path, idp, app, extra_provider=extra)
        status, _, body = get(callback_url(p, idp.get_code(IOS)))
        assert status == 200 and json.loads(body)["redeemed"] == 200, (start, body)
        p.signal()
        assert p.wait_exit(5) == 0


def test_a_wrong_secret_leaves_the_relay_code_redeemable_with_the_right_one(proxy_factory, tmp_path, idp, app):
    p = start_proxy(proxy_factory, tmp_path, idp, app)
    real_redeem = app.redeem
    attempts = []

    def wrong_then_right(code):
        attempts.append(real_redeem(code, secret="wrong"))
        attempts.append(real_redeem(code, client_id="someone-else"))
        return real_redeem(code)
    app.redeem = wrong_then_right
    status, _, body = get(callback_url(p, idp.get_code(IOS)))
    assert [a[0] for a in attempts] == [401, 401], attempts
    assert [a[1]["error"] for a in attempts] == ["invalid_client", "invalid_client"]
    page = json.loads(body)
    assert page["redeemed"] == 200 and page["token"]["access_token"], page


def test_another_providers_client_cannot_redeem_or_burn_a_relay_code(proxy_factory, tmp_path, idp, app):
    """A relay code is checked against the app client of the provider it was minted for; a
    second provider's own (valid) credentials neither redeem it nor use it up."""
    extra = f"""
  other:
    kind: google
    handoff: relay
    app_callback: /users/auth/other/callback
    app_client: {{ id: other-web-client, secret_env: OTHER_SECRET }}
    endpoints: {{ token: {idp.base_url}/token, jwks: {idp.base_url}/jwks, issuer: {idp.base_url} }}
    native:
      ios: {{ client_id: 789-ios.apps.googleusercontent.com }}
"""
    import os
    os.environ["OTHER_SECRET"] = "other-secret-" + "y" * 20
    p = start_proxy(proxy_factory, tmp_path, idp, app, extra_provider=extra)
    real_redeem = app.redeem
    attempts = []

    def other_then_own(code):
        attempts.append(real_redeem(code, client_id="other-web-client", secret=os.environ["OTHER_SECRET"]))
        return real_redeem(code)
    app.redeem = other_then_own
    status, _, body = get(callback_url(p, idp.get_code(IOS)))
    assert attempts == [(401, {"error": "invalid_client"})], attempts
    assert json.loads(body)["redeemed"] == 200, body


@pytest.mark.parametrize("case, content_type, body, status, error, reason", [
    ("not a form", "application/json", b'{"code":"x"}', 400, "invalid_request", "body is not a form"),
    ("repeated", "application/x-www-form-urlencoded", b"code=a&code=b", 400, "invalid_request", "repeated parameter"),
    ("unknown client", "application/x-www-form-urlencoded", b"code=cpr1.x&client_id=nobody&client_secret=s", 401,
     "invalid_client", "unknown client"),
    ("bad grant", "application/x-www-form-urlencoded",
     f"grant_type=password&code=cpr1.x&client_id={WEB}&client_secret={WEB_SECRET}".encode(), 400,
     "unsupported_grant_type", "grant_type is not authorization_code"),
])
def test_every_refused_token_request_is_logged_under_its_request_id(proxy_factory, tmp_path, idp, app,
                                                                     case, content_type, body, status, error, reason):
    p = start_proxy(proxy_factory, tmp_path, idp, app)
    rid = f"app-token-request-{case.replace(' ', '-')}"
    req = urllib.request.Request(app.token_url, data=body, headers={"Content-Type": content_type, "X-Request-Id": rid})
    try:
        urllib.request.urlopen(req, timeout=5)
        raise AssertionError("accepted")
    except urllib.error.HTTPError as e:
        assert (e.code, json.loads(e.read())["error"]) == (status, error)
    deadline = time.monotonic() + 3
    lines = []
    while time.monotonic() < deadline and not lines:
        lines = [json.loads(l) for l in p.stderr_text().splitlines() if f'"{rid}"' in l]
        time.sleep(0.05)
    assert len(lines) == 1, p.stderr_text()[-2000:]
    assert lines[0]["msg"] == "relay token request refused"
    assert lines[0]["reason"] == reason and lines[0]["status"] == str(status)
    assert "cpr1.x" not in json.dumps(lines[0]) and WEB_SECRET not in json.dumps(lines[0])


def test_client_secret_basic_is_accepted(proxy_factory, tmp_path, idp, app):
    p = start_proxy(proxy_factory, tmp_path, idp, app)
    app.auth = "basic"
    status, _, body = get(callback_url(p, idp.get_code(IOS)))
    assert json.loads(body)["redeemed"] == 200


def test_an_ordinary_web_code_passes_through_to_the_idp(proxy_factory, tmp_path, idp, app):
    """The app's own web sign-in keeps working with the token URL pointed at the proxy."""
    p = start_proxy(proxy_factory, tmp_path, idp, app)
    grant = idp.get_code(WEB, redirect_uri="http://127.0.0.1" + CALLBACK)
    status, token = app.redeem(grant.code, verifier=grant.code_verifier)
    assert status == 200, token
    assert token["access_token"] and token["token_type"].lower() == "bearer"
    # And the IdP's refusal comes back verbatim too.
    status, token = app.redeem(grant.code, verifier=grant.code_verifier)
    assert status == 400 and token["error"] == "invalid_grant"


def test_wrapper_error_lands_in_the_apps_failure_path(proxy_factory, tmp_path, idp, app):
    p = start_proxy(proxy_factory, tmp_path, idp, app)
    url = f"http://127.0.0.1:{p.port}/_oauth_callback?" + urllib.parse.urlencode(
        {"provider": "google", "platform": "ios", "client_id": IOS, "redirect_uri": IOS_REDIRECT,
         "state": "s-123", "error": "access_denied"})
    status, _, body = get(url)
    assert status == 200
    assert json.loads(body) == {"failure": "access_denied", "state": "s-123"}


def test_idp_refusal_lands_in_the_apps_failure_path(proxy_factory, tmp_path, idp, app):
    p = start_proxy(proxy_factory, tmp_path, idp, app)
    grant = idp.get_code(IOS)
    status, _, body = get(callback_url(p, grant, code_verifier="w" * 43))
    assert status == 200
    assert json.loads(body) == {"failure": "exchange_failed", "state": grant.state}


@pytest.mark.parametrize("handoff", ["relay", "params"])
def test_a_replayed_callback_lands_in_the_apps_failure_path(proxy_factory, tmp_path, idp, app, handoff):
    """The same callback loaded twice: the replay guard refuses the code before the IdP, and the
    app's callback gets `error=replayed_code&state=` (docs/handoff.md: the WebView lands on the
    app's page, whose own state check answers it)."""
    p = start_proxy(proxy_factory, tmp_path, idp, app, handoff=handoff)
    grant = idp.get_code(IOS)
    first_status, _, _ = get(callback_url(p, grant))
    assert first_status == 200
    exchanges = idp.request("GET", "/_test/stats").json()["token"]["requests"]
    status, headers, body = get(callback_url(p, grant))
    assert status == 200, body
    assert json.loads(body) == {"failure": "replayed_code", "state": grant.state}
    assert headers.get("Cache-Control") == "no-store"
    assert idp.request("GET", "/_test/stats").json()["token"]["requests"] == exchanges, "the replay reached the IdP"


def test_contract_violations_get_the_proxys_own_page_not_the_app(proxy_factory, tmp_path, idp, app):
    p = start_proxy(proxy_factory, tmp_path, idp, app)
    grant = idp.get_code(IOS)
    status, headers, body = get(callback_url(p, grant, client_id="someone-else.apps.googleusercontent.com"))
    assert status == 400 and b"Sign-in failed" in body
    assert not [s for s in app.seen if s["path"] == CALLBACK]


def test_params_mode_forwards_the_tokens(proxy_factory, tmp_path, idp, app):
    p = start_proxy(proxy_factory, tmp_path, idp, app, handoff="params")
    grant = idp.get_code(IOS)
    status, _, body = get(callback_url(p, grant))
    assert status == 200
    page = json.loads(body)
    assert page["params"] == ["access_token", "expires_in", "id_token", "state", "token_type"]
    assert page["state"] == grant.state


def test_metrics_count_callbacks_relay_codes_and_idp_calls(proxy_factory, tmp_path, idp, app):
    from test_observability import samples, scrape, value
    p = start_proxy(proxy_factory, tmp_path, idp, app)
    # one sign-in that succeeds and whose relay code the app redeems
    status, _, body = get(callback_url(p, idp.get_code(IOS)))
    assert json.loads(body)["redeemed"] == 200
    # a foreign client (refused before any IdP call), an unconfigured provider and platform
    # (counted as "unknown": requests cannot mint label values), the wrapper's error=
    get(callback_url(p, idp.get_code(IOS), client_id="someone-else.apps.googleusercontent.com"))
    get(callback_url(p, idp.get_code(IOS), provider="made-up-provider"))
    get(callback_url(p, idp.get_code(IOS), platform="made-up-platform"))
    get(f"http://127.0.0.1:{p.port}/_oauth_callback?" + urllib.parse.urlencode(
        {"provider": "google", "platform": "ios", "client_id": IOS, "redirect_uri": IOS_REDIRECT,
         "state": "s-1", "error": "access_denied"}))
    s = samples(scrape(p))
    cb = "callback_proxy_callbacks_total"
    assert value(s, cb, provider="google", platform="ios", outcome="success") == 1
    assert value(s, cb, provider="google", platform="ios", outcome="refused") == 1
    assert value(s, cb, provider="unknown", platform="unknown", outcome="refused") == 1
    assert value(s, cb, provider="google", platform="unknown", outcome="refused") == 1
    assert value(s, cb, provider="google", platform="ios", outcome="denied") == 1
    assert not [k for k in s if k[0] == cb and ("provider", "made-up-provider") in k[1]]
    assert value(s, "callback_proxy_relay_codes_minted_total", provider="google") == 1
    assert value(s, "callback_proxy_relay_codes_redeemed_total", provider="google") == 1
    # exactly one token exchange reached the IdP (the refusals were decided locally)
    assert value(s, "callback_proxy_idp_request_seconds_count", provider="google", call="token") == 1
    assert value(s, "callback_proxy_idp_request_seconds_count", provider="google", call="jwks") >= 1
    # the callback requests are their own route, apart from proxied traffic; the error= one
    # was forwarded into the app's failure path and still counts as a callback
    assert value(s, "callback_proxy_requests_total", route="callback", code_class="2xx") == 2
    assert value(s, "callback_proxy_requests_total", route="callback", code_class="4xx") == 3
    assert value(s, "callback_proxy_requests_total", route="proxied", code_class="2xx") == 0
    assert value(s, "callback_proxy_store_errors_total", store="memory") == 0


@pytest.mark.parametrize("ttl", ["1s", "2s"])
def test_a_relay_code_never_redeemed_is_counted_and_named_as_a_likely_misconfiguration(proxy_factory, tmp_path, idp, app,
                                                                                       ttl):
    """The classic mistake: the app's token URL still points at the IdP, so the relay code it
    receives is never redeemed here. The operator sees a warning and a counter — also at the
    shortest TTL allowed, where a check one second before expiry would come after it."""
    from test_observability import samples, scrape, value
    p = start_proxy(proxy_factory, tmp_path, idp, app, relay_ttl=ttl)
    app.redeem = lambda code: (0, None)  # the app never calls the relay endpoint
    status, _, body = get(callback_url(p, idp.get_code(IOS)))
    assert status == 200
    deadline = time.monotonic() + 5
    while value(samples(scrape(p)), "callback_proxy_relay_codes_expired_total", provider="google") != 1:
        assert time.monotonic() < deadline, "the unredeemed relay code was not counted"
        time.sleep(0.1)
    assert "is the app's token URL pointed at the proxy" in p.stderr_text()


def test_an_app_that_calls_the_relay_endpoint_but_refuses_the_callback_is_told_apart(proxy_factory, tmp_path, idp, app):
    """The app's token URL is right (it redeems other codes there), but it refused this callback
    before redeeming — its own state check. The warning says so, not 'point the token URL'."""
    p = start_proxy(proxy_factory, tmp_path, idp, app, relay_ttl="2s")
    real_redeem = app.redeem
    app.redeem = lambda code: real_redeem("cpr1.not-this-one")  # e.g. another user's stale code
    status, _, body = get(callback_url(p, idp.get_code(IOS)))
    assert status == 200
    deadline = time.monotonic() + 5
    while "relay code was never redeemed" not in p.stderr_text():
        assert time.monotonic() < deadline, "no warning"
        time.sleep(0.1)
    line = [json.loads(l) for l in p.stderr_text().splitlines() if "relay code was never redeemed" in l][0]
    assert "though the app called the relay endpoint" in line["msg"], line
    assert "token URL pointed" not in line["msg"]
    assert line["app_status"] == "200" and len(line["request_id"]) == 32, line


def test_a_reload_keeps_the_memory_store_relay_codes_in_flight_stay_redeemable(proxy_factory, tmp_path, idp, app):
    """A relay code minted just before a SIGHUP is redeemed just after it: the in-memory store
    (relay codes, replay guards, sessions) outlives a configuration reload."""
    import signal
    p = start_proxy(proxy_factory, tmp_path, idp, app)
    captured = []
    app.redeem = lambda code: (captured.append(code), (0, None))[1]
    status, _, _ = get(callback_url(p, idp.get_code(IOS)))
    assert status == 200 and len(captured) == 1
    config = tmp_path / "proxy.yaml"
    config.write_text(config.read_text().replace("idp_timeout: 5s", "idp_timeout: 6s"))
    p.signal(signal.SIGHUP)
    p.stopped_on_purpose = False
    deadline = time.monotonic() + 5
    while "configuration reloaded" not in p.stderr_text():
        assert time.monotonic() < deadline, p.stderr_text()[-2000:]
        time.sleep(0.02)
    del app.redeem  # the real one again
    status, token = app.redeem(captured[0])
    assert status == 200 and token["access_token"], token


def test_a_real_prometheus_raises_the_relay_alert_when_nothing_is_ever_redeemed(proxy_factory, tmp_path, idp, app):
    """The case the alert exists for, live: the app's token URL is wrong, so no code is ever
    redeemed. The redeemed series is there (at 0) before anything happens, and the rule
    (deploy/prometheus) holds "expired, none redeemed" from it."""
    from test_prometheus import Prometheus
    p = start_proxy(proxy_factory, tmp_path, idp, app, relay_ttl="1s")
    app.redeem = lambda code: (0, None)  # the app never calls the relay endpoint
    prom = Prometheus(tmp_path, [f"127.0.0.1:{p.internal_port}"])
    try:
        prom.wait(lambda: list(prom.query('callback_proxy_relay_codes_redeemed_total{provider="google"}').values()) == [0.0],
                  "the redeemed counter scraped at 0 before any sign-in")
        status, _, _ = get(callback_url(p, idp.get_code(IOS)))
        assert status == 200

        def relay_alert():
            return [a for a in prom.alerts() if a["labels"]["alertname"] == "CallbackProxyRelayCodesNotRedeemed"]
        prom.wait(relay_alert, "the relay alert")
        (alert,) = relay_alert()
        # `for: 5m`: pending now, a page if it lasts
        assert alert["state"] == "pending" and alert["labels"]["provider"] == "google", alert
        assert alert["labels"]["severity"] == "page" and alert["labels"]["instance"] == f"127.0.0.1:{p.internal_port}"
    finally:
        prom.stop()
