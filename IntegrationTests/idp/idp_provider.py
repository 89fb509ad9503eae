"""The strict test IdP: an OpenID Connect provider built on authlib's AuthorizationServer.

authlib does the protocol work (authorization-code grant, PKCE comparison, bearer tokens, id_token
encoding). This module supplies what authlib leaves to the application, and makes it strict:
registered clients only, exact redirect_uri, PKCE (S256) required for public clients, codes that are
single-use, short-lived and bound to client, redirect_uri, challenge and nonce, and client
authentication that refuses a secret from a public client. Error codes follow what Google's token
endpoint answers (see README.md, "Refusals").

Every refusal carries a stable `reason` that the test hooks report (GET /_test/stats), so a test can
tell *why* the IdP refused, not only that it did.
"""

from __future__ import annotations

import base64
import binascii
import copy
import hashlib
import json
import re
import secrets
import threading
import time
import traceback
from collections import deque
from dataclasses import dataclass, replace
from html import escape
from urllib.parse import quote, unquote, urlsplit

import flask
from authlib.integrations.flask_oauth2 import AuthorizationServer
from authlib.oauth2 import OAuth2Error, OAuth2Request
from authlib.oauth2.rfc6749 import grants
from authlib.oauth2.rfc6749.errors import AccessDeniedError
from authlib.oauth2.rfc6749.requests import OAuth2Payload
from authlib.oauth2.rfc7636 import CodeChallenge, create_s256_code_challenge
from authlib.oidc.core import AuthorizationCodeMixin, OpenIDCode
from joserfc import jwt
from joserfc.jwk import KeySet, RSAKey

from idp_clients import SUPPORTED_SCOPES, RegisteredClient

ID_TOKEN_ALG = "RS256"
ACCESS_TOKEN_TTL = 3599          # what Google answers in expires_in
CODE_RECORD_RETENTION = 600      # redeemed/expired codes are remembered this long, for precise reasons
MAX_EVENTS = 500
MAX_REMEMBERED_SECRETS = 20_000   # per kind, for GET /_test/secrets

_CODE_VERIFIER = re.compile(r"^[A-Za-z0-9\-._~]{43,128}$")   # RFC 7636 §4.1
_S256_CHALLENGE = re.compile(r"^[A-Za-z0-9_-]{43}$")         # base64url(sha256), no padding

# Endpoint names used by the misbehaviour modes and the stats, keyed by path below the issuer.
ENDPOINTS = {
    "/token": "token",
    "/jwks": "jwks",
    "/.well-known/openid-configuration": "discovery",
    "/userinfo": "userinfo",
}
MODES = ("ok", "500", "garbage", "close")   # plus "slow:MS"
ID_TOKEN_MODES = ("ok", "bad_signature", "wrong_issuer", "wrong_audience", "expired", "issued_in_future",
                  "missing_nonce", "wrong_nonce", "unknown_kid", "alg_none", "other_subject", "omit")


class IdPError(OAuth2Error):
    """An OAuth error with a stable `reason` for the stats and, for 401s, a WWW-Authenticate header."""

    def __init__(self, error, description, reason, status_code=400, redirect_uri=None,
                 www_authenticate=None):
        super().__init__(description=description, status_code=status_code, redirect_uri=redirect_uri,
                         error=error)
        self.reason = reason
        self.www_authenticate = www_authenticate

    def get_headers(self):
        headers = super().get_headers()
        if self.www_authenticate:
            headers.append(("WWW-Authenticate", self.www_authenticate))
        return headers


def _safe(text: str, limit: int = 64) -> str:
    """Text fit for an error_description (RFC 6749 §5.2 allows %x20-21 / %x23-5B / %x5D-7E)."""
    return re.sub(r"[^\x20-\x21\x23-\x5b\x5d-\x7e]", "?", text[:limit])


def _log_safe(text: str, limit: int = 100) -> str:
    return "".join(c if "!" <= c <= "~" else f"\\x{ord(c):02x}" if ord(c) < 256
                   else f"\\u{ord(c):04x}" for c in text[:limit])


def _reason(error: OAuth2Error) -> str:
    return getattr(error, "reason", None) or error.error or "oauth_error"


@dataclass(frozen=True)
class User:
    sub: str
    username: str
    email: str
    email_verified: bool
    name: str
    groups: tuple = ()
    hd: str = ""

    def get_user_id(self):
        return self.sub


def sub_for(username: str) -> str:
    """The stable `sub` of a username: 21 digits, like Google's. Tests may compute it too."""
    digest = hashlib.sha256(username.strip().lower().encode()).digest()
    return "1" + str(int.from_bytes(digest[:8], "big")).zfill(20)


def user_from_form(form) -> User:
    username = form.get("username", "").strip()
    email = form.get("email", "").strip() or (username if "@" in username else f"{username}@example.test")
    name = form.get("name", "").strip() or username.split("@")[0].replace(".", " ").title()
    verified = form.get("email_verified", "true").strip().lower() not in ("false", "0", "no", "off")
    groups = tuple(g.strip() for g in form.get("groups", "").split(",") if g.strip())
    return User(sub=sub_for(username), username=username, email=email, email_verified=verified,
                name=name, groups=groups, hd=form.get("hd", "").strip())


@dataclass
class CodeRecord(AuthorizationCodeMixin):
    code: str
    client_id: str
    redirect_uri: str
    scope: str
    user: User
    nonce: str | None
    code_challenge: str | None
    code_challenge_method: str | None
    issued_at: float
    expires_at: float
    redeemed_at: float | None = None
    # Offline access was granted: the token response carries a refresh token.
    offline: bool = False

    def get_redirect_uri(self):
        return self.redirect_uri

    def get_scope(self):
        return self.scope

    def get_nonce(self):
        return self.nonce

    def get_auth_time(self):
        return int(self.issued_at)


@dataclass
class RefreshRecord:
    """A refresh token: bound to the client it was issued to, single use (rotated at every
    refresh), revocable by the test hooks."""
    token: str
    client_id: str
    user: User
    scope: str
    issued_at: float
    used_at: float | None = None
    revoked: bool = False

    def get_scope(self):
        return self.scope

    def check_client(self, client):
        return client.client_id == self.client_id


def offline_granted(scope: str, params) -> bool:
    """Whether an authorization grants offline access: the offline_access scope (OIDC Core §11),
    or Google's access_type=offline — which, like Google for a returning user, yields a refresh
    token only together with prompt=consent."""
    if "offline_access" in (scope or "").split():
        return True
    return params.get("access_type") == "offline" and "consent" in (params.get("prompt") or "").split()


@dataclass
class AccessToken:
    user: User
    scope: str
    client_id: str
    expires_at: float


@dataclass
class IdPConfig:
    issuer: str
    code_ttl: int = 60
    id_token_ttl: int = 3600
    jwks_max_age: int = 3600
    test_hooks: bool = False


def _new_key() -> RSAKey:
    kid = "test-" + secrets.token_hex(8)
    return RSAKey.generate_key(2048, parameters={"kid": kid, "use": "sig", "alg": ID_TOKEN_ALG},
                               private=True)


class Stats:
    """Counters of what reached the IdP; read by tests through GET /_test/stats."""

    def __init__(self):
        self.lock = threading.Lock()
        self.reset()

    def reset(self):
        with self.lock:
            self._reset()

    def bump(self, section: str, key: str):
        with self.lock:
            getattr(self, section)[key] += 1

    def _reset(self):
        self.token = {"requests": 0, "successes": 0, "failures": 0, "forced": 0}
        self.per_client: dict[str, dict] = {}
        self.authorize = {"requests": 0, "codes_issued": 0, "denied": 0, "errors": 0}
        self.endpoints = {name: 0 for name in ENDPOINTS.values()}
        self.endpoints["end_session"] = 0
        self.events: deque = deque(maxlen=MAX_EVENTS)

    def note_end_session(self, event: dict):
        with self.lock:
            self.events.append({"endpoint": "end_session", **event})

    def record_token(self, client_id: str, outcome: str, reason: str | None, error: str | None,
                     status: int, at: float, **extra):
        with self.lock:
            self._record_token(client_id, outcome, reason, error, status, at, **extra)

    def _record_token(self, client_id, outcome, reason, error, status, at, **extra):
        self.token["requests"] += 1
        key = {"success": "successes", "failure": "failures", "forced": "forced"}[outcome]
        self.token[key] += 1
        c = self.per_client.setdefault(client_id, {"requests": 0, "successes": 0, "failures": 0,
                                                   "forced": 0, "reasons": {}})
        c["requests"] += 1
        c[key] += 1
        if reason:
            c["reasons"][reason] = c["reasons"].get(reason, 0) + 1
        self.events.append({"endpoint": "token", "client_id": client_id, "outcome": outcome,
                            "reason": reason, "error": error, "status": status, "at": at, **extra})

    def snapshot(self) -> dict:
        with self.lock:
            return self._snapshot()

    def _snapshot(self) -> dict:
        return {"token": dict(self.token), "clients": copy.deepcopy(self.per_client),
                "authorize": dict(self.authorize), "endpoints": dict(self.endpoints),
                "events": list(self.events)}


class IdPState:
    """All mutable state, behind one lock: the IdP serves each request on its own thread."""

    def __init__(self, config: IdPConfig):
        self.config = config
        self.lock = threading.Lock()
        self.codes: dict[str, CodeRecord] = {}
        self.tokens: dict[str, AccessToken] = {}
        self.refresh_tokens: dict[str, RefreshRecord] = {}
        # sub → {"groups": tuple, "hd": str, "disabled": bool}: what POST /_test/user changed
        # about a user since sign-in; refreshes (and their id_tokens, userinfo) see it.
        self.user_overrides: dict[str, dict] = {}
        self.key = _new_key()
        self.rotations = 0
        self.clock_offset = 0.0
        self.stats = Stats()
        self.modes = {name: "ok" for name in ENDPOINTS.values()}
        self.mode_remaining: dict[str, int | None] = {}
        self.id_token_mode = "ok"
        # Every secret issued or presented since start (GET /_test/secrets): what other
        # programs' logs are searched for. Never reset; bounded per kind.
        self.secrets: dict[str, deque] = {}

    def now(self) -> float:
        return time.time() + self.clock_offset

    def remember_secret(self, kind: str, value):
        if value:
            with self.lock:
                self.secrets.setdefault(kind, deque(maxlen=MAX_REMEMBERED_SECRETS)).append(value)

    # Codes

    def store_code(self, rec: CodeRecord):
        with self.lock:
            horizon = self.now() - CODE_RECORD_RETENTION
            for code in [c for c, r in self.codes.items() if r.expires_at < horizon]:
                del self.codes[code]
            self.codes[rec.code] = rec
        self.remember_secret("code", rec.code)

    def redeem_code(self, code: str, client: RegisteredClient) -> CodeRecord:
        """Consume `code` for `client`, atomically. Any presentation of a known code burns it,
        whatever the outcome: a second presentation always fails."""
        with self.lock:
            rec = self.codes.get(code)
            now = self.now()
            if rec is None:
                raise IdPError("invalid_grant", "Malformed auth code.", "unknown_code")
            if rec.redeemed_at is not None:
                raise IdPError("invalid_grant", "Bad Request", "code_already_redeemed")
            rec.redeemed_at = now
        if now >= rec.expires_at:
            raise IdPError("invalid_grant", "Bad Request", "code_expired")
        if rec.client_id != client.client_id:
            raise IdPError("invalid_grant", "Bad Request", "code_issued_to_another_client")
        return rec

    # Refresh tokens

    def store_refresh_token(self, rec: RefreshRecord):
        with self.lock:
            self.refresh_tokens[rec.token] = rec
        self.remember_secret("refresh_token", rec.token)

    def take_refresh_token(self, token: str, client: RegisteredClient) -> RefreshRecord:
        """Consume `token` for `client`, atomically: of two concurrent refreshes with one token,
        one succeeds. Another client's presentation is refused and does not burn it."""
        refused = "Token has been expired or revoked."   # Google's text for invalid_grant here
        with self.lock:
            rec = self.refresh_tokens.get(token)
            if rec is None:
                raise IdPError("invalid_grant", refused, "unknown_refresh_token")
            if rec.client_id != client.client_id:
                raise IdPError("invalid_grant", refused, "refresh_token_issued_to_another_client")
            if rec.revoked:
                raise IdPError("invalid_grant", refused, "refresh_token_revoked")
            if rec.used_at is not None:
                raise IdPError("invalid_grant", refused, "refresh_token_already_used")
            rec.used_at = self.now()
        return rec

    def current_user(self, user: User) -> User:
        """`user` as the hooks changed it since sign-in; a disabled user has no grant left."""
        with self.lock:
            o = dict(self.user_overrides.get(user.sub, {}))
        if o.get("disabled"):
            raise IdPError("invalid_grant", "Account has been disabled.", "user_disabled")
        changes = {k: o[k] for k in ("groups", "hd") if k in o}
        return replace(user, **changes) if changes else user

    def revoke_refresh_tokens(self, sub: str) -> int:
        with self.lock:
            live = [r for r in self.refresh_tokens.values() if r.user.sub == sub and not r.revoked and r.used_at is None]
            for r in live:
                r.revoked = True
            return len(live)

    def nonce_in_use(self, client_id: str, nonce: str) -> bool:
        with self.lock:
            now = self.now()
            return any(r.client_id == client_id and r.nonce == nonce and r.redeemed_at is None
                       and r.expires_at > now for r in self.codes.values())

    # Keys

    def signing_key(self) -> RSAKey:
        with self.lock:
            return self.key

    def rotate_key(self) -> str:
        key = _new_key()
        with self.lock:
            self.key = key
            self.rotations += 1
        return key.kid

    def jwks(self) -> dict:
        return KeySet([self.signing_key()]).as_dict(private=False)

    # Misbehaviour modes

    def take_mode(self, endpoint: str, only: str | None = None) -> str:
        """The mode in force for `endpoint`, counting one use of it (see "times"). With `only`, a
        mode other than that one is neither returned nor counted ("ok" is returned instead)."""
        with self.lock:
            mode = self.modes.get(endpoint, "ok")
            if only is not None and mode != only:
                return "ok"
            remaining = self.mode_remaining.get(endpoint)
            if mode != "ok" and remaining is not None:
                remaining -= 1
                if remaining <= 0:
                    self.modes[endpoint] = "ok"
                    self.mode_remaining.pop(endpoint, None)
                else:
                    self.mode_remaining[endpoint] = remaining
            return mode


class _Params(OAuth2Payload):
    """The request parameters authlib sees: the query for /authorize, the body for /token, never
    both merged (Flask's request.values would let a query parameter stand in for a body one)."""

    def __init__(self, params):
        self._params = params

    @property
    def data(self):
        return self._params

    @property
    def datalist(self):
        return {k: self._params.getlist(k) for k in self._params}


class IdPRequest(OAuth2Request):
    def __init__(self, flask_request: flask.Request, params):
        super().__init__(method=flask_request.method, uri=flask_request.url,
                         headers=flask_request.headers)
        self.payload = _Params(params)
        self._flask_request = flask_request

    @property
    def args(self):
        return self._flask_request.args

    @property
    def form(self):
        return self.payload.data


def parse_basic(header: str) -> tuple[str, str]:
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "basic" or not value.strip():
        raise IdPError("invalid_client", "Unsupported client authentication scheme.",
                       "unsupported_auth_scheme", 401, www_authenticate='Basic realm="token"')
    try:
        decoded = base64.b64decode(value.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        decoded = ""
    if ":" not in decoded:
        raise IdPError("invalid_client", "Malformed HTTP Basic credentials.",
                       "malformed_basic_credentials", 401, www_authenticate='Basic realm="token"')
    client_id, _, secret = decoded.partition(":")
    # RFC 6749 §2.3.1: both parts are form-urlencoded before Base64.
    return unquote(client_id.replace("+", " ")), unquote(secret.replace("+", " "))


def authenticate_client(request: IdPRequest, query_client) -> RegisteredClient:
    """Strict client authentication for the token endpoint.

    Confidential clients: exactly one of HTTP Basic or client_secret in the body, and only a method
    the client is registered for. Public clients: no secret at all, anywhere (Google answers a
    native client that sends a client_secret with 401 invalid_client "Unauthorized").
    """
    form = request.form
    auth_header = request.headers.get("Authorization")
    basic_id = basic_secret = None
    if auth_header is not None:
        basic_id, basic_secret = parse_basic(auth_header)
    body_id = form.get("client_id")
    if auth_header is not None and "client_secret" in form:
        raise IdPError("invalid_request", "Client credentials were sent in more than one way.",
                       "multiple_client_auth_methods")
    if basic_id is not None and body_id is not None and basic_id != body_id:
        raise IdPError("invalid_request", "client_id differs between the body and the "
                       "Authorization header.", "client_id_conflict")
    client_id = basic_id if basic_id is not None else body_id
    if not client_id:
        raise IdPError("invalid_request", "Could not determine client ID from request.",
                       "missing_client_id")
    www = 'Basic realm="token"' if auth_header is not None else None
    client = query_client(client_id)
    if client is None:
        raise IdPError("invalid_client", "The OAuth client was not found.", "unknown_client", 401,
                       www_authenticate=www)
    if client.is_public:
        if auth_header is not None or "client_secret" in form:
            raise IdPError("invalid_client", "Unauthorized", "public_client_sent_secret", 401,
                           www_authenticate=www)
        method = "none"
    else:
        if auth_header is not None:
            method, secret = "client_secret_basic", basic_secret
        elif "client_secret" in form:
            method, secret = "client_secret_post", form.get("client_secret")
        else:
            raise IdPError("invalid_request", "client_secret is missing.", "missing_client_secret")
        if not client.check_endpoint_auth_method(method, "token"):
            raise IdPError("invalid_client", f"The client is not registered for {method}.",
                           "auth_method_not_allowed", 401, www_authenticate=www)
        if not client.check_client_secret(secret):
            raise IdPError("invalid_client", "Unauthorized", "bad_client_secret", 401,
                           www_authenticate=www)
    request.auth_method = method
    return client


class StrictCodeChallenge(CodeChallenge):
    """PKCE, S256 only, required for public clients and for web clients registered with
    require_pkce. authlib's own CodeChallenge(required=True) only insists on a verifier at the token
    endpoint; it lets a public client start a flow with no code_challenge at all, and it accepts
    'plain'. Both are refused here, at the authorization endpoint."""

    SUPPORTED_CODE_CHALLENGE_METHOD = ["S256"]

    def __call__(self, grant):
        # The authorization-side check runs from AuthorizeChecks, in a fixed order.
        grant.register_hook("after_validate_token_request", self.validate_code_verifier)

    def validate_code_challenge(self, grant, redirect_uri):
        params = grant.request.payload
        client: RegisteredClient = grant.request.client
        challenge = params.data.get("code_challenge")
        method = params.data.get("code_challenge_method")
        for name in ("code_challenge", "code_challenge_method"):
            if len(params.datalist.get(name, [])) > 1:
                raise IdPError("invalid_request", f"Multiple '{name}' in request.",
                               "duplicate_parameter", redirect_uri=redirect_uri)
        if challenge is None and method is None:
            if client.is_public or client.require_pkce:
                raise IdPError("invalid_request", "Missing required parameter: code_challenge",
                               "missing_code_challenge", redirect_uri=redirect_uri)
            return
        if challenge is None:
            raise IdPError("invalid_request", "Missing required parameter: code_challenge",
                           "missing_code_challenge", redirect_uri=redirect_uri)
        if method != "S256":
            # An absent method means "plain" (RFC 7636 §4.3), which is refused like any other.
            raise IdPError("invalid_request", "Invalid code_challenge_method: only S256 is supported.",
                           "unsupported_code_challenge_method", redirect_uri=redirect_uri)
        if not _S256_CHALLENGE.match(challenge):
            raise IdPError("invalid_request", "Invalid code_challenge.", "malformed_code_challenge",
                           redirect_uri=redirect_uri)

    def validate_code_verifier(self, grant, result):
        rec: CodeRecord = grant.request.authorization_code
        client: RegisteredClient = grant.request.client
        verifier = grant.request.form.get("code_verifier")
        if rec.code_challenge is None:
            if client.is_public:   # cannot happen (refused at /authorize); kept as a backstop
                raise IdPError("invalid_grant", "Missing code challenge.", "missing_code_challenge")
            if verifier is not None:
                raise IdPError("invalid_grant", "code_verifier or verifier is not needed.",
                               "unexpected_code_verifier")
            return
        if not verifier:
            raise IdPError("invalid_grant", "Missing code verifier.", "missing_code_verifier")
        if not _CODE_VERIFIER.match(verifier):
            raise IdPError("invalid_grant", "Invalid code verifier.", "malformed_code_verifier")
        if not secrets.compare_digest(create_s256_code_challenge(verifier), rec.code_challenge):
            raise IdPError("invalid_grant", "Invalid code verifier.", "pkce_mismatch")


class StrictOpenIDCode(OpenIDCode):
    def __init__(self, state: IdPState):
        super().__init__(require_nonce=False)
        self.state = state

    def exists_nonce(self, nonce, request):
        # A nonce still bound to a live, unredeemed code of the same client is a replay.
        return self.state.nonce_in_use(request.payload.client_id, nonce)

    def get_client_algorithm(self, client):
        return ID_TOKEN_ALG

    def get_encode_header(self, client):
        # Snapshot the key once per request so that the kid and the signature always agree,
        # even if /_test/rotate-keys runs concurrently.
        flask.g.signing_key = self.state.signing_key()
        return {"alg": ID_TOKEN_ALG, "kid": flask.g.signing_key.kid, "typ": "JWT"}

    def resolve_client_private_key(self, client):
        return flask.g.signing_key

    def get_client_claims(self, client):
        now = int(self.state.now())
        cid = client.get_client_id()
        return {"iss": self.state.config.issuer, "aud": cid, "azp": cid, "iat": now,
                "exp": now + self.state.config.id_token_ttl}

    def generate_user_info(self, user: User, scope):
        return user_claims(user, scope)


def user_claims(user: User, scope: str) -> dict:
    scopes = set(scope.split())
    claims = {"sub": user.sub}
    if "email" in scopes:
        claims.update(email=user.email, email_verified=user.email_verified)
    if "profile" in scopes:
        claims["name"] = user.name
    # Like Keycloak, Okta and Azure AD when asked: the user's groups in the id_token; and like
    # Google for a Workspace account: its domain in `hd` (a consumer account has none).
    if user.groups:
        claims["groups"] = list(user.groups)
        claims["realm_access"] = {"roles": list(user.groups)}
    if user.hd:
        claims["hd"] = user.hd
    return claims


class StrictCodeGrant(grants.AuthorizationCodeGrant):
    TOKEN_ENDPOINT_AUTH_METHODS = ["client_secret_basic", "client_secret_post", "none"]
    AUTHORIZATION_CODE_LENGTH = 48
    state: IdPState   # set on the subclass made by create_app

    @staticmethod
    def validate_authorization_redirect_uri(request, client):
        redirect_uri = request.payload.redirect_uri
        if not redirect_uri:
            raise IdPError("invalid_request", "Missing required parameter: redirect_uri",
                           "missing_redirect_uri")
        if len(request.payload.datalist.get("redirect_uri", [])) > 1:
            raise IdPError("invalid_request", "Multiple 'redirect_uri' in request.",
                           "duplicate_parameter")
        if not client.check_redirect_uri(redirect_uri):
            raise IdPError("redirect_uri_mismatch", "The redirect_uri is not registered for this "
                           "client.", "redirect_uri_not_registered")
        return redirect_uri

    def authenticate_token_endpoint_client(self):
        client = authenticate_client(self.request, self.server.query_client)
        self.server.send_signal("after_authenticate_client", client=client, grant=self)
        return client

    def save_authorization_code(self, code, request):
        now = self.state.now()
        data = request.payload.data
        self.state.store_code(CodeRecord(
            code=code, client_id=request.client.client_id,
            redirect_uri=request.payload.redirect_uri, scope=request.scope, user=request.user,
            nonce=data.get("nonce"), code_challenge=data.get("code_challenge"),
            code_challenge_method=data.get("code_challenge_method"),
            issued_at=now, expires_at=now + self.state.config.code_ttl,
            offline=offline_granted(request.scope, data),
        ))

    def query_authorization_code(self, code, client):
        rec = self.state.redeem_code(code, client)
        # Checked here, after the code is burnt, so a wrong redirect_uri also consumes the code;
        # authlib's own comparison afterwards then always passes.
        presented = self.request.payload.redirect_uri
        if presented is None:
            raise IdPError("invalid_request", "Missing parameter: redirect_uri",
                           "missing_redirect_uri")
        if presented != rec.redirect_uri:
            raise IdPError("redirect_uri_mismatch", "Bad Request", "redirect_uri_mismatch")
        return rec

    def delete_authorization_code(self, authorization_code):
        pass   # already consumed by redeem_code, before any other check

    def authenticate_user(self, authorization_code):
        return authorization_code.user


class StrictRefreshTokenGrant(grants.RefreshTokenGrant):
    """RFC 6749 §6, strict: the same client authentication as the code grant (a public client
    sends only its client_id), the token bound to its client and single use — every refresh
    rotates it, and the old one is then invalid_grant. The user is looked up again (test hooks
    may have changed their groups or disabled them). A new id_token comes with the response when
    the grant has `openid` (as Google does), without a nonce (OIDC Core §12.2)."""

    TOKEN_ENDPOINT_AUTH_METHODS = ["client_secret_basic", "client_secret_post", "none"]
    INCLUDE_NEW_REFRESH_TOKEN = True
    state: IdPState   # set on the subclass made by create_app

    def authenticate_token_endpoint_client(self):
        client = authenticate_client(self.request, self.server.query_client)
        self.server.send_signal("after_authenticate_client", client=client, grant=self)
        return client

    def authenticate_refresh_token(self, refresh_token):
        return self.state.take_refresh_token(refresh_token, self.request.client)

    def authenticate_user(self, refresh_token):
        return self.state.current_user(refresh_token.user)

    def revoke_old_credential(self, refresh_token):
        pass   # already consumed by take_refresh_token, before the new one was issued


class AuthorizeChecks:
    """Authorization-request checks beyond authlib's, in one hook so their order is fixed (authlib
    keeps the hooks of one event in a set)."""

    def __init__(self, pkce: StrictCodeChallenge):
        self.pkce = pkce

    def __call__(self, grant):
        grant.register_hook("after_validate_authorization_request_payload", self.check)

    def check(self, grant, redirect_uri):
        params = grant.request.payload
        client: RegisteredClient = grant.request.client
        for name in ("nonce", "response_mode", "prompt", "login_hint", "access_type"):
            if len(params.datalist.get(name, [])) > 1:
                raise IdPError("invalid_request", f"Multiple '{name}' in request.",
                               "duplicate_parameter", redirect_uri=redirect_uri)
        scope = params.scope
        if not scope or not scope.split():
            raise IdPError("invalid_request", "Missing required parameter: scope", "missing_scope",
                           redirect_uri=redirect_uri)
        if any(s not in client.scopes for s in scope.split()):
            raise IdPError("invalid_scope", "Some requested scopes were invalid.", "invalid_scope",
                           redirect_uri=redirect_uri)
        if params.data.get("access_type", "online") not in ("online", "offline"):
            # Google's values; anything else is refused as Google does.
            raise IdPError("invalid_request", "Invalid access_type: must be online or offline.",
                           "invalid_access_type", redirect_uri=redirect_uri)
        if params.data.get("response_mode", "query") != "query":
            raise IdPError("invalid_request", "Only response_mode=query is supported.",
                           "unsupported_response_mode", redirect_uri=redirect_uri)
        for name in ("request", "request_uri"):
            if name in params.data:
                raise IdPError(f"{name}_not_supported", f"The '{name}' parameter is not supported.",
                               f"{name}_not_supported", redirect_uri=redirect_uri)
        self.pkce.validate_code_challenge(grant, redirect_uri)


# ---------------------------------------------------------------------------------------------
# The Flask application

_PAGE_HEADERS = {"Cache-Control": "no-store", "Referrer-Policy": "no-referrer",
                 "X-Frame-Options": "DENY",
                 # No form-action: Chromium applies it to the redirect that follows the POST, which
                 # goes to the client's redirect_uri (another origin, or a custom scheme).
                 "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; "
                 "frame-ancestors 'none'"}

_LOGIN_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Sign in - strict test IdP</title>
<style>body{{font-family:sans-serif;max-width:32rem;margin:2rem auto}}label{{display:block;margin:.6rem 0}}
input,select{{width:100%;padding:.3rem}}button{{margin:.8rem .5rem 0 0;padding:.4rem 1rem}}</style></head>
<body><h1>Sign in</h1>
<p>Client <code id="client-id">{client_id}</code> asks for <code id="scope">{scope}</code>.<br>
You will be sent back to <code id="redirect-uri">{redirect_uri}</code>.</p>
{problem}<form method="post" id="login">
<label>Username <input type="text" name="username" id="username" required autofocus
 autocomplete="username" value="{username}"></label>
<label>Display name (optional) <input type="text" name="name" id="name"></label>
<label>Email (optional; default: the username if it is an email, else username@example.test)
 <input type="email" name="email" id="email"></label>
<label>Email verified <select name="email_verified" id="email_verified">
<option value="true" selected>true</option><option value="false">false</option></select></label>
<label>Groups (optional, comma-separated) <input type="text" name="groups" id="groups"></label>
<label>Workspace domain, the <code>hd</code> claim (optional) <input type="text" name="hd" id="hd"></label>
<button type="submit" name="action" value="approve" id="approve">Sign in</button>
<button type="submit" name="action" value="deny" id="deny" formnovalidate>Deny</button>
</form></body></html>
"""

_ERROR_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Error - strict test IdP</title></head>
<body><h1>Error {status}: <span id="error">{error}</span></h1>
<p id="error-description">{description}</p></body></html>
"""


def create_app(config: IdPConfig, clients: dict[str, RegisteredClient]):
    state = IdPState(config)
    app = flask.Flask(__name__)
    app.config["MAX_CONTENT_LENGTH"] = 64 * 1024
    app.config["OAUTH2_TOKEN_EXPIRES_IN"] = {"authorization_code": ACCESS_TOKEN_TTL,
                                             "refresh_token": ACCESS_TOKEN_TTL}
    # authlib's generator; whether a response keeps the token is decided in save_token.
    app.config["OAUTH2_REFRESH_TOKEN_GENERATOR"] = True
    app.config["OAUTH2_SCOPES_SUPPORTED"] = list(SUPPORTED_SCOPES)
    prefix = urlsplit(config.issuer).path.rstrip("/")

    def save_token(token, request):
        # A refresh token only for offline access (the code grant's record says), and always a
        # rotated one for a refresh.
        code = getattr(request, "authorization_code", None)
        refreshing = getattr(request, "refresh_token", None) is not None
        if "refresh_token" in token and not (refreshing or (code is not None and code.offline)):
            del token["refresh_token"]
        if "refresh_token" in token:
            state.store_refresh_token(RefreshRecord(
                token=token["refresh_token"], client_id=request.client.client_id, user=request.user,
                scope=token.get("scope", ""), issued_at=state.now()))
        with state.lock:
            now = state.now()
            for t in [t for t, v in state.tokens.items() if v.expires_at < now]:
                del state.tokens[t]
            state.tokens[token["access_token"]] = AccessToken(
                user=request.user, scope=token.get("scope", ""),
                client_id=request.client.client_id, expires_at=now + token["expires_in"])

    class IdPAuthorizationServer(AuthorizationServer):
        def create_oauth2_request(self, request):
            if isinstance(request, OAuth2Request):
                return request
            raise RuntimeError("requests are built by the views")

    server = IdPAuthorizationServer(app, query_client=clients.get, save_token=save_token)
    grant_cls = type("Grant", (StrictCodeGrant,), {"state": state})
    pkce = StrictCodeChallenge()
    server.register_grant(grant_cls, [pkce, AuthorizeChecks(pkce), StrictOpenIDCode(state)])
    server.register_grant(type("RefreshGrant", (StrictRefreshTokenGrant,), {"state": state}))

    def log_note(**items):
        # Values can come from the request (client_id): escaped, so one request stays one line.
        flask.request.environ["idp.log"] = " ".join(
            f"{k}={_log_safe(str(v))}" for k, v in items.items() if v is not None)

    def json_response(body, status=200, headers=None):
        resp = flask.Response(json.dumps(body), status=status, mimetype="application/json")
        for k, v in (headers or {}).items():
            resp.headers[k] = v
        return resp

    def oauth_error_response(error: OAuth2Error):
        status, body, headers = error()
        resp = flask.Response(body if isinstance(body, str) else json.dumps(body), status=status)
        for k, v in headers:
            resp.headers[k] = v
        return resp

    def error_page(error: OAuth2Error):
        status = error.status_code or 400
        body = _ERROR_PAGE.format(status=status, error=escape(error.error or "error"),
                                  description=escape(error.description or ""))
        return flask.Response(body, status=status, mimetype="text/html",
                              headers={**_PAGE_HEADERS, "X-OAuth-Error": error.error or "error"})

    def apply_mode(endpoint: str):
        """The misbehaviour set with POST /_test/mode, or None to answer normally. ('close' is
        applied by the HTTP server before the request reaches here.)"""
        mode = state.take_mode(endpoint)
        flask.g.mode = mode
        if mode.startswith("slow:"):
            time.sleep(int(mode[5:]) / 1000)
            return None
        if mode == "500":
            return json_response({"error": "server_error", "error_description": "test hook"}, 500)
        if mode == "garbage":
            return flask.Response(b"<html>\x00not json{{", status=200, mimetype="application/json")
        return None

    # -- discovery and keys ---------------------------------------------------------------------

    @app.get(prefix + "/.well-known/openid-configuration")
    def discovery():
        state.stats.bump("endpoints", "discovery")
        forced = apply_mode("discovery")
        if forced is not None:
            return forced
        iss = config.issuer.rstrip("/")
        return json_response({
            "issuer": config.issuer,
            "authorization_endpoint": iss + "/authorize",
            "token_endpoint": iss + "/token",
            "userinfo_endpoint": iss + "/userinfo",
            "jwks_uri": iss + "/jwks",
            "end_session_endpoint": iss + "/end_session",
            "response_types_supported": ["code"],
            "response_modes_supported": ["query"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": [ID_TOKEN_ALG],
            "scopes_supported": list(SUPPORTED_SCOPES),
            "token_endpoint_auth_methods_supported": ["client_secret_post", "client_secret_basic",
                                                      "none"],
            "code_challenge_methods_supported": ["S256"],
            "claims_supported": ["aud", "azp", "email", "email_verified", "exp", "iat", "iss",
                                 "name", "nonce", "sub", "auth_time", "at_hash"],
        }, headers={"Cache-Control": "public, max-age=3600"})

    @app.get(prefix + "/jwks")
    def jwks():
        state.stats.bump("endpoints", "jwks")
        forced = apply_mode("jwks")
        if forced is not None:
            return forced
        return json_response(state.jwks(),
                             headers={"Cache-Control": f"public, max-age={config.jwks_max_age}"})

    # -- RP-initiated logout (OpenID Connect RP-Initiated Logout 1.0) ----------------------------

    @app.get(prefix + "/end_session")
    def end_session():
        """Strict like the providers that implement it: the client must be known (client_id, or
        the aud of a valid id_token_hint), an id_token_hint must be one this IdP signed for that
        client, and post_logout_redirect_uri must be registered for it, exactly."""
        state.stats.bump("endpoints", "end_session")
        args = flask.request.args
        client_id, hint = args.get("client_id"), args.get("id_token_hint")
        hint_aud = None
        if hint:
            try:
                token = jwt.decode(hint, KeySet([state.signing_key()]), algorithms=[ID_TOKEN_ALG])
            except Exception:  # noqa: BLE001 - any decoding failure is a bad hint
                return _end_session_refused("id_token_hint is not a token this IdP issued")
            if token.claims.get("iss") != config.issuer:
                return _end_session_refused("id_token_hint is for another issuer")
            hint_aud = token.claims.get("aud")
            client_id = client_id or hint_aud
        client = clients.get(client_id or "")
        if client is None:
            return _end_session_refused("unknown client")
        if hint and hint_aud != client.client_id:
            return _end_session_refused("id_token_hint was issued to another client")
        target = args.get("post_logout_redirect_uri")
        state.stats.note_end_session({"client_id": client.client_id, "hint": bool(hint),
                             "post_logout_redirect_uri": target})
        if target is None:
            return flask.Response("Signed out.\n", 200, {"Content-Type": "text/plain"})
        if target not in client.post_logout_redirect_uris:
            return _end_session_refused("post_logout_redirect_uri is not registered")
        suffix = ("&" if "?" in target else "?") + "state=" + quote(args["state"], safe="") if args.get("state") else ""
        return flask.redirect(target + suffix, code=302)

    def _end_session_refused(reason):
        state.stats.note_end_session({"refused": reason})
        return flask.Response(f"end_session refused: {reason}\n", 400, {"Content-Type": "text/plain", "X-OAuth-Error": reason})

    # -- authorization endpoint -----------------------------------------------------------------

    @app.route(prefix + "/authorize", methods=["GET", "POST"])
    def authorize():
        state.stats.bump("authorize", "requests")
        req = IdPRequest(flask.request, flask.request.args)
        log_note(client=req.payload.client_id)
        try:
            check_response_type(req)
            grant = server.get_consent_grant(req)
        except OAuth2Error as error:
            state.stats.bump("authorize", "errors")
            log_note(client=req.payload.client_id, outcome="refused", reason=_reason(error))
            if error.redirect_uri:
                return oauth_error_response(error)   # 302 back to the validated redirect_uri
            return error_page(error)                 # never redirect to an unvalidated URI

        client = grant.request.client
        if flask.request.method == "GET":
            return login_page(client, grant)

        form = flask.request.form
        action = form.get("action", "approve")
        if action == "deny":
            state.stats.bump("authorize", "denied")
            log_note(client=client.client_id, outcome="denied")
            error = AccessDeniedError(redirect_uri=grant.redirect_uri, state=req.payload.state)
            return oauth_error_response(error)
        if action != "approve":
            return login_page(client, grant, problem="Unknown action.", status=400)
        if not form.get("username", "").strip():
            return login_page(client, grant, problem="Username is required.", status=400)
        user = user_from_form(form)
        status, _, headers = grant.create_authorization_response(grant.redirect_uri, user)
        state.stats.bump("authorize", "codes_issued")
        log_note(client=client.client_id, outcome="code_issued")
        resp = flask.Response("", status=status, headers=_PAGE_HEADERS)
        for k, v in headers:
            resp.headers[k] = v
        return resp

    def check_response_type(req: IdPRequest):
        # Before authlib: its error for this case quotes the request's response_type, and a quote
        # character in it would make the error itself raise (RFC 6749 limits error_description).
        response_type = req.payload.data.get("response_type")
        if response_type == "code":
            return
        client = clients.get(req.payload.client_id or "")
        redirect_uri = req.payload.redirect_uri
        valid = client is not None and redirect_uri and client.check_redirect_uri(redirect_uri)
        error = IdPError("unsupported_response_type", "Only response_type=code is supported.",
                         "unsupported_response_type", redirect_uri=redirect_uri if valid else None)
        error.state = req.payload.state
        raise error

    def login_page(client, grant, problem=None, status=200):
        body = _LOGIN_PAGE.format(
            client_id=escape(client.client_id), scope=escape(grant.request.scope or ""),
            redirect_uri=escape(grant.redirect_uri), username=escape(flask.request.form.get(
                "username", "") if flask.request.method == "POST" else ""),
            problem=f'<p id="problem" role="alert">{escape(problem)}</p>' if problem else "")
        return flask.Response(body, status=status, mimetype="text/html", headers=_PAGE_HEADERS)

    # -- token endpoint -------------------------------------------------------------------------

    @app.post(prefix + "/token")
    def token():
        claimed = _claimed_client_id(flask.request)
        state.remember_secret("authorization", flask.request.headers.get("Authorization"))
        if flask.request.mimetype == "application/x-www-form-urlencoded":
            for name in ("code", "code_verifier", "client_secret", "refresh_token"):
                state.remember_secret(name, flask.request.form.get(name))
        forced = apply_mode("token")
        if forced is not None:
            state.stats.record_token(claimed, "forced", f"mode:{flask.g.mode}", None,
                                     forced.status_code, state.now(), grant=_grant_type(flask.request))
            log_note(client=claimed, outcome="forced", mode=flask.g.mode)
            return forced
        try:
            req = _token_request(flask.request)
            grant = server.get_token_grant(req)
            grant.validate_token_request()
            status, body, headers = grant.create_token_response()
            if isinstance(grant, StrictRefreshTokenGrant):
                body = with_refreshed_id_token(body, grant.request)
            body = tamper_id_token(body, grant.request)
        except OAuth2Error as error:
            reason = _reason(error)
            resp = oauth_error_response(error)
            state.stats.record_token(claimed, "failure", reason, error.error, resp.status_code,
                                     state.now(), mode=flask.g.mode, grant=_grant_type(flask.request))
            log_note(client=claimed, outcome="failure", reason=reason, error=error.error)
            return resp
        for name in ("access_token", "id_token", "refresh_token"):
            state.remember_secret(name, body.get(name))
        state.stats.record_token(claimed, "success", None, None, status, state.now(),
                                 mode=flask.g.mode, id_token_mode=state.id_token_mode,
                                 grant=_grant_type(flask.request))
        log_note(client=claimed, outcome="success")
        return json_response(body, status, headers=dict(headers))

    def with_refreshed_id_token(body: dict, request) -> dict:
        if "openid" not in (body.get("scope") or "").split():
            return body
        key = state.signing_key()
        now = int(state.now())
        cid = request.client.client_id
        claims = {"iss": config.issuer, "aud": cid, "azp": cid, "iat": now,
                  "exp": now + config.id_token_ttl, **user_claims(request.user, body.get("scope", ""))}
        body["id_token"] = jwt.encode({"alg": ID_TOKEN_ALG, "kid": key.kid, "typ": "JWT"}, claims, key,
                                      [ID_TOKEN_ALG])
        return body

    def tamper_id_token(body: dict, request) -> dict:
        mode = state.id_token_mode
        if mode == "ok" or "id_token" not in body:
            return body
        if mode == "omit":
            del body["id_token"]
            return body
        header_b64, payload_b64, _ = body["id_token"].split(".")
        claims = json.loads(base64.urlsafe_b64decode(payload_b64 + "=" * (-len(payload_b64) % 4)))
        key = state.signing_key()
        header = {"alg": ID_TOKEN_ALG, "kid": key.kid, "typ": "JWT"}
        now = int(state.now())
        if mode == "wrong_issuer":
            claims["iss"] = config.issuer.rstrip("/") + "/other"
        elif mode == "wrong_audience":
            claims["aud"] = claims["azp"] = "someone-else.apps.example"
        elif mode == "expired":
            claims["iat"], claims["exp"] = now - 7200, now - 3600
        elif mode == "issued_in_future":
            claims["iat"], claims["exp"] = now + 3600, now + 7200
        elif mode == "other_subject":
            claims["sub"] = sub_for("someone-else@example.test")
        elif mode == "missing_nonce":
            claims.pop("nonce", None)
        elif mode == "wrong_nonce":
            claims["nonce"] = "not-the-nonce-" + secrets.token_hex(4)
        elif mode == "unknown_kid":
            key = _new_key()   # a key that is not (and never was) in the JWKS
            header["kid"] = key.kid
        if mode == "alg_none":
            enc = lambda d: base64.urlsafe_b64encode(json.dumps(d).encode()).rstrip(b"=").decode()
            body["id_token"] = f"{enc({'alg': 'none', 'typ': 'JWT'})}.{enc(claims)}."
        else:
            token = jwt.encode(header, claims, key, [ID_TOKEN_ALG])
            if mode == "bad_signature":
                h, p, s = token.split(".")
                sig = bytearray(base64.urlsafe_b64decode(s + "=" * (-len(s) % 4)))
                sig[len(sig) // 2] ^= 0x01
                token = f"{h}.{p}.{base64.urlsafe_b64encode(bytes(sig)).rstrip(b'=').decode()}"
            body["id_token"] = token
        return body

    # -- userinfo -------------------------------------------------------------------------------

    @app.route(prefix + "/userinfo", methods=["GET", "POST"])
    def userinfo():
        state.stats.bump("endpoints", "userinfo")
        forced = apply_mode("userinfo")
        if forced is not None:
            return forced
        header = flask.request.headers.get("Authorization", "")
        scheme, _, value = header.partition(" ")
        with state.lock:
            tok = state.tokens.get(value.strip()) if scheme.lower() == "bearer" else None
            if tok is not None and tok.expires_at <= state.now():
                tok = None
        if tok is None:
            return json_response({"error": "invalid_token", "error_description":
                                  "Invalid Credentials"}, 401,
                                 headers={"WWW-Authenticate": 'Bearer error="invalid_token"'})
        return json_response(user_claims(tok.user, tok.scope), headers={"Cache-Control": "no-store"})

    # -- test hooks -----------------------------------------------------------------------------

    if config.test_hooks:
        register_test_hooks(app, state)

    # -- errors: always an OAuth-style JSON body, never a stack trace page --------------------------

    @app.errorhandler(404)
    def not_found(_):
        return json_response({"error": "not_found", "error_description": "No such endpoint."}, 404)

    @app.errorhandler(405)
    def method_not_allowed(e):
        return json_response({"error": "invalid_request", "error_description":
                              "Method not allowed."}, 405,
                             headers={"Allow": ", ".join(e.valid_methods or [])})

    @app.errorhandler(413)
    def too_large(_):
        return json_response({"error": "invalid_request", "error_description":
                              "Request too large."}, 413)

    @app.errorhandler(400)
    def bad_request(_):
        return json_response({"error": "invalid_request", "error_description":
                              "Malformed request."}, 400)

    @app.errorhandler(Exception)
    def internal_error(e):
        code = getattr(e, "code", None)
        if isinstance(code, int) and 400 <= code < 600:
            return json_response({"error": "invalid_request" if code < 500 else "server_error",
                                  "error_description": str(getattr(e, "name", "error"))}, code)
        traceback.print_exc()
        return json_response({"error": "server_error", "error_description":
                              "Internal error in the test IdP."}, 500)

    @app.before_request
    def count_mode_default():
        flask.g.mode = "ok"

    app.idp_state = state
    return app


def _grant_type(request: flask.Request) -> str | None:
    """The grant_type a token request names, for the stats (any value, as sent)."""
    if request.mimetype == "application/x-www-form-urlencoded":
        return _log_safe(request.form.get("grant_type") or "", 40) or None
    return None


def _claimed_client_id(request: flask.Request) -> str:
    """Who the token request says it is, for the stats only (never for authentication)."""
    header = request.headers.get("Authorization")
    if header:
        try:
            return parse_basic(header)[0] or "<none>"
        except IdPError:
            return "<malformed>"
    if request.mimetype == "application/x-www-form-urlencoded":
        return request.form.get("client_id") or "<none>"
    return "<none>"


def _token_request(request: flask.Request) -> IdPRequest:
    """Checks on the token request's shape, made before authlib sees it."""
    if request.args:
        raise IdPError("invalid_request", "Token request parameters must be sent in the body.",
                       "parameters_in_query")
    if request.mimetype != "application/x-www-form-urlencoded":
        raise IdPError("invalid_request", "Content-Type must be application/x-www-form-urlencoded.",
                       "bad_content_type")
    form = request.form
    for name in form:
        if len(form.getlist(name)) > 1:
            raise IdPError("invalid_request", f"Multiple '{_safe(name)}' in request.",
                           "duplicate_parameter")
    grant_type = form.get("grant_type")
    if not grant_type:
        raise IdPError("invalid_request", "Missing required parameter: grant_type",
                       "missing_grant_type")
    if grant_type not in ("authorization_code", "refresh_token"):
        raise IdPError("unsupported_grant_type", "Invalid grant_type: " + _safe(grant_type),
                       "unsupported_grant_type")
    if grant_type == "authorization_code" and not form.get("code"):
        raise IdPError("invalid_request", "Missing required parameter: code", "missing_code")
    if grant_type == "refresh_token":
        if not form.get("refresh_token"):
            raise IdPError("invalid_request", "Missing required parameter: refresh_token",
                           "missing_refresh_token")
        for name in ("code", "code_verifier", "redirect_uri"):
            if name in form:   # not parameters of a refresh (RFC 6749 §6)
                raise IdPError("invalid_request", f"'{name}' is not a parameter of a refresh.",
                               "unexpected_parameter")
    return IdPRequest(request, form)


def register_test_hooks(app: flask.Flask, state: IdPState):
    """Endpoints that exist only with --test-hooks; see README.md."""

    def body_json() -> dict:
        data = flask.request.get_json(silent=True)
        return data if isinstance(data, dict) else {}

    def modes_view():
        with state.lock:
            return {**state.modes, "id_token": state.id_token_mode,
                    "remaining": dict(state.mode_remaining)}

    @app.get("/_test/stats")
    def stats():
        snap = state.stats.snapshot()
        with state.lock:
            snap["keys"] = {"kid": state.key.kid, "rotations": state.rotations}
            snap["clock_offset"] = state.clock_offset
        snap["modes"] = modes_view()
        return flask.jsonify(snap)

    @app.get("/_test/secrets")
    def issued_secrets():
        with state.lock:
            return flask.jsonify({kind: list(values) for kind, values in state.secrets.items()})

    @app.post("/_test/reset-stats")
    def reset_stats():
        state.stats.reset()
        return flask.jsonify({"ok": True})

    @app.post("/_test/rotate-keys")
    def rotate_keys():
        return flask.jsonify({"kid": state.rotate_key()})

    @app.post("/_test/mode")
    def set_mode():
        data = body_json()
        times = data.get("times")
        if times is not None and (not isinstance(times, int) or isinstance(times, bool) or times < 1):
            return _bad("times must be a positive integer")
        updates = {}
        for name, mode in data.items():
            if name == "times":
                continue
            if name == "id_token":
                if mode not in ID_TOKEN_MODES:
                    return _bad(f"id_token mode must be one of {list(ID_TOKEN_MODES)}")
                updates[name] = mode
                continue
            if name not in state.modes:
                return _bad(f"unknown endpoint {name!r}; one of {sorted(state.modes)} or id_token")
            if not (mode in MODES or (isinstance(mode, str) and re.fullmatch(r"slow:\d{1,6}", mode))):
                return _bad(f"mode must be one of {list(MODES)} or slow:MS")
            updates[name] = mode
        if not updates:
            return _bad("nothing to set")
        with state.lock:
            for name, mode in updates.items():
                if name == "id_token":
                    state.id_token_mode = mode
                    continue
                state.modes[name] = mode
                if times is not None and mode != "ok":
                    state.mode_remaining[name] = times
                else:
                    state.mode_remaining.pop(name, None)
        return flask.jsonify(modes_view())

    @app.post("/_test/user")
    def change_user():
        """{"username", "groups"?: [..], "hd"?: str, "disabled"?: bool}: what refreshes of that
        user's grants see from now on (a sign-in still takes its login form's values)."""
        data = body_json()
        username = data.get("username")
        if not isinstance(username, str) or not username.strip():
            return _bad("username is required")
        change = {}
        if "groups" in data:
            if not isinstance(data["groups"], list) or not all(isinstance(g, str) for g in data["groups"]):
                return _bad("groups must be a list of strings")
            change["groups"] = tuple(data["groups"])
        if "hd" in data:
            if not isinstance(data["hd"], str):
                return _bad("hd must be a string")
            change["hd"] = data["hd"]
        if "disabled" in data:
            if not isinstance(data["disabled"], bool):
                return _bad("disabled must be true or false")
            change["disabled"] = data["disabled"]
        sub = sub_for(username)
        with state.lock:
            state.user_overrides.setdefault(sub, {}).update(change)
            now = dict(state.user_overrides[sub])
        return flask.jsonify({"sub": sub, **{k: list(v) if isinstance(v, tuple) else v for k, v in now.items()}})

    @app.post("/_test/revoke")
    def revoke():
        """{"username"}: every live refresh token of that user becomes invalid_grant."""
        username = body_json().get("username")
        if not isinstance(username, str) or not username.strip():
            return _bad("username is required")
        return flask.jsonify({"revoked": state.revoke_refresh_tokens(sub_for(username))})

    @app.post("/_test/reset-users")
    def reset_users():
        with state.lock:
            state.user_overrides.clear()
        return flask.jsonify({"ok": True})

    @app.post("/_test/clock")
    def set_clock():
        offset = body_json().get("offset_seconds")
        if not isinstance(offset, (int, float)) or isinstance(offset, bool):
            return _bad("offset_seconds must be a number")
        with state.lock:
            state.clock_offset = float(offset)
        return flask.jsonify({"offset_seconds": state.clock_offset})

    def _bad(msg):
        return flask.Response(json.dumps({"error": "invalid_request", "error_description": msg}),
                              400, mimetype="application/json")
