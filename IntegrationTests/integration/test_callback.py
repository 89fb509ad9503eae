"""`/_oauth_callback` end to end: the proxy binary in front of the loopback upstream, configured for
the strict test IdP (IntegrationTests/idp) both as a `google` provider (endpoints from the IdP's discovery
document) and as a generic `oidc` provider (discovery at run time). Codes are real: the IdP's
authorize + login step is driven over HTTPS exactly as the wrapper's system browser would.

Every outcome is checked on three sides: the page the WebView gets (status, text, headers), the
proxy's own log line (`reason`, `source`, `detail`), and the IdP's /_test/stats (whether — and how
often — the token endpoint was called). A refusal that claims to happen "before any IdP call" is
proved by redeeming the same, still-live code through the proxy afterwards.

The last two tests need the proxy's JWKS cache to be older than its unknown-`kid` refetch interval
(10 s, `JWKSCache.Policy`); the proxies they use are started by a module fixture when the module
begins, so the wait overlaps the rest of the suite.
"""

import re
import subprocess
import threading
import time

import pytest

from callback_fixtures import *  # noqa: F401,F403  (idp, idp_server, idp_pki, idp_factory fixtures)
from callback_fixtures import (ANDROID, ANDROID_REDIRECT, CALLBACK, GOOGLE, IOS, IOS_REDIRECT, NATIVE,
                               OIDC, PAGE_HEADERS, PROVIDERS, WEB, TokenTap, callback_fields,
                               callback_target, client_stats, last_callback_log, log_lines,
                               make_test_pki, page_text, pkce_pair, send, wait_callback_logs,
                               write_config)
from helpers import Proxy, Upstream
from test_http2 import cert  # noqa: F401 (the TLS fixture, shared)

JWKS_REFETCH_INTERVAL = 10      # JWKSCache.Policy.unknownKeyRefetchInterval (seconds)

VERIFIED = "sign-in was verified"
NOT_VALID = "This sign-in link is not valid"
NOT_SET_UP = "This app is not set up to sign in here"
CANCELLED = "Sign-in was cancelled or not allowed"
DID_NOT_COMPLETE = "Sign-in did not complete"
ALREADY_USED = "This sign-in link was already used"
NOT_COMPLETED = "Sign-in could not be completed"
UNAVAILABLE = "The sign-in service is not available right now"
NOT_VERIFIED = "Your sign-in could not be verified"
TRY_AGAIN = "Sign-in is temporarily unavailable"


# -------------------------------------------------------------------------------------------------
# Fixtures and assertions


@pytest.fixture
def oauth_proxy_factory(proxy_factory, upstream, idp, tmp_path):
    """Starts a proxy with a --config for the module's IdP (or another one). Stats are zeroed
    once it is ready and its start-up provider probes have answered, so neither the discovery
    fetch made to write the file nor the probes are counted: the tests count the callback's calls."""
    count = [0]

    def start(target_idp=None, opts=None, extra=(), env=None, **config_kw):
        target_idp = target_idp or idp
        count[0] += 1
        path = write_config(tmp_path / f"callback-proxy-{count[0]}.yaml", target_idp, **config_kw)
        p = proxy_factory(upstream, opts=opts, extra=["--config", path, *extra], env=env)
        p.config_path = path
        p.wait_providers_probed(config_kw.get("providers", PROVIDERS))
        target_idp.reset_stats()
        return p

    return start


@pytest.fixture
def oauth_proxy(oauth_proxy_factory):
    return oauth_proxy_factory()


def assert_page_headers(resp):
    for name, value in PAGE_HEADERS.items():
        assert resp.one(name) == value, f"{name}: {resp.one(name)!r} on a {resp.status} page"


def assert_outcome(proxy, resp, status, reason, page, *, n=1, source=None, detail=None):
    """The page (status, text, headers) and the n-th callback log line of `proxy`. `detail` is a
    regular expression searched in the log line's detail. Returns the log line."""
    text = page_text(resp)
    assert resp.status == status, f"expected {status} ({reason}), got {resp.status}: {text[-300:]}"
    assert page in text, text
    assert_page_headers(resp)
    line = last_callback_log(proxy, n)
    if reason == "verified":
        assert line["msg"] == "callback verified", line
        return line
    assert line["msg"] == "callback failed", line
    assert line["reason"] == reason, line
    if source is not None:
        assert line["source"] == source, line
    if detail is not None:
        assert re.search(detail, line["detail"]), line
    return line


def token_totals(idp):
    t = idp.stats()["token"]
    return t["requests"], t["successes"], t["failures"], t["forced"]


def assert_redeemable(proxy, idp, grant, *, n, provider=GOOGLE, platform="ios"):
    """The grant's code is still live: neither spent at the IdP nor in the proxy's replay guard.
    The correct callback succeeds and is the IdP's first token request of the test."""
    before = idp.stats()["token"]["requests"]
    assert before == 0, f"the IdP saw {before} token request(s) before the correct callback"
    r = send(proxy, callback_target(grant, provider=provider, platform=platform))
    assert_outcome(proxy, r, 200, "verified", VERIFIED, n=n)
    assert token_totals(idp) == (1, 1, 0, 0)


def grant_for(idp, platform="ios", **kw):
    return idp.get_code(NATIVE[platform][0], **kw)


# -------------------------------------------------------------------------------------------------
# Aged proxies for the key-rotation tests (see the module docstring)


class Aged:
    pass


@pytest.fixture(scope="module", autouse=True)
def aged_proxies(idp_server, proxy_bin, tmp_path_factory):
    """Two proxies that verified one sign-in (and so fetched the JWKS) when the module started:
    `rotating` for the rotation test, `unknown` for the unknown-kid refetch test. Problems are
    recorded, not raised, so they fail only the tests that use these proxies."""
    aged = Aged()
    aged.upstream, aged.proxies, aged.setup_problems = None, {}, []
    try:
        idp_server.reset()
        d = tmp_path_factory.mktemp("aged")
        aged.upstream = Upstream(str(d), name="aged-upstream")
        cfg = write_config(d / "aged.yaml", idp_server, providers=(GOOGLE,))
        for name in ("rotating", "unknown"):
            aged.proxies[name] = Proxy(proxy_bin, str(d), aged.upstream.url,
                                       extra=["--config", cfg], name=f"aged-{name}")
        for name, p in aged.proxies.items():
            r = send(p, callback_target(idp_server.get_code(IOS)))
            if r.status != 200:
                aged.setup_problems.append(f"{name}: first sign-in answered {r.status}: "
                                           f"{page_text(r)[-200:]} / {p.stderr_text()[-500:]}")
    except Exception as e:     # noqa: BLE001  (reported by the tests that need these proxies)
        aged.setup_problems.append(f"setting up the aged proxies failed: {e!r}")
    aged.fetched_at = time.time()       # every JWKS fetch happened before this
    yield aged
    for p in aged.proxies.values():
        p.kill()
    if aged.upstream is not None:
        aged.upstream.stop()


def wait_past_refetch_interval(aged):
    assert not aged.setup_problems, aged.setup_problems
    left = aged.fetched_at + JWKS_REFETCH_INTERVAL + 1.5 - time.time()
    if left > 0:
        time.sleep(left)


# -------------------------------------------------------------------------------------------------
# 0. The configuration used throughout is one `check` accepts


def test_generated_configuration_passes_check(oauth_proxy, proxy_bin):
    out = subprocess.run([proxy_bin, "check", "--config", oauth_proxy.config_path,
                          "--upstream", "http://127.0.0.1:9"], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "2 provider(s)" in out.stdout, out.stdout


# -------------------------------------------------------------------------------------------------
# 1. Successful sign-ins


@pytest.mark.parametrize("platform", ["ios", "android"])
@pytest.mark.parametrize("provider", PROVIDERS)
def test_native_sign_in_is_verified(oauth_proxy, idp, upstream, provider, platform):
    client_id, _ = NATIVE[platform]
    grant = grant_for(idp, platform)
    r = send(oauth_proxy, callback_target(grant, provider=provider, platform=platform))
    line = assert_outcome(oauth_proxy, r, 200, "verified", f"Your {provider} {VERIFIED}")
    assert (line["provider"], line["platform"]) == (provider, platform), line

    stats = idp.stats()
    assert token_totals(idp) == (1, 1, 0, 0), stats["token"]
    assert stats["clients"][client_id]["successes"] == 1, stats["clients"]
    event = stats["events"][-1]
    assert (event["client_id"], event["outcome"], event["status"]) == (client_id, "success", 200)
    assert stats["endpoints"]["jwks"] == 1
    assert stats["endpoints"]["discovery"] == (1 if provider == OIDC else 0)
    for secret in (grant.code, grant.state, grant.code_verifier):
        assert secret not in page_text(r)
    assert upstream.record.requests() == [], "the callback reached the upstream"


def test_native_sign_in_over_http2_runs_the_same_callback(oauth_proxy_factory, idp, upstream):
    """The callback is a deferred phase (the IdP is called off the loop): over HTTP/2 it runs on
    the stream exactly as on an HTTP/1.1 connection — verified once, a replay refused."""
    from h2client import RawH2
    proxy = oauth_proxy_factory(extra=["--http2-cleartext"])
    grant = grant_for(idp, "ios")
    target = callback_target(grant, provider=GOOGLE, platform="ios")
    with RawH2(proxy.port, tls=False) as c:
        c.request(1, path=target)
        r = c.response(1, timeout=10)
        assert r.status == 200, (r.headers, bytes(r.body)[-300:])
        assert f"Your {GOOGLE} {VERIFIED}" in bytes(r.body).decode()
        c.request(3, path=target)
        r = c.response(3, timeout=10)
        assert r.status == 400 and ALREADY_USED in bytes(r.body).decode()
    assert token_totals(idp) == (1, 1, 0, 0)
    lines = wait_callback_logs(proxy, 2)
    assert [line["msg"] for line in lines] == ["callback verified", "callback failed"], lines
    assert lines[1]["reason"] == "replayed_code"
    assert upstream.record.requests() == []


@pytest.fixture
def oauth_proxy_h3(oauth_proxy_factory, cert):
    """The callback proxy on TLS with HTTP/3 on: `send` asks it over HTTP/3."""
    crt, key = cert
    p = oauth_proxy_factory(extra=["--tls-cert", crt, "--tls-key", key], env={"CALLBACK_PROXY_HTTP3__ENABLED": "true"})
    p.h3_ca = crt
    return p


def test_a_callback_in_early_data_gets_425_spends_nothing_and_succeeds_after_the_handshake(
        oauth_proxy_factory, cert, idp, upstream, tmp_path):
    """With http3.early_data on, a callback that rides in 0-RTT (which a recorder of the traffic
    could replay) is answered 425 Too Early before anything of the OAuth layer runs: no token
    request, the code unspent. The same callback sent after a handshake is then verified."""
    from test_http3 import returning_client
    crt, key = cert
    p = oauth_proxy_factory(extra=["--tls-cert", crt, "--tls-key", key],
                            env={"CALLBACK_PROXY_HTTP3__ENABLED": "true", "CALLBACK_PROXY_HTTP3__EARLY_DATA": "true"})
    p.h3_ca = crt
    early = returning_client(p, tmp_path)
    grant = grant_for(idp, "ios")
    target = callback_target(grant, provider=GOOGLE, platform="ios")
    early(target)
    line = p.wait_access_log(2)[-1]
    assert (line["path"], line["status"], line["protocol"]) == ("/_oauth_callback", 425, "h3"), line
    assert token_totals(idp) == (0, 0, 0, 0)
    after = send(p, target)  # aioquic, a new session: its request waits for the handshake
    assert_outcome(p, after, 200, "verified", VERIFIED, n=1)
    assert token_totals(idp) == (1, 1, 0, 0)
    assert [r["target"] for r in upstream.record.requests()] == ["/echo?warm"]


def test_native_sign_in_over_http3_runs_the_same_callback(oauth_proxy_h3, idp, upstream):
    """Over HTTP/3 the callback runs on the QUIC stream as on a TCP connection: verified once,
    the replay refused without a second token request, nothing reaches the app."""
    grant = grant_for(idp, "ios")
    target = callback_target(grant, provider=GOOGLE, platform="ios")
    first = send(oauth_proxy_h3, target)
    assert first.version == "HTTP/3"
    assert_outcome(oauth_proxy_h3, first, 200, "verified", VERIFIED, n=1)
    second = send(oauth_proxy_h3, target)
    assert_outcome(oauth_proxy_h3, second, 400, "replayed_code", ALREADY_USED, n=2, source="client")
    assert token_totals(idp) == (1, 1, 0, 0)
    assert upstream.record.requests() == []
    assert [l["protocol"] for l in oauth_proxy_h3.access_log() if l.get("path") == "/_oauth_callback"] == ["h3", "h3"]


# -------------------------------------------------------------------------------------------------
# 2. Refused before any IdP call (the code stays redeemable afterwards)


REFUSALS = {
    # id: (builder(grant) -> target, reason, page, regex searched in the log line's detail)
    "foreign-client-id-web": (lambda g: callback_target(g, override={"client_id": WEB}),
                              "client_mismatch", NOT_SET_UP, r"client_id .* not the one configured"),
    "android-client-id-on-ios": (lambda g: callback_target(g, override={"client_id": ANDROID}),
                                 "client_mismatch", NOT_SET_UP, r"client_id .* for google/ios"),
    "foreign-redirect-uri": (lambda g: callback_target(
        g, override={"redirect_uri": "com.evil.app:/oauth2redirect"}),
        "client_mismatch", NOT_SET_UP, r"redirect_uri .* not the one configured"),
    "android-redirect-on-ios": (lambda g: callback_target(
        g, override={"redirect_uri": ANDROID_REDIRECT}),
        "client_mismatch", NOT_SET_UP, r"redirect_uri .* for google/ios"),
    "redirect-uri-other-case": (lambda g: callback_target(
        g, override={"redirect_uri": IOS_REDIRECT.replace("123-ios", "123-IOS")}),
        "client_mismatch", NOT_SET_UP, r"redirect_uri"),
    "redirect-uri-trailing-slash": (lambda g: callback_target(
        g, override={"redirect_uri": IOS_REDIRECT + "/"}), "client_mismatch", NOT_SET_UP,
        r"redirect_uri"),
    "unknown-provider": (lambda g: callback_target(g, provider="facebook"),
                         "unknown_client", NOT_SET_UP, r"no provider named `facebook`"),
    "unknown-platform": (lambda g: callback_target(
        g, platform="windows", override={"client_id": IOS, "redirect_uri": IOS_REDIRECT}),
        "unknown_client", NOT_SET_UP, r"no native client for platform `windows`"),
    "missing-code-verifier": (lambda g: callback_target(g, drop=["code_verifier"]),
                              "invalid_request", NOT_VALID, r"`code_verifier` is missing"),
    **{f"missing-{name}": (lambda g, name=name: callback_target(g, drop=[name]),
                           "invalid_request", NOT_VALID, rf"`{name}` is missing")
       for name in ("provider", "platform", "client_id", "redirect_uri", "state")},
    "missing-code": (lambda g: callback_target(g, drop=["code"]), "invalid_request", NOT_VALID,
                     r"neither `code` nor `error`"),
    **{f"duplicated-{name}": (lambda g, name=name: callback_target(
        g, extra=[(name, dict(callback_fields(g))[name])]), "invalid_request", NOT_VALID,
        rf"duplicated parameter `{name}`")
       for name in ("provider", "client_id", "code", "state", "code_verifier")},
    "unknown-parameter-nonce": (lambda g: callback_target(g, extra=[("nonce", g.nonce)]),
                                "invalid_request", NOT_VALID, r"unknown parameter `nonce`"),
    "unknown-parameter-foo": (lambda g: callback_target(g, extra=[("foo", "bar")]),
                              "invalid_request", NOT_VALID, r"unknown parameter `foo`"),
    "empty-state": (lambda g: callback_target(g, override={"state": ""}), "invalid_request",
                    NOT_VALID, r"`state` is empty"),
    "oversized-code": (lambda g: callback_target(g, override={"code": g.code + "A" * 2048}),
                       "invalid_request", NOT_VALID, r"`code` exceeds 2048 bytes"),
    "oversized-state": (lambda g: callback_target(g, override={"state": "s" * 1025}),
                        "invalid_request", NOT_VALID, r"`state` exceeds 1024 bytes"),
    "short-code-verifier": (lambda g: callback_target(g, override={"code_verifier": "v" * 42}),
                            "invalid_request", NOT_VALID, r"`code_verifier` is shorter than 43"),
    "code-verifier-outside-charset": (lambda g: callback_target(
        g, override={"code_verifier": g.code_verifier[:-1] + "+"}), "invalid_request", NOT_VALID,
        r"`code_verifier` contains characters outside"),
    "bad-percent-encoding": (lambda g: callback_target(g).replace("state=", "state=%zz", 1),
                             "invalid_request", NOT_VALID, r"bad percent-encoding .*`state`"),
    "truncated-percent-escape": (lambda g: callback_target(g, drop=["state"]) + "&state=ab%4",
                                 "invalid_request", NOT_VALID, r"bad percent-encoding .*`state`"),
    "lone-percent": (lambda g: callback_target(g, drop=["state"]) + "&state=%",
                     "invalid_request", NOT_VALID, r"bad percent-encoding"),
    "invalid-utf8": (lambda g: callback_target(g).replace("state=", "state=%C3%28", 1),
                     "invalid_request", NOT_VALID, r"invalid UTF-8 .*`state`"),
    "control-character": (lambda g: callback_target(g).replace("state=", "state=a%0Ab", 1),
                          "invalid_request", NOT_VALID, r"control character .*`state`"),
    "empty-field": (lambda g: callback_target(g).replace("&", "&&", 1), "invalid_request",
                    NOT_VALID, r"empty field"),
    "error-access-denied": (lambda g: callback_target(
        g, drop=["code", "code_verifier"], extra=[("error", "access_denied")]),
        "access_denied", CANCELLED, r"error=access_denied"),
    "error-free-text": (lambda g: callback_target(
        g, drop=["code", "code_verifier"], extra=[("error", "The user closed the browser")]),
        "sign_in_failed", DID_NOT_COMPLETE, r"unrecognised error value"),
    # NativeSignIn's own word: named in the log, the app's callback gets sign_in_failed
    "error-state-mismatch": (lambda g: callback_target(
        g, drop=["code", "code_verifier"], extra=[("error", "state_mismatch")]),
        "sign_in_failed", DID_NOT_COMPLETE, r"error=state_mismatch \(the browser's redirect carried another state"),
    "error-and-code": (lambda g: callback_target(g, extra=[("error", "access_denied")]),
                       "invalid_request", NOT_VALID, r"`error` and `code` are both present"),
    "error-for-unknown-provider": (lambda g: callback_target(
        g, provider="facebook", drop=["code", "code_verifier"], extra=[("error", "access_denied")]),
        "unknown_client", NOT_SET_UP, r"no provider named `facebook`"),
}


@pytest.mark.parametrize("case", list(REFUSALS))
def test_refused_before_any_idp_call(oauth_proxy, idp, case):
    refused_before_any_idp_call(oauth_proxy, idp, case)


@pytest.mark.parametrize("case", list(REFUSALS))
def test_refused_before_any_idp_call_over_http3(oauth_proxy_h3, idp, case):
    """The same vectors, the same answers, over HTTP/3."""
    refused_before_any_idp_call(oauth_proxy_h3, idp, case)


def refused_before_any_idp_call(oauth_proxy, idp, case):
    build, reason, page, detail = REFUSALS[case]
    grant = grant_for(idp)
    r = send(oauth_proxy, build(grant))
    line = assert_outcome(oauth_proxy, r, 400, reason, page, source="client", detail=detail)
    for secret in (grant.code, grant.state, grant.code_verifier):
        assert secret not in page_text(r) and secret not in line["detail"], line
    assert idp.stats()["token"]["requests"] == 0, "the IdP was called for a refused callback"
    assert idp.stats()["endpoints"]["jwks"] == 0
    assert_redeemable(oauth_proxy, idp, grant, n=2)


def test_overlong_callback_url_is_refused_by_the_engine(oauth_proxy, idp):
    """A query longer than the request-line limit (8 KiB) never reaches the callback handler
    (whose own query limit is also 8 KiB): the engine answers 414, nothing is logged with the
    URL, and the code is not touched."""
    grant = grant_for(idp)
    r = send(oauth_proxy, callback_target(grant, override={"state": grant.state + "s" * 8200}))
    assert r.status == 414, r
    assert grant.code not in r.body.decode("latin-1")
    assert wait_callback_logs(oauth_proxy, 1, timeout=0.2) == []
    out = oauth_proxy.stdout_text() + oauth_proxy.stderr_text()
    assert grant.code not in out and grant.state not in out
    assert_redeemable(oauth_proxy, idp, grant, n=1)


# -------------------------------------------------------------------------------------------------
# 3. Replays


def test_replayed_callback_is_refused_without_a_second_token_request(oauth_proxy, idp):
    grant = grant_for(idp)
    target = callback_target(grant)
    first = send(oauth_proxy, target)
    assert_outcome(oauth_proxy, first, 200, "verified", VERIFIED, n=1)
    second = send(oauth_proxy, target)
    assert_outcome(oauth_proxy, second, 400, "replayed_code", ALREADY_USED, n=2, source="client")
    assert token_totals(idp) == (1, 1, 0, 0)


def test_a_full_memory_store_refuses_callbacks_with_503_before_the_idp(oauth_proxy_factory, idp):
    # 1k holds four replay-guard entries (71-byte key + 1-byte value + 180 bytes of bookkeeping).
    p = oauth_proxy_factory(store_max_memory="1k")
    from test_observability import samples, scrape, value
    for n in range(1, 5):
        assert_outcome(p, send(p, callback_target(grant_for(idp))), 200, "verified", VERIFIED, n=n)
    s = samples(scrape(p))
    assert value(s, "callback_proxy_memory_store_entries") == 4
    assert value(s, "callback_proxy_memory_store_bytes") == 4 * 252
    assert value(s, "callback_proxy_memory_store_limit_bytes") == 1024
    # Full: refused (it never evicts a live entry, that would reopen a replay), the IdP untouched.
    idp.reset_stats()
    r = send(p, callback_target(grant_for(idp)))
    assert_outcome(p, r, 503, "store_unavailable", TRY_AGAIN, n=5, source="internal",
                   detail=r"memory store full: 4 live entries")
    assert token_totals(idp) == (0, 0, 0, 0)
    s = samples(scrape(p))
    assert value(s, "callback_proxy_callbacks_total", provider="google", platform="ios",
                 outcome="store_unavailable") == 1
    # Plain proxying is unaffected.
    with p.conn() as c:
        c.request("GET", "/echo")
        assert c.read_response().status == 200


def test_callbacks_beyond_the_rate_limit_get_429_without_reaching_the_idp(oauth_proxy_factory, idp):
    p = oauth_proxy_factory(rate_limit="3/m")
    for n in range(1, 4):
        assert_outcome(p, send(p, callback_target(grant_for(idp))), 200, "verified", VERIFIED, n=n)
    idp.reset_stats()
    refused = [send(p, callback_target(grant_for(idp))) for _ in range(5)]
    for r in refused:
        assert r.status == 429, page_text(r)
        assert "Too many sign-in attempts" in page_text(r)
        assert 1 <= int(r.one("Retry-After")) <= 20     # one token every 20 s
        assert_page_headers(r)
    assert token_totals(idp) == (0, 0, 0, 0)
    from test_observability import samples, scrape, value
    s = samples(scrape(p))
    assert value(s, "callback_proxy_callbacks_total", provider="google", platform="ios", outcome="rate_limited") == 5
    warned = [l for l in log_lines(p) if l.get("msg") == "callbacks rate limited"]
    assert len(warned) == 1, "one line per burst, not one per refused request"
    assert warned[0]["client"] == "127.0.0.1" and warned[0]["limit"] == "3/60s"
    # Everything else is not limited.
    for _ in range(5):
        with p.conn() as c:
            c.request("GET", "/echo")
            assert c.read_response().status == 200


def test_the_rate_limit_counts_the_forwarded_client_only_behind_a_trusted_proxy(oauth_proxy_factory, idp):
    def attempt(p, forwarded_for):
        return send(p, callback_target(grant_for(idp)), headers=[("X-Forwarded-For", forwarded_for)]).status

    # The peer (127.0.0.1) is not trusted: X-Forwarded-For is the client's to invent, so a new
    # value does not buy a new bucket.
    p = oauth_proxy_factory(rate_limit="1/m")
    assert attempt(p, "203.0.113.1") == 200
    assert attempt(p, "203.0.113.2") == 429
    # Trusted: the right-most untrusted entry is the client; entries left of it are ignored.
    q = oauth_proxy_factory(rate_limit="1/m", opts={"--trusted-proxy": "127.0.0.1/32"})
    assert attempt(q, "203.0.113.1") == 200
    assert attempt(q, "203.0.113.1") == 429
    assert attempt(q, "198.51.100.9, 203.0.113.1") == 429, "a forged left-most entry must not help"
    assert attempt(q, "203.0.113.2, 127.0.0.1") == 200, "trusted hops on the right are skipped"


def test_replay_is_refused_even_for_the_other_provider_entry_of_the_same_idp(oauth_proxy, idp):
    """Same IdP behind two provider names: the replay key includes the provider, so the second
    presentation reaches the IdP, which must refuse it as already redeemed (→ 502)."""
    grant = grant_for(idp)
    first = send(oauth_proxy, callback_target(grant, provider=GOOGLE))
    assert_outcome(oauth_proxy, first, 200, "verified", VERIFIED, n=1)
    second = send(oauth_proxy, callback_target(grant, provider=OIDC))
    assert_outcome(oauth_proxy, second, 502, "exchange_failed", NOT_COMPLETED, n=2, source="idp",
                   detail=r"HTTP 400 error=invalid_grant")
    assert client_stats(idp, IOS)["reasons"] == {"code_already_redeemed": 1}


def test_code_stays_spent_after_a_refused_exchange(oauth_proxy, idp):
    grant = grant_for(idp)
    wrong = send(oauth_proxy, callback_target(grant, override={"code_verifier": pkce_pair()[0]}))
    assert_outcome(oauth_proxy, wrong, 502, "exchange_failed", NOT_COMPLETED, n=1)
    right = send(oauth_proxy, callback_target(grant))
    assert_outcome(oauth_proxy, right, 400, "replayed_code", ALREADY_USED, n=2)
    assert token_totals(idp) == (1, 0, 1, 0)


def test_concurrent_presentations_of_one_code_reach_the_idp_once(oauth_proxy_factory, idp):
    p = oauth_proxy_factory(opts={"--loops": "2"})
    grant = grant_for(idp)
    target = callback_target(grant)
    results, barrier = [], threading.Barrier(6)

    def go():
        barrier.wait()
        results.append(send(p, target).status)

    threads = [threading.Thread(target=go) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(15)
    assert sorted(results) == [200] + [400] * 5, results
    reasons = sorted(line.get("reason", "verified") for line in wait_callback_logs(p, 6))
    assert reasons == ["replayed_code"] * 5 + ["verified"], reasons
    assert token_totals(idp) == (1, 1, 0, 0)


# -------------------------------------------------------------------------------------------------
# 4. The IdP refuses or fails → 502


@pytest.mark.parametrize("provider", PROVIDERS)
def test_wrong_verifier_is_refused_by_the_idp(oauth_proxy, idp, provider):
    grant = grant_for(idp)
    r = send(oauth_proxy, callback_target(grant, provider=provider,
                                          override={"code_verifier": pkce_pair()[0]}))
    assert_outcome(oauth_proxy, r, 502, "exchange_failed", NOT_COMPLETED, source="idp",
                   detail=r"token endpoint: HTTP 400 error=invalid_grant")
    assert token_totals(idp) == (1, 0, 1, 0)
    assert client_stats(idp, IOS)["reasons"] == {"pkce_mismatch": 1}


def test_android_code_presented_as_ios_passes_pinning_and_is_refused_by_the_idp(oauth_proxy, idp):
    grant = grant_for(idp, "android")
    r = send(oauth_proxy, callback_target(grant, platform="ios"))   # iOS client_id + redirect
    assert_outcome(oauth_proxy, r, 502, "exchange_failed", NOT_COMPLETED, source="idp",
                   detail=r"HTTP 400 error=invalid_grant")
    assert token_totals(idp) == (1, 0, 1, 0)
    assert client_stats(idp, IOS)["reasons"] == {"code_issued_to_another_client": 1}
    assert client_stats(idp, ANDROID)["requests"] == 0


@pytest.mark.parametrize("mode,reason,page,detail", [
    ("500", "idp_unavailable", UNAVAILABLE, r"token endpoint: HTTP 500 error=server_error"),
    ("garbage", "exchange_failed", NOT_COMPLETED, r"token endpoint: HTTP 200 body is not a JSON"),
    ("close", "idp_unavailable", UNAVAILABLE, r"token endpoint: protocolError: .*Empty reply"),
])
@pytest.mark.parametrize("provider", PROVIDERS)
def test_token_endpoint_failure(oauth_proxy, idp, provider, mode, reason, page, detail):
    idp.set_mode(token=mode, times=1)   # a retry would be answered normally, and counted
    grant = grant_for(idp)
    r = send(oauth_proxy, callback_target(grant, provider=provider))
    assert_outcome(oauth_proxy, r, 502, reason, page, source="idp", detail=detail)
    time.sleep(0.2)
    assert token_totals(idp) == (1, 0, 0, 1), "the token request was not sent exactly once"


def test_slow_token_endpoint_times_out(oauth_proxy_factory, idp):
    p = oauth_proxy_factory(idp_timeout="1s")
    idp.set_mode(token="slow:2500", times=1)
    grant = grant_for(idp)
    started = time.monotonic()
    r = send(p, callback_target(grant))
    elapsed = time.monotonic() - started
    assert_outcome(p, r, 502, "idp_unavailable", UNAVAILABLE, source="idp",
                   detail=r"token endpoint: timeout: ")
    assert 0.9 <= elapsed < 2.4, f"answered after {elapsed:.2f}s with idp_timeout 1s"
    # the slow request is counted when the IdP finally answers it; a retry (mode back to ok
    # after one request) would have been counted before it
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and not any(
            str(e.get("mode")).startswith("slow") for e in idp.stats()["events"]):
        time.sleep(0.05)
    assert idp.stats()["token"]["requests"] == 1, idp.stats()["events"]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_idp_down(oauth_proxy_factory, idp_factory, provider):
    other = idp_factory()
    p = oauth_proxy_factory(target_idp=other)
    grant = other.get_code(IOS)
    other.stop()
    r = send(p, callback_target(grant, provider=provider))
    assert_outcome(p, r, 502, "idp_unavailable", UNAVAILABLE, source="idp",
                   detail=r"(token endpoint|discovery).*: connect: ")


@pytest.mark.parametrize("provider", PROVIDERS)
def test_wrong_ca_fails_tls_verification(oauth_proxy_factory, idp, tmp_path, provider):
    stranger = make_test_pki(tmp_path / "another-ca")
    p = oauth_proxy_factory(ca_file=stranger.ca_cert)
    grant = grant_for(idp)
    r = send(p, callback_target(grant, provider=provider))
    line = assert_outcome(p, r, 502, "idp_unavailable", UNAVAILABLE, source="config",
                          detail=r"(token endpoint|discovery).*: certificate: .*certificate.*oauth.ca_file")
    assert line["level"] == "error" and line["setting"] == "oauth.ca_file", line
    # Every sign-in fails the same way until the setting is fixed: one line a minute, not one each.
    r = send(p, callback_target(grant_for(idp), provider=provider))
    assert r.status == 502
    time.sleep(0.3)
    assert len(wait_callback_logs(p, 2, timeout=0.3)) == 1
    stats = idp.stats()
    assert stats["token"]["requests"] == 0 and stats["endpoints"]["discovery"] == 0, stats
    # the IdP is fine: with the right CA the same code is still good
    good = oauth_proxy_factory()
    r = send(good, callback_target(grant, provider=GOOGLE))
    assert_outcome(good, r, 200, "verified", VERIFIED)


def test_discovery_failure_fails_the_oidc_sign_in_without_a_token_request(oauth_proxy, idp):
    idp.set_mode(discovery="500", times=1)
    grant = grant_for(idp)
    r = send(oauth_proxy, callback_target(grant, provider=OIDC))
    assert_outcome(oauth_proxy, r, 502, "idp_unavailable", UNAVAILABLE, source="idp",
                   detail=r"discovery .*HTTP 500")
    assert idp.stats()["token"]["requests"] == 0


# -------------------------------------------------------------------------------------------------
# 5. id_token verification


ID_TOKEN_MODES = {
    "bad_signature": r"signature does not verify",
    "wrong_issuer": r"iss is not an expected issuer",
    "wrong_audience": r"aud does not contain our client id",
    "expired": r"token expired",
    "issued_in_future": r"iat is in the future",
    "alg_none": r"alg none|token has an empty part",   # `h.p.` is refused before the alg check
    "unknown_kid": r"kid is not in the key set",
}


@pytest.mark.parametrize("mode", list(ID_TOKEN_MODES))
@pytest.mark.parametrize("provider", PROVIDERS)
def test_bad_id_token_is_refused(oauth_proxy, idp, provider, mode):
    idp.set_mode(id_token=mode)
    grant = grant_for(idp)
    r = send(oauth_proxy, callback_target(grant, provider=provider))
    assert_outcome(oauth_proxy, r, 502, "invalid_id_token", NOT_VERIFIED, source="idp",
                   detail=rf"^{provider} id_token refused: ({ID_TOKEN_MODES[mode]})")
    assert token_totals(idp) == (1, 1, 0, 0)   # the exchange itself succeeded
    # a fresh proxy fetched the JWKS once; an unknown kid does not make it fetch again at once
    assert idp.stats()["endpoints"]["jwks"] == 1


# -------------------------------------------------------------------------------------------------
# 6. Secrets hygiene


def test_no_secret_reaches_the_proxy_output(oauth_proxy_factory, idp, idp_pki, upstream):
    tap = TokenTap(idp, idp_pki)
    try:
        p = oauth_proxy_factory(token_url=tap.url)
        secrets, targets, statuses = [], [], []

        def callback(grant, expect, **kw):
            target = callback_target(grant, **kw)
            targets.append(target)
            secrets.extend(s for s in (grant.code, grant.state, grant.code_verifier, grant.nonce) if s)
            r = send(p, target)
            statuses.append(r.status)
            assert r.status == expect, (kw, page_text(r))
            return r

        ios, android = grant_for(idp), grant_for(idp, "android")
        callback(ios, 200)                                               # google, via the tap
        callback(ios, 400)                                               # replay
        callback(android, 200, platform="android")
        callback(grant_for(idp), 200, provider=OIDC)                     # direct to the IdP
        wrong = pkce_pair()[0]
        secrets.append(wrong)
        callback(grant_for(idp), 502, override={"code_verifier": wrong})
        callback(grant_for(idp), 400, override={"client_id": WEB})
        callback(grant_for(idp), 400, extra=[("nonce", "n" * 30)])
        callback(grant_for(idp), 400, drop=["code", "code_verifier"],
                 extra=[("error", "access_denied"), ("error_description", "user said no")])
        idp.set_mode(id_token="bad_signature")
        callback(grant_for(idp), 502)
        idp.set_mode(id_token="ok", token="garbage", times=1)
        callback(grant_for(idp), 502)

        lines = wait_callback_logs(p, len(targets))
        assert len(lines) == len(targets), lines
        tokens = tap.tokens()
        assert len(tokens) >= 6, f"the tap saw {len(tokens)} tokens"   # 3 access + 3 id tokens
        pieces = [seg for t in tokens for seg in t.split(".") if len(seg) >= 16]
        queries = [t.split("?", 1)[1] for t in targets]
        out = p.stdout_text() + p.stderr_text()
        for label, values in (("code/state/verifier/nonce", secrets), ("token", tokens),
                              ("token segment", pieces), ("query string", queries)):
            for v in values:
                assert v not in out, f"a {label} appears in the proxy's output: {v[:12]}…"
        assert "eyJ" not in out, "something JWT-shaped appears in the proxy's output"
        access = p.wait_access_log(len(targets))
        assert "?" not in "".join(str(e.get("path")) for e in access)
        callbacks = [e for e in access if e.get("path", "").startswith(CALLBACK)]
        assert [e["path"] for e in callbacks] == [CALLBACK] * len(targets), callbacks
        assert [e["status"] for e in callbacks] == statuses
        log_lines(p)    # every stderr line is JSON
    finally:
        tap.stop()


# -------------------------------------------------------------------------------------------------
# 7. Pages, methods, and everything else still proxied


def test_callback_pages_are_uncacheable_and_send_no_referrer(oauth_proxy, idp):
    ok = send(oauth_proxy, callback_target(grant_for(idp)))
    bad = send(oauth_proxy, callback_target(grant_for(idp), provider="nope"))
    idp.set_mode(token="500", times=1)
    failed = send(oauth_proxy, callback_target(grant_for(idp)))
    nothing = send(oauth_proxy, CALLBACK)
    assert [r.status for r in (ok, bad, failed, nothing)] == [200, 400, 502, 400]
    for r in (ok, bad, failed, nothing):
        assert_page_headers(r)
        assert r.one("content-type", ).startswith("text/html")


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "HEAD"])
def test_other_methods_on_the_callback_are_refused(oauth_proxy, idp, upstream, method):
    """HEAD included: a link preview or prefetch must not spend the user's single-use code."""
    grant = grant_for(idp)
    target = callback_target(grant)
    r = send(oauth_proxy, target, method=method, body=b"code=x" if method in ("POST", "PUT") else b"")
    assert r.status == 405, page_text(r)
    assert "GET" in (r.one("allow") or ""), r.headers
    assert_page_headers(r)
    assert grant.code not in page_text(r)
    assert idp.stats()["token"]["requests"] == 0
    assert upstream.record.requests() == []
    assert_redeemable(oauth_proxy, idp, grant, n=1)


@pytest.mark.parametrize("target", [
    "/echo?code=abc&state=xyz",
    "/_oauth_callback/",
    "/_oauth_callbackx?provider=google",
    "/_oauth/callback?code=abc",
    "/users/auth/google_oauth2/callback?code=abc&state=xyz",
])
def test_other_paths_are_proxied_unchanged(oauth_proxy, idp, upstream, target):
    """The upstream answers /echo with what it received and any other path with its own 404:
    either way the request went upstream, untouched, and the callback handler stayed out."""
    expected = 200 if target.startswith("/echo") else 404
    for method, body in (("GET", b""), ("POST", b"hello")):
        r = send(oauth_proxy, target, method=method, body=body)
        assert r.status == expected, r
        assert b"Sign-in" not in r.body and r.one("referrer-policy") is None, r
        if expected == 200:
            assert (r.json()["method"], r.json()["target"], r.json()["body_len"]) == \
                (method, target, len(body))
    assert [(q["method"], q["target"]) for q in upstream.record.requests()] == \
        [("GET", target), ("POST", target)]
    assert idp.stats()["token"]["requests"] == 0
    assert wait_callback_logs(oauth_proxy, 1, timeout=0.2) == []


# -------------------------------------------------------------------------------------------------
# Key rotation and unknown kids, on the proxies aged by the module fixture (keep these last)


def test_unknown_kid_triggers_one_refetch_then_is_refused(aged_proxies, idp):
    wait_past_refetch_interval(aged_proxies)
    p = aged_proxies.proxies["unknown"]
    idp.set_mode(id_token="unknown_kid")
    r = send(p, callback_target(grant_for(idp)))
    assert_outcome(p, r, 502, "invalid_id_token", NOT_VERIFIED, n=2,
                   detail=r"kid is not in the key set")
    assert idp.stats()["endpoints"]["jwks"] == 1, "expected exactly one JWKS refetch"
    # a second unknown kid right after: refused without fetching again (no amplification)
    r = send(p, callback_target(grant_for(idp)))
    assert_outcome(p, r, 502, "invalid_id_token", NOT_VERIFIED, n=3)
    assert idp.stats()["endpoints"]["jwks"] == 1
    # the known key still works
    idp.set_mode(id_token="ok")
    r = send(p, callback_target(grant_for(idp)))
    assert_outcome(p, r, 200, "verified", VERIFIED, n=4)
    assert idp.stats()["endpoints"]["jwks"] == 1


def test_key_rotation_is_picked_up_by_refetching_the_jwks(aged_proxies, idp):
    wait_past_refetch_interval(aged_proxies)
    p = aged_proxies.proxies["rotating"]
    old_kid = idp.stats()["keys"]["kid"]
    new_kid = idp.rotate_keys()
    assert new_kid != old_kid
    r = send(p, callback_target(grant_for(idp)))
    assert_outcome(p, r, 200, "verified", VERIFIED, n=2)
    assert idp.stats()["endpoints"]["jwks"] == 1, "expected exactly one JWKS refetch"
    r = send(p, callback_target(grant_for(idp, "android"), platform="android"))
    assert_outcome(p, r, 200, "verified", VERIFIED, n=3)
    assert idp.stats()["endpoints"]["jwks"] == 1
