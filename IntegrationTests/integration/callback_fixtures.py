"""Shared pieces for the end-to-end tests of `/_oauth_callback` against the strict test IdP
(IntegrationTests/idp): the IdP fixtures re-exported, the proxy's YAML configuration for that IdP, the
callback URL builder, readers for the proxy's JSON log lines, and a recording TLS relay that
shows which tokens the IdP handed the proxy (for the secrets-hygiene test).

Import from a test module:

    from callback_fixtures import *   # noqa: F401,F403  (fixtures: idp, idp_server, idp_pki, idp_factory)
"""

from __future__ import annotations

import http.server
import json
import os
import ssl
import sys
import time
from urllib.parse import quote_plus

import requests

from helpers import REPO_ROOT, HTTPConn, serve_http

sys.path.insert(0, os.path.join(REPO_ROOT, "IntegrationTests", "idp"))
from idp_harness import (  # noqa: E402,F401  (fixtures re-exported for the test module)
    CodeGrant,
    IdP,
    idp,
    idp_factory,
    idp_pki,
    idp_server,
    make_test_pki,
    pkce_pair,
    sub_for,
)

# The native clients registered in IntegrationTests/idp/clients.example.json.
IOS = "123-ios.apps.googleusercontent.com"
IOS_REDIRECT = "com.googleusercontent.apps.123-ios:/oauth2redirect"     # Google's derived one
ANDROID = "123-android.apps.googleusercontent.com"
ANDROID_REDIRECT = "com.example.app:/oauth2redirect"
WEB = "123-web.apps.googleusercontent.com"
NATIVE = {"ios": (IOS, IOS_REDIRECT), "android": (ANDROID, ANDROID_REDIRECT)}

# The two provider entries of the configuration: the IdP as kind `google` (endpoints set from
# the IdP's discovery document, iOS redirect left to the proxy to derive) and the same IdP as a
# generic `oidc` provider found by discovery at run time.
GOOGLE = "google"
OIDC = "idp"
PROVIDERS = (GOOGLE, OIDC)

CALLBACK = "/_oauth_callback"
PAGE_HEADERS = {"cache-control": "no-store", "pragma": "no-cache", "referrer-policy": "no-referrer"}


# -------------------------------------------------------------------------------------------------
# Configuration


def _q(value) -> str:
    """A YAML double-quoted scalar (JSON strings are valid YAML)."""
    return json.dumps(str(value))


def write_config(path, idp: IdP, *, ca_file=None, idp_timeout="2s", token_url=None,
                 providers=PROVIDERS, store_max_memory=None, rate_limit=None) -> str:
    """Writes the proxy's YAML for `idp` and returns its path. Endpoints come from the IdP's own
    discovery document (not guessed). `token_url` replaces the google entry's token endpoint
    (the recording relay); `ca_file` defaults to the IdP's CA."""
    doc = idp.discovery()
    lines = [f"store_max_memory: {store_max_memory}"] if store_max_memory else []
    lines += ["oauth:",
             f"  ca_file: {_q(ca_file or idp.ca_cert)}",
             f"  idp_timeout: {idp_timeout}",
             *([f"  rate_limit: {rate_limit}"] if rate_limit else []),
             "providers:"]
    if GOOGLE in providers:
        lines += [f"  {GOOGLE}:",
                  "    kind: google",
                  "    handoff: verify",
                  "    endpoints:",
                  f"      token: {_q(token_url or doc['token_endpoint'])}",
                  f"      jwks: {_q(doc['jwks_uri'])}",
                  f"      issuer: {_q(doc['issuer'])}",
                  "    native:",
                  "      ios:",
                  f"        client_id: {_q(IOS)}",           # redirect derived by the proxy
                  "      android:",
                  f"        client_id: {_q(ANDROID)}",
                  f"        redirect_uri: {_q(ANDROID_REDIRECT)}"]
    if OIDC in providers:
        lines += [f"  {OIDC}:",
                  "    kind: oidc",
                  "    handoff: verify",
                  "    endpoints:",
                  f"      issuer: {_q(doc['issuer'])}",
                  "    native:",
                  "      ios:",
                  f"        client_id: {_q(IOS)}",
                  f"        redirect_uri: {_q(IOS_REDIRECT)}",
                  "      android:",
                  f"        client_id: {_q(ANDROID)}",
                  f"        redirect_uri: {_q(ANDROID_REDIRECT)}"]
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    return str(path)


# -------------------------------------------------------------------------------------------------
# The callback URL


def callback_fields(grant: CodeGrant | None = None, *, provider=GOOGLE, platform="ios",
                    drop=(), override=None, extra=()) -> list[tuple[str, str]]:
    """The contract's fields for `grant`, in the wrapper's order. client_id/redirect_uri are the
    configured native client of `platform` (what the app claims), code/state/verifier the grant's.
    `drop` removes names, `override` replaces values (None removes), `extra` appends pairs."""
    client_id, redirect = NATIVE.get(platform, ("x.apps.example", "x.example:/cb"))
    fields = [("provider", provider), ("platform", platform), ("client_id", client_id),
              ("redirect_uri", redirect)]
    if grant is not None:
        fields += [("code", grant.code), ("state", grant.state)]
        if grant.code_verifier is not None:
            fields.append(("code_verifier", grant.code_verifier))
    override = dict(override or {})
    out = []
    for name, value in fields:
        if name in drop:
            continue
        if name in override:
            value = override.pop(name)
            if value is None:
                continue
        out.append((name, value))
    out += [(k, v) for k, v in override.items() if v is not None]
    out += list(extra)
    return out


def encode(fields) -> str:
    """application/x-www-form-urlencoded, as the wrappers' URL builders produce it."""
    return "&".join(f"{quote_plus(k)}={quote_plus(v)}" for k, v in fields)


def callback_target(grant=None, *, raw_query=None, **kw) -> str:
    return f"{CALLBACK}?{raw_query if raw_query is not None else encode(callback_fields(grant, **kw))}"


def send(proxy, target, method="GET", headers=None, body=b"", timeout=10.0):
    """One request on a fresh connection; returns helpers.Response (with .body). A proxy started
    for HTTP/3 (`proxy.h3_ca` set: TLS and `http3.enabled`) is asked over HTTP/3 (aioquic)."""
    if getattr(proxy, "h3_ca", None):
        return send_h3(proxy, target, method, headers, body, timeout)
    with HTTPConn(proxy.port, timeout=timeout) as c:
        c.request(method, target, headers=headers, body=body)
        return c.read_response(method)


def send_h3(proxy, target, method="GET", headers=None, body=b"", timeout=10.0):
    """`send` over HTTP/3: the answer as the same helpers.Response (no reason phrase, names
    lowercase, pseudo-headers left out)."""
    from h3client import H3
    from helpers import Response
    with H3(proxy.port, ca=proxy.h3_ca, timeout=timeout) as c:
        r = c.request(method, target, list(headers or []), body or None)
    fields = [(k.decode(), v.decode()) for k, v in r.headers if not k.startswith(b":")]
    resp = Response("HTTP/3", r.status, "", fields, b"")
    resp.body = r.body
    resp.body_len = len(r.body)
    return resp


def page_text(resp) -> str:
    return resp.body.decode("utf-8", "replace")


# -------------------------------------------------------------------------------------------------
# The proxy's log


def log_lines(proxy) -> list[dict]:
    """Every JSON line the proxy wrote on stderr (a non-JSON line fails the test)."""
    out = []
    for line in proxy.stderr_text().splitlines():
        if line.strip():
            try:
                out.append(json.loads(line))
            except ValueError:
                raise AssertionError(f"proxy stderr line is not JSON: {line[:300]!r}")
    return out


def callback_logs(proxy) -> list[dict]:
    return [e for e in log_lines(proxy) if e.get("msg") in ("callback verified", "callback failed")]


def wait_callback_logs(proxy, n, timeout=3.0) -> list[dict]:
    deadline = time.monotonic() + timeout
    while True:
        lines = callback_logs(proxy)
        if len(lines) >= n or time.monotonic() > deadline:
            return lines
        time.sleep(0.02)


def last_callback_log(proxy, n=1) -> dict:
    """The n-th callback log line (1-based) once it exists."""
    lines = wait_callback_logs(proxy, n)
    assert len(lines) >= n, f"expected {n} callback log line(s), got {lines}"
    return lines[n - 1]


# -------------------------------------------------------------------------------------------------
# IdP counters


def token_requests(idp: IdP) -> int:
    return idp.stats()["token"]["requests"]


def client_stats(idp: IdP, client_id: str) -> dict:
    return idp.stats()["clients"].get(client_id, {"requests": 0, "successes": 0, "failures": 0,
                                                  "forced": 0, "reasons": {}})


# -------------------------------------------------------------------------------------------------
# A recording relay in front of the IdP's token endpoint


class TokenTap:
    """An HTTPS endpoint (the IdP's own certificate, so the proxy trusts it with the same CA)
    that forwards POST bodies to the IdP's token endpoint unchanged and records every answer.
    Gives the test the exact access_token/id_token values the proxy received."""

    def __init__(self, idp: IdP, pki):
        self.idp = idp
        self.responses: list[dict] = []
        tap = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                upstream = requests.post(tap.idp.url("/token"), data=body, timeout=15,
                                         verify=tap.idp.ca_cert, headers={
                                             "Content-Type": self.headers.get("Content-Type", ""),
                                             "Accept": "application/json"})
                try:
                    tap.responses.append(upstream.json())
                except ValueError:
                    pass
                self.send_response(upstream.status_code)
                self.send_header("Content-Type", upstream.headers.get("Content-Type",
                                                                      "application/json"))
                self.send_header("Cache-Control", "no-store")
                self.send_header("Content-Length", str(len(upstream.content)))
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(upstream.content)

            def log_message(self, *a):
                pass

        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(pki.server_cert, pki.server_key)
        self.server = serve_http(Handler, tls=ctx)
        self.url = f"https://127.0.0.1:{self.server.server_address[1]}/token"

    def tokens(self) -> list[str]:
        out = []
        for r in self.responses:
            for k in ("access_token", "id_token", "refresh_token"):
                if isinstance(r.get(k), str):
                    out.append(r[k])
        return out

    def stop(self):
        self.server.shutdown()
        self.server.server_close()
