"""Start the strict test IdP from tests and drive it over HTTP(S) — importable by any test suite.

    import sys; sys.path.insert(0, "<repo>/IntegrationTests/idp")
    from idp_harness import idp_pki, idp_server, idp, idp_factory   # pytest fixtures, re-exported

or use the classes directly:

    pki = make_test_pki(tmpdir)                       # throwaway CA + cert for 127.0.0.1 (openssl CLI)
    with IdP.start(pki, log_dir=tmpdir) as srv:       # subprocess on a free port, HTTPS, --test-hooks
        grant = srv.get_code("123-ios.apps.googleusercontent.com", username="alice@example.test")
        resp = srv.exchange(grant)                    # a correct token request (PKCE, no secret)
        claims = srv.verify_id_token(resp.json()["id_token"], grant.client_id, nonce=grant.nonce)

Only `requests` and `PyJWT` are needed on the test side (see IntegrationTests/requirements.txt).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import secrets
import select
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import jwt
import pytest
import requests

IDP_DIR = Path(__file__).resolve().parent
SERVER = IDP_DIR / "server.py"
EXAMPLE_CLIENTS = IDP_DIR / "clients.example.json"
START_TIMEOUT = 20.0
AUTO = object()   # "make one up" for state / nonce / code_verifier


def sub_for(username: str) -> str:
    """The `sub` the IdP gives a username (same formula as idp_provider.sub_for)."""
    digest = hashlib.sha256(username.strip().lower().encode()).digest()
    return "1" + str(int.from_bytes(digest[:8], "big")).zfill(20)


def pkce_pair(verifier: str | None = None) -> tuple[str, str]:
    verifier = verifier or secrets.token_urlsafe(48)[:64]
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=")
    return verifier, challenge.decode()


# -------------------------------------------------------------------------------------------------
# Throwaway PKI


@dataclass(frozen=True)
class TestPKI:
    ca_cert: str
    ca_key: str
    server_cert: str
    server_key: str


def _openssl(*args: str, cwd: str):
    proc = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(args)} failed:\n{proc.stderr}")


def make_test_pki(directory, hosts=("127.0.0.1", "localhost")) -> TestPKI:
    """A CA valid for two days and a server certificate signed by it for `hosts` (IPs and DNS
    names), made with the openssl CLI. EC P-256 keys: fast to make and to handshake."""
    d = str(directory)
    os.makedirs(d, exist_ok=True)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    _openssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
             "-subj", "/CN=CallbackProxy throwaway test CA",
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=d)
    _openssl("req", *ec, "-keyout", "server.key", "-out", "server.csr", "-subj", f"/CN={hosts[0]}",
             cwd=d)
    sans = ",".join(("IP:" if h.replace(".", "").isdigit() or ":" in h else "DNS:") + h
                    for h in hosts)
    Path(d, "server.ext").write_text(
        f"subjectAltName={sans}\nbasicConstraints=critical,CA:FALSE\n"
        "keyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n"
        "subjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid,issuer\n")
    _openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
             "-CAcreateserial", "-out", "server.pem", "-days", "2", "-extfile", "server.ext", cwd=d)
    return TestPKI(ca_cert=os.path.join(d, "ca.pem"), ca_key=os.path.join(d, "ca.key"),
                   server_cert=os.path.join(d, "server.pem"),
                   server_key=os.path.join(d, "server.key"))


# -------------------------------------------------------------------------------------------------
# The IdP process


@dataclass
class CodeGrant:
    """A fresh, unconsumed authorization code and everything needed to redeem it."""
    client_id: str
    redirect_uri: str
    code: str
    state: str | None
    code_verifier: str | None
    code_challenge: str | None
    nonce: str | None
    scope: str
    location: str          # the full redirect the IdP answered with


@dataclass
class IdP:
    base_url: str          # == issuer
    port: int
    ca_cert: str | None    # None with plain HTTP
    clients: dict          # client_id -> entry of the clients JSON file
    clients_file: str
    log_path: str
    proc: subprocess.Popen = field(repr=False)

    # -- life cycle -------------------------------------------------------------------------------

    @classmethod
    def start(cls, pki: TestPKI | None, log_dir, clients_file=EXAMPLE_CLIENTS, extra_args=(),
              test_hooks=True, issuer_path="", python=sys.executable) -> "IdP":
        """Start server.py on a free port; returns once it printed READY. pki=None: plain HTTP."""
        log_dir = Path(log_dir)
        log_dir.mkdir(parents=True, exist_ok=True)
        log_path = log_dir / f"idp-{os.getpid()}-{secrets.token_hex(3)}.log"
        scheme = "https" if pki else "http"
        cmd = [python, str(SERVER), "--port", "0", "--issuer",
               f"{scheme}://127.0.0.1:PORT{issuer_path}", "--clients", str(clients_file)]
        cmd += ["--tls-cert", pki.server_cert, "--tls-key", pki.server_key] if pki else ["--insecure-http"]
        if test_hooks:
            cmd.append("--test-hooks")
        cmd += list(extra_args)
        log = open(log_path, "wb")
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL,
                                preexec_fn=_die_with_parent)
        log.close()
        try:
            port = _wait_ready(proc, log_path)
        except BaseException:
            proc.kill()
            proc.wait()
            raise
        with open(clients_file, encoding="utf-8") as f:
            clients = {c["client_id"]: c for c in json.load(f)["clients"]}
        return cls(base_url=f"{scheme}://127.0.0.1:{port}{issuer_path}", port=port,
                   ca_cert=pki.ca_cert if pki else None, clients=clients,
                   clients_file=str(clients_file), log_path=str(log_path), proc=proc)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout:
            self.proc.stdout.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    def log_tail(self, lines=40) -> str:
        with contextlib.suppress(OSError):
            return "".join(Path(self.log_path).read_text(errors="replace").splitlines(True)[-lines:])
        return ""

    @property
    def issuer(self) -> str:
        return self.base_url

    @property
    def verify(self):
        return self.ca_cert if self.ca_cert else True

    def url(self, path: str) -> str:
        return self.base_url + path

    def request(self, method, path, **kw) -> requests.Response:
        kw.setdefault("verify", self.verify)
        kw.setdefault("allow_redirects", False)
        kw.setdefault("timeout", 10)
        return requests.request(method, path if "://" in path else self.url(path), **kw)

    # -- the authorization step, as a browser would do it ------------------------------------------

    def authorize_params(self, client_id, *, redirect_uri=None, scope="openid email profile",
                         state=AUTO, nonce=AUTO, code_verifier=AUTO, pkce=True,
                         code_challenge_method="S256", extra=None) -> tuple[dict, str | None]:
        client = self.clients.get(client_id, {})
        params = {"response_type": "code", "client_id": client_id,
                  "redirect_uri": redirect_uri or (client.get("redirect_uris") or [""])[0],
                  "scope": scope}
        if state is AUTO:
            state = secrets.token_urlsafe(16)
        if state is not None:
            params["state"] = state
        if nonce is AUTO:
            nonce = secrets.token_urlsafe(16)
        if nonce is not None:
            params["nonce"] = nonce
        verifier = None
        if pkce:
            verifier, challenge = pkce_pair(None if code_verifier is AUTO else code_verifier)
            params["code_challenge"] = challenge
            if code_challenge_method is not None:
                params["code_challenge_method"] = code_challenge_method
        params.update(extra or {})
        return params, verifier

    def get_code(self, client_id, *, username="alice@example.test", login=None, **authorize_kw
                 ) -> CodeGrant:
        """Drive GET /authorize (the login page) and POST the login form, as plain HTTP requests.
        Returns the unconsumed code. Raises AssertionError with the IdP's answer if refused."""
        params, verifier = self.authorize_params(client_id, **authorize_kw)
        page = self.request("GET", "/authorize", params=params)
        if page.status_code != 200:
            raise AssertionError(f"authorize refused: {page.status_code} "
                                 f"{page.headers.get('Location') or page.headers.get('X-OAuth-Error')}")
        form = {"username": username, "action": "approve", **(login or {})}
        resp = self.request("POST", "/authorize", params=params, data=form)
        location = resp.headers.get("Location", "")
        query = parse_qs(urlsplit(location).query)
        if resp.status_code != 302 or "code" not in query:
            raise AssertionError(f"login did not yield a code: {resp.status_code} {location!r}")
        return CodeGrant(client_id=client_id, redirect_uri=params["redirect_uri"],
                         code=query["code"][0], state=(query.get("state") or [None])[0],
                         code_verifier=verifier, code_challenge=params.get("code_challenge"),
                         nonce=params.get("nonce"), scope=params["scope"], location=location)

    def deny(self, client_id, **authorize_kw) -> str:
        """Press "Deny" on the login page; returns the redirect Location."""
        params, _ = self.authorize_params(client_id, **authorize_kw)
        resp = self.request("POST", "/authorize", params=params, data={"action": "deny"})
        return resp.headers.get("Location", "")

    # -- the token endpoint ----------------------------------------------------------------------

    def exchange(self, grant: CodeGrant | None = None, *, client_secret=None, auth="post",
                 omit=(), override=None, headers=None) -> requests.Response:
        """POST /token for `grant` the way a correct client would (public: client_id + verifier,
        no secret; with client_secret: in the body (auth="post") or HTTP Basic (auth="basic")).
        `omit` drops fields, `override` replaces or adds them — to build wrong requests."""
        form = {"grant_type": "authorization_code"}
        if grant is not None:
            form.update(code=grant.code, redirect_uri=grant.redirect_uri, client_id=grant.client_id)
            if grant.code_verifier:
                form["code_verifier"] = grant.code_verifier
        hdrs = dict(headers or {})
        if client_secret is not None:
            if auth == "basic":
                from urllib.parse import quote
                cid = (override or {}).get("client_id", form.get("client_id", ""))
                raw = f"{quote(cid, safe='')}:{quote(client_secret, safe='')}".encode()
                hdrs["Authorization"] = "Basic " + base64.b64encode(raw).decode()
                form.pop("client_id", None)
            else:
                form["client_secret"] = client_secret
        for name in omit:
            form.pop(name, None)
        form.update(override or {})
        return self.request("POST", "/token", data=form, headers=hdrs)

    def refresh(self, client_id, refresh_token, *, client_secret=None, auth="post", override=None
                ) -> requests.Response:
        """POST /token grant_type=refresh_token as `client_id` would (a public client: its
        client_id only; with client_secret: in the body or HTTP Basic)."""
        form = {"grant_type": "refresh_token", "refresh_token": refresh_token, "client_id": client_id}
        hdrs = {}
        if client_secret is not None:
            if auth == "basic":
                from urllib.parse import quote
                raw = f"{quote(client_id, safe='')}:{quote(client_secret, safe='')}".encode()
                hdrs["Authorization"] = "Basic " + base64.b64encode(raw).decode()
                form.pop("client_id")
            else:
                form["client_secret"] = client_secret
        form.update(override or {})
        return self.request("POST", "/token", data=form, headers=hdrs)

    def change_user(self, username, **changes) -> dict:
        """What refreshes see of `username` from now on: groups=[...], hd="...", disabled=True."""
        resp = self.request("POST", "/_test/user", json={"username": username, **changes})
        resp.raise_for_status()
        return resp.json()

    def revoke(self, username) -> int:
        """Revoke every live refresh token of `username`; returns how many."""
        resp = self.request("POST", "/_test/revoke", json={"username": username})
        resp.raise_for_status()
        return resp.json()["revoked"]

    def refresh_events(self) -> list:
        """The token requests with grant_type=refresh_token among the stats' events."""
        return [e for e in self.stats()["events"] if e.get("grant") == "refresh_token"]

    def web_secret(self, client_id) -> str:
        return self.clients[client_id]["client_secret"]

    # -- keys and id_tokens ------------------------------------------------------------------------

    def discovery(self) -> dict:
        return self.request("GET", "/.well-known/openid-configuration").json()

    def jwks(self) -> dict:
        return self.request("GET", "/jwks").json()

    def verify_id_token(self, id_token: str, client_id: str, nonce: str | None = None,
                        leeway: int = 5) -> dict:
        """Verify an id_token independently of the IdP's own library (PyJWT): signature against
        the IdP's current JWKS (by kid), RS256 only, iss, aud, exp, iat, and nonce if given."""
        header = jwt.get_unverified_header(id_token)
        keys = {k["kid"]: k for k in self.jwks()["keys"]}
        if header.get("kid") not in keys:
            raise jwt.InvalidTokenError(f"kid {header.get('kid')!r} not in the JWKS")
        key = jwt.PyJWK(keys[header["kid"]])
        claims = jwt.decode(id_token, key=key.key, algorithms=["RS256"], audience=client_id,
                            issuer=self.issuer, leeway=leeway,
                            options={"require": ["iss", "aud", "exp", "iat", "sub"]})
        if nonce is not None and claims.get("nonce") != nonce:
            raise jwt.InvalidTokenError("nonce mismatch")
        return claims

    # -- test hooks ------------------------------------------------------------------------------

    def stats(self) -> dict:
        return self.request("GET", "/_test/stats").json()

    def issued_secrets(self) -> dict:
        """Every code, verifier, client secret, Authorization value and token the IdP issued or
        was shown since it started, by kind (GET /_test/secrets)."""
        return self.request("GET", "/_test/secrets").json()

    def reset_stats(self):
        self.request("POST", "/_test/reset-stats").raise_for_status()

    def set_mode(self, times=None, **modes) -> dict:
        """e.g. set_mode(token="500"), set_mode(token="slow:1500"), set_mode(id_token="expired"),
        set_mode(jwks="close", times=1). Returns the modes now in force."""
        body = dict(modes)
        if times is not None:
            body["times"] = times
        resp = self.request("POST", "/_test/mode", json=body)
        resp.raise_for_status()
        return resp.json()

    def rotate_keys(self) -> str:
        resp = self.request("POST", "/_test/rotate-keys")
        resp.raise_for_status()
        return resp.json()["kid"]

    def set_clock(self, offset_seconds: float):
        self.request("POST", "/_test/clock", json={"offset_seconds": offset_seconds}
                     ).raise_for_status()

    def reset(self):
        """Back to a clean slate between tests: stats zeroed, every mode "ok", clock true."""
        self.set_mode(token="ok", jwks="ok", discovery="ok", userinfo="ok", id_token="ok")
        self.set_clock(0)
        self.request("POST", "/_test/reset-users").raise_for_status()
        self.reset_stats()


def _die_with_parent():
    """In the child, before exec: ask Linux to SIGTERM it when the test process dies, so a
    killed test run leaves no IdP behind."""
    with contextlib.suppress(Exception):
        import ctypes
        import signal
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)   # PR_SET_PDEATHSIG


def _wait_ready(proc: subprocess.Popen, log_path) -> int:
    deadline = time.monotonic() + START_TIMEOUT
    buf = b""
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"IdP exited with {proc.returncode} before READY:\n"
                               + Path(log_path).read_text(errors="replace")[-4000:])
        ready, _, _ = select.select([proc.stdout], [], [], 0.1)
        if ready:
            chunk = os.read(proc.stdout.fileno(), 4096)
            buf += chunk
            for line in buf.split(b"\n"):
                if line.startswith(b"READY "):
                    return int(line.split()[1])
    raise RuntimeError(f"IdP not READY within {START_TIMEOUT}s:\n"
                       + Path(log_path).read_text(errors="replace")[-4000:])


# -------------------------------------------------------------------------------------------------
# pytest fixtures (re-export them from a conftest.py: `from idp_harness import idp, ...`)


@pytest.fixture(scope="session")
def idp_pki(tmp_path_factory) -> TestPKI:
    """Throwaway CA and a server certificate for 127.0.0.1/localhost, once per session."""
    return make_test_pki(tmp_path_factory.mktemp("idp-pki"))


@pytest.fixture(scope="session")
def idp_server(idp_pki, tmp_path_factory):
    """One IdP (HTTPS, --test-hooks, clients.example.json) for the whole session."""
    srv = IdP.start(idp_pki, tmp_path_factory.mktemp("idp-logs"))
    yield srv
    srv.stop()


@pytest.fixture
def idp(idp_server, request):
    """The session IdP, reset (stats, modes, clock) before each test; its log tail is printed
    if the test fails. Yields an `IdP`: .base_url, .ca_cert, .get_code(client_id), .exchange(…)."""
    if idp_server.proc.poll() is not None:
        pytest.fail(f"the IdP died:\n{idp_server.log_tail()}")
    idp_server.reset()
    yield idp_server
    rep = getattr(request.node, "rep_call", None)
    if rep is not None and rep.failed:
        print(f"--- IdP log tail ({idp_server.log_path})\n{idp_server.log_tail()}")


@pytest.fixture
def idp_factory(idp_pki, tmp_path):
    """Start extra IdPs with their own arguments: idp_factory("--code-ttl", "1"),
    idp_factory(clients_file=path), idp_factory(tls=False) for plain HTTP."""
    started = []

    def start(*extra_args, clients_file=EXAMPLE_CLIENTS, tls=True, test_hooks=True, issuer_path=""):
        srv = IdP.start(idp_pki if tls else None, tmp_path, clients_file=clients_file,
                        extra_args=extra_args, test_hooks=test_hooks, issuer_path=issuer_path)
        started.append(srv)
        return srv

    yield start
    for srv in started:
        srv.stop()
