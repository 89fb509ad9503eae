"""One sign-in across sub-domains (oauth.session.cookie_domain, oauth2-proxy's --cookie-domain with
--whitelist-domain): the session and state cookies carry Domain=, a sign-in started on one host
returns to it even when the callback answers on another, and rd stays closed to every host outside
allowed_redirect_hosts. Hosts are told apart by the Host header; the proxy listens on loopback."""
import os
import subprocess
import urllib.parse

import pytest

from helpers import HTTPConn
from test_session import (IOS, WEB, idp, idp_login, idp_with_clients, session_config, set_cookies,  # noqa: F401
                          state_cookies)

DOMAIN_SECRET = "web-secret-of-the-domain-tests"
CALLBACK = "https://auth.example.test/_oauth/web_callback"
HOSTS = 'cookie_domain: .example.test, allowed_redirect_hosts: ["http://.example.test:*"]'
JSON = [("Accept", "application/json")]


def get_on(p, host, target, cookies=None, headers=()):
    h = list(headers)
    if cookies:
        h.append(("Cookie", "; ".join(f"{k}={v}" for k, v in cookies.items())))
    with HTTPConn(p.port) as c:
        c.request("GET", target, headers=h, host=host)
        return c.read_response()


def attributes(r, prefix):
    """The Set-Cookie attributes (lower-cased names) of the first cookie named `prefix…`."""
    for k, v in r.headers:
        if k.lower() == "set-cookie" and v.startswith(prefix):
            return {a.split("=", 1)[0].strip().lower(): a.split("=", 1)[-1].strip() for a in v.split(";")[1:]}
    return None


def session_cookie(r):
    return {k: v for k, v in set_cookies(r).items() if k.startswith("_oauth_session") and v}


@pytest.fixture(scope="module")
def domain_idp(tmp_path_factory):
    """A test IdP whose web client is registered for the callback on auth.example.test."""
    with idp_with_clients(tmp_path_factory, "domain-idp", [
        {"client_id": WEB, "type": "web", "client_secret": DOMAIN_SECRET, "require_pkce": True,
         "token_endpoint_auth_method": ["client_secret_post"], "redirect_uris": [CALLBACK]}]) as srv:
        yield srv


@pytest.fixture
def shared(proxy_factory, upstream, tmp_path, idp):
    """Native sign-in (the `idp` fixture's iOS client) with the cookie domain."""
    config = tmp_path / "domain.yaml"
    config.write_text(session_config(idp, rules=f"protect: [/private], {HOSTS}"))
    return proxy_factory(upstream, extra=["--config", str(config)])


def native_sign_in(p, idp, start_host, rd, callback_host):
    start = get_on(p, start_host, "/_oauth/start?" + urllib.parse.urlencode({"rd": rd}))
    assert start.status == 302, start
    assert attributes(start, "_oauth_state_")["domain"] == "example.test"
    q = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(start.one("location")).query))
    grant = idp.get_code(IOS, state=q["state"], nonce=q["nonce"])
    callback = "/_oauth_callback?" + urllib.parse.urlencode({
        "provider": "google", "platform": "ios", "client_id": IOS, "redirect_uri": grant.redirect_uri,
        "code": grant.code, "state": grant.state, "code_verifier": grant.code_verifier})
    return get_on(p, callback_host, callback, cookies=state_cookies(set_cookies(start)))


def test_a_native_sign_in_on_one_host_is_a_session_on_every_host_under_the_domain(shared, idp):
    # Started on app1, the callback loaded on auth: the state cookie was shared through the domain.
    r = native_sign_in(shared, idp, "app1.example.test", "/private/page", "auth.example.test")
    assert r.status == 302 and r.one("location") == "http://app1.example.test/private/page", r
    s = session_cookie(r)
    assert s and attributes(r, "_oauth_session")["domain"] == "example.test"
    for host in ("app1.example.test", "app2.example.test", "example.test"):
        assert get_on(shared, host, "/private/x", cookies=s, headers=JSON).status == 404, host
    # Forward-auth asked from any host of the domain sees the same session.
    auth = get_on(shared, "auth.example.test", "/_oauth/auth", cookies=s)
    assert auth.status == 202 and auth.one("x-auth-request-email") == "alice@example.test"
    # Sign-out clears the cookie for the whole domain.
    out = get_on(shared, "app2.example.test", "/_oauth/sign_out?rd=/", cookies=s)
    assert out.status == 302 and attributes(out, "_oauth_session")["domain"] == "example.test"


@pytest.mark.parametrize("rd, expected", [
    ("http://app2.example.test/x?y=1", "http://app2.example.test/x?y=1"),
    ("http://example.test:8080/", "http://example.test:8080/"),
    ("/account", "http://app1.example.test/account"),
    ("http://evil.test/", "http://app1.example.test/"),
    ("http://example.test.evil.test/", "http://app1.example.test/"),
    ("http://evilexample.test/", "http://app1.example.test/"),
    ("//evil.test/", "http://app1.example.test/"),
    ("/http://evil.test/", "http://app1.example.test/"),
    ("http://app2.example.test@evil.test/", "http://app1.example.test/"),
])
def test_rd_goes_to_hosts_under_the_domain_and_nowhere_else(shared, idp, rd, expected):
    r = native_sign_in(shared, idp, "app1.example.test", rd, "app1.example.test")
    assert r.status == 302 and r.one("location") == expected, r


def test_a_sign_in_started_on_a_host_outside_the_list_keeps_its_path(shared, idp):
    r = native_sign_in(shared, idp, "other.test", "/private/page", "other.test")
    assert r.status == 302 and r.one("location") == "/private/page", r


def test_a_browser_sign_in_comes_back_through_the_callback_host_to_where_it_started(proxy_factory, upstream,
                                                                                   tmp_path, domain_idp):
    config = tmp_path / "domain-web.yaml"
    config.write_text(session_config(domain_idp, rules=f'protect: [/private], {HOSTS}, web_redirect_uri: "{CALLBACK}"'))
    os.environ["WEB_SECRET"] = DOMAIN_SECRET  # after session_config, which sets the other IdPs' secret
    p = proxy_factory(upstream, extra=["--config", str(config)])
    start = get_on(p, "app1.example.test", "/_oauth/start?rd=%2Fprivate%2Forders")
    assert start.status == 302, start
    q = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(start.one("location")).query))
    assert q["redirect_uri"] == CALLBACK
    back = idp_login(domain_idp, start.one("location"))
    assert back.startswith(CALLBACK + "?"), back
    r = get_on(p, "auth.example.test", "/_oauth/web_callback?" + urllib.parse.urlsplit(back).query,
               cookies=state_cookies(set_cookies(start)))
    assert r.status == 302 and r.one("location") == "http://app1.example.test/private/orders", r
    s = session_cookie(r)
    assert attributes(r, "_oauth_session")["domain"] == "example.test"
    assert get_on(p, "app1.example.test", "/private/orders", cookies=s, headers=JSON).status == 404


@pytest.mark.parametrize("rules, setting, message", [
    (f'{HOSTS}, web_redirect_uri: "https://auth.example.org/_oauth/web_callback"',
     "oauth.session.cookie_domain", "'example.test' does not cover web_redirect_uri's host 'auth.example.org'"),
    ('cookie_domain: example.test, allowed_redirect_hosts: [.example.test, app.example.org]',
     "oauth.session.allowed_redirect_hosts", "'app.example.org' is not under cookie_domain 'example.test'"),
    ('cookie_domain: test', "oauth.session.cookie_domain", "'test' is not a domain with at least two labels"),
])
def test_check_refuses_hosts_outside_the_cookie_domain(proxy_bin, tmp_path, idp, rules, setting, message):
    config = tmp_path / "check.yaml"
    config.write_text(session_config(idp, rules=f"protect: [/private], {rules}"))
    out = subprocess.run([proxy_bin, "check", "--config", str(config), "--upstream", "http://127.0.0.1:3000"],
                         capture_output=True, text=True, timeout=10)
    problem = next(l for l in out.stdout.splitlines() if message in l)
    assert out.returncode == 1 and f": {setting} (line " in problem, out


def test_secure_cookies_shared_with_a_domain_are_secure_prefixed_never_host_prefixed(proxy_factory, upstream, tmp_path,
                                                                                     idp):
    # A browser drops a __Host- cookie that carries Domain: shared, the prefix is __Secure-.
    config = tmp_path / "secure.yaml"
    config.write_text(session_config(idp, rules="protect: [/private], cookie_domain: example.test, "
                                                "allowed_redirect_hosts: [.example.test]").replace("secure: false, ", ""))
    p = proxy_factory(upstream, extra=["--config", str(config)])
    start = get_on(p, "app1.example.test", "/_oauth/start?rd=%2F")
    names = [v.split("=", 1)[0] for k, v in start.headers if k.lower() == "set-cookie"]
    assert len(names) == 1 and names[0].startswith("__Secure-_oauth_state_"), names
    a = attributes(start, "__Secure-_oauth_state_")
    assert a["domain"] == "example.test" and "secure" in a and a["path"] == "/"
