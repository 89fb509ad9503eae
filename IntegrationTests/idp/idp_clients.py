"""Registered OAuth clients of the strict test IdP, loaded from a JSON file.

There is no dynamic registration and no "allow any client" fallback: a client_id that is not in the
file is unknown everywhere. The loader collects every problem in the file before failing, so a bad
file is fixed in one go.
"""

from __future__ import annotations

import hmac
import json
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from authlib.oauth2.rfc6749 import ClientMixin

# offline_access (OIDC Core §11): the grant may be refreshed; a refresh token is issued only then
# (or for a Google-style access_type=offline with prompt=consent).
SUPPORTED_SCOPES = ("openid", "email", "profile", "offline_access")
CONFIDENTIAL_AUTH_METHODS = ("client_secret_post", "client_secret_basic")

# RFC 8252 §7.1: a private-use URI scheme for a native app is a reverse domain name (it has a dot).
_PRIVATE_SCHEME = re.compile(r"^[a-z][a-z0-9+\-]*(\.[a-z0-9+\-]+)+$")
_LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")
_KNOWN_KEYS = {
    "client_id", "type", "platform", "client_secret", "redirect_uris",
    "token_endpoint_auth_method", "scopes", "require_pkce", "post_logout_redirect_uris",
}


class ClientConfigError(ValueError):
    """The clients file is invalid; the message lists every problem, one per line."""


@dataclass(frozen=True)
class RegisteredClient(ClientMixin):
    client_id: str
    kind: str                      # "web" (confidential) or "native" (public)
    platform: str | None           # "ios" / "android" for native clients; informative only
    secret: str | None
    redirect_uris: tuple[str, ...]
    auth_methods: tuple[str, ...]  # ("none",) for native clients
    scopes: tuple[str, ...]
    require_pkce: bool
    post_logout_redirect_uris: tuple = ()   # RP-initiated logout: where /end_session may send the browser

    @property
    def is_public(self) -> bool:
        return self.secret is None

    # authlib's ClientMixin protocol

    def get_client_id(self):
        return self.client_id

    def get_default_redirect_uri(self):
        # No default: the authorize request must name its redirect_uri (as Google requires).
        return None

    def get_allowed_scope(self, scope):
        # Scope strictness is enforced by a hook that can refuse; here the request's scope is kept.
        return " ".join(scope.split()) if scope else ""

    def check_redirect_uri(self, redirect_uri):
        # Exact string comparison, no prefix or path matching (RFC 9700 §4.1.3).
        return redirect_uri in self.redirect_uris

    def check_client_secret(self, client_secret):
        if self.secret is None or client_secret is None:
            return False
        return hmac.compare_digest(client_secret.encode(), self.secret.encode())

    def check_endpoint_auth_method(self, method, endpoint):
        return method in self.auth_methods

    def check_response_type(self, response_type):
        return response_type == "code"

    def check_grant_type(self, grant_type):
        # refresh_token: only usable with a refresh token this client was issued (offline access).
        return grant_type in ("authorization_code", "refresh_token")


def load_clients(path: str) -> dict[str, RegisteredClient]:
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        raise ClientConfigError(f"{path}: cannot read clients file: {e}") from e
    return parse_clients(doc, source=path)


def parse_clients(doc, source: str = "clients") -> dict[str, RegisteredClient]:
    problems: list[str] = []
    clients: dict[str, RegisteredClient] = {}
    if not isinstance(doc, dict) or not isinstance(doc.get("clients"), list) or not doc["clients"]:
        raise ClientConfigError(f"{source}: expected an object with a non-empty 'clients' list")
    for i, entry in enumerate(doc["clients"]):
        where = f"{source}: clients[{i}]"
        if not isinstance(entry, dict):
            problems.append(f"{where}: must be an object")
            continue
        # Keys starting with "_" are documentation (JSON has no comments).
        unknown = sorted(k for k in entry if not k.startswith("_") and k not in _KNOWN_KEYS)
        if unknown:
            problems.append(f"{where}: unknown keys {unknown}")
        client, errs = _parse_client(entry, where)
        problems.extend(errs)
        if client is None:
            continue
        if client.client_id in clients:
            problems.append(f"{where}: duplicate client_id {client.client_id!r}")
        clients[client.client_id] = client
    if problems:
        raise ClientConfigError("\n".join(problems))
    return clients


def _parse_client(entry: dict, where: str) -> tuple[RegisteredClient | None, list[str]]:
    errs: list[str] = []
    client_id = entry.get("client_id")
    if not isinstance(client_id, str) or not client_id or not client_id.isprintable() or " " in client_id:
        errs.append(f"{where}: client_id must be a non-empty string without spaces")
    kind = entry.get("type")
    if kind not in ("web", "native"):
        errs.append(f"{where}: type must be 'web' (confidential) or 'native' (public)")
    platform = entry.get("platform")
    if platform is not None and platform not in ("ios", "android"):
        errs.append(f"{where}: platform must be 'ios' or 'android'")

    uris = entry.get("redirect_uris")
    if not isinstance(uris, list) or not uris or not all(isinstance(u, str) and u for u in uris):
        errs.append(f"{where}: redirect_uris must be a non-empty list of strings")
        uris = []
    for uri in uris:
        problem = _redirect_uri_problem(uri, kind)
        if problem:
            errs.append(f"{where}: redirect_uri {uri!r}: {problem}")

    logout_uris = entry.get("post_logout_redirect_uris", [])
    if not isinstance(logout_uris, list) or not all(isinstance(u, str) and u for u in logout_uris):
        errs.append(f"{where}: post_logout_redirect_uris must be a list of strings")
        logout_uris = []

    scopes = entry.get("scopes", list(SUPPORTED_SCOPES))
    if not isinstance(scopes, list) or not scopes or any(s not in SUPPORTED_SCOPES for s in scopes):
        errs.append(f"{where}: scopes must be a non-empty subset of {list(SUPPORTED_SCOPES)}")
        scopes = []

    methods = entry.get("token_endpoint_auth_method")
    if isinstance(methods, str):
        methods = [methods]
    secret = entry.get("client_secret")
    require_pkce = entry.get("require_pkce")
    if require_pkce is not None and not isinstance(require_pkce, bool):
        errs.append(f"{where}: require_pkce must be true or false")

    if kind == "native":
        if secret is not None:
            errs.append(f"{where}: a native (public) client has no client_secret")
        if methods not in (None, ["none"]):
            errs.append(f"{where}: a native client's token_endpoint_auth_method is 'none'")
        if require_pkce is False:
            errs.append(f"{where}: PKCE cannot be turned off for a native (public) client")
        methods, require_pkce, secret = ["none"], True, None
    elif kind == "web":
        if not isinstance(secret, str) or len(secret) < 8:
            errs.append(f"{where}: a web (confidential) client needs a client_secret of 8+ characters")
        if methods is None:
            methods = list(CONFIDENTIAL_AUTH_METHODS)
        if (not isinstance(methods, list) or not methods
                or any(m not in CONFIDENTIAL_AUTH_METHODS for m in methods)):
            errs.append(f"{where}: a web client's token_endpoint_auth_method is one or both of "
                        f"{list(CONFIDENTIAL_AUTH_METHODS)}")
        require_pkce = bool(require_pkce)

    if errs:
        return None, errs
    return RegisteredClient(
        client_id=client_id, kind=kind, platform=platform, secret=secret,
        redirect_uris=tuple(uris), auth_methods=tuple(methods), scopes=tuple(scopes),
        require_pkce=require_pkce, post_logout_redirect_uris=tuple(logout_uris),
    ), []


def _redirect_uri_problem(uri: str, kind) -> str | None:
    try:
        parts = urlsplit(uri)
    except ValueError:
        return "not a URI"
    if parts.fragment or "#" in uri:
        return "must not have a fragment"
    if not uri.isprintable() or " " in uri:
        return "must not contain spaces or control characters"
    if kind == "web":
        if parts.scheme == "https" and parts.hostname:
            return None
        if parts.scheme == "http" and parts.netloc.rsplit(":", 1)[0] in _LOOPBACK_HOSTS:
            return None
        return "a web client redirects to https://… or http://127.0.0.1 (loopback) only"
    if kind == "native":
        if _PRIVATE_SCHEME.match(parts.scheme) and parts.path.startswith("/") and not parts.netloc:
            return None
        return ("a native client redirects to a private-use scheme named by a reversed domain, "
                "e.g. com.example.app:/oauth2redirect (RFC 8252 §7.1)")
    return None
