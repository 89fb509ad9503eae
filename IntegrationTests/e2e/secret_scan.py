"""The run-wide search of the proxy's own output for secrets (DESIGN §5: never log codes,
verifiers, tokens, cookies, `Authorization`, or the callback's query string).

Through the session a ledger collects every secret the run produced or configured:

- from the strict IdP (`GET /_test/secrets`, since it started): every authorization code it
  issued, every code_verifier, client_secret and Authorization value presented at its token
  endpoint, every access/id/refresh token it issued — whichever test, mode or client;
- from the token tap (its whole history): the relay codes (`cpr1.`) the app redeemed, the app's
  client secret, code_verifier and Authorization header, and the token responses it received;
- from every simulated wrapper app: the native code, code_verifier and state it handed over;
- from the WebView after each test: every cookie value (the Rails session, the proxy's own);
- the configured secrets (the web client's secret, the Rails secret_key_base), and the values a
  test sent through the proxy in `Authorization` and `Cookie` headers on purpose.

At the end (`test_log_secrets.py`, moved last by the hook below) every line of every proxy the
session started (`harness.Proxy.started`: operator log on stderr and access log on stdout) is
searched for each value, raw and in the forms a log line could carry it (URL-encoded,
JSON-escaped), and for an id_token's signature on its own — and for the shape of a relay code,
a JWT or a Bearer/Basic credential, whoever made it. Values shorter than
MIN_SECRET_LENGTH are left out: a short value would match by chance and prove nothing.

The Rails app's log is not searched: the app is not ours.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, quote, quote_plus

import pytest

MIN_SECRET_LENGTH = 16

# Shapes no line may carry whatever their value: they catch what the ledger never saw (a relay
# code the app never redeemed, a token of a flow no fixture recorded).
SHAPES = {
    "a relay code (cpr1.…)": re.compile(r"cpr1\.[A-Za-z0-9_-]{16,}"),
    "a JWT": re.compile(r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\."),
    "a Bearer/Basic credential": re.compile(r"\b(?:Bearer|Basic)(?:\s|%20|\+)+[A-Za-z0-9._~+/=-]{16,}"),
}


@dataclass
class Ledger:
    """Secrets by kind ("native code", "relay code", "cookie _legacy_app_session", …)."""
    secrets: dict[str, set[str]] = field(default_factory=dict)

    def add(self, kind: str, value) -> None:
        if isinstance(value, str) and len(value) >= MIN_SECRET_LENGTH:
            self.secrets.setdefault(kind, set()).add(value)

    def kinds(self) -> dict[str, int]:
        return {kind: len(values) for kind, values in sorted(self.secrets.items())}

    def add_idp(self, issued: dict) -> None:
        for kind, values in issued.items():
            for value in values:
                self.add_token(f"IdP {kind}", value)

    def add_token(self, kind: str, value) -> None:
        self.add(kind, value)
        if kind.endswith("id_token") and isinstance(value, str) and value.count(".") == 2:
            self.add(kind + " signature", value.rsplit(".", 1)[1])

    def add_tap(self, records: list[dict]) -> None:
        for rec in records:
            form = dict(parse_qsl(rec.get("body", "")))
            code = form.get("code", "")
            self.add("relay code" if code.startswith("cpr1.") else "app's web code", code)
            self.add("app's code_verifier", form.get("code_verifier"))
            self.add("app's client_secret", form.get("client_secret"))
            headers = {k.lower(): v for k, v in rec.get("headers", {}).items()}
            self.add("app's Authorization header", headers.get("authorization"))
            try:
                answer = json.loads(rec.get("response", ""))
            except ValueError:
                continue
            if isinstance(answer, dict):
                for name in ("access_token", "id_token", "refresh_token"):
                    self.add_token(f"relayed {name}", answer.get(name))

    def add_sign_in(self, result) -> None:
        """A wrapper's wrapper.NativeSignIn."""
        self.add("native code", result.code)
        self.add("native code_verifier", result.code_verifier)
        self.add("state", result.state)

    def add_cookies(self, cookies: list[dict]) -> None:
        for c in cookies:
            self.add(f"cookie {c.get('name')}", c.get("value"))


def forms_of(value: str) -> set[str]:
    """The ways a log line could carry `value`: as it is, URL-encoded (query or form), and
    JSON-escaped (a `/` as `\\/`, a `"` as `\\"`)."""
    return {value, quote(value, safe=""), quote_plus(value), json.dumps(value)[1:-1],
            json.dumps(value)[1:-1].replace("/", "\\/")}


def find_leaks(sources: dict[str, list[str]], ledger: Ledger) -> list[str]:
    """'<kind> in <source> line <n>' for every secret found in any line, and every line with the
    shape of one (SHAPES); empty when clean."""
    leaks = []
    for kind, shape in SHAPES.items():
        for source, lines in sources.items():
            leaks += [f"{kind} in {source} line {n}" for n, line in enumerate(lines, 1)
                      if shape.search(line)]
    for kind, values in sorted(ledger.secrets.items()):
        for value in values:
            needles = forms_of(value)
            for source, lines in sources.items():
                for n, line in enumerate(lines, 1):
                    if any(needle in line for needle in needles):
                        leaks.append(f"{kind} in {source} line {n}")
    return leaks


def proxy_output(proxies) -> dict[str, list[str]]:
    """Every line each proxy wrote, by file: operator log (stderr) and access log (stdout)."""
    out = {}
    for p in proxies:
        for path in (p.stderr_path, p.stdout_path):
            try:
                out[str(path)] = path.read_text(errors="replace").splitlines()
            except OSError:
                out[str(path)] = []
    return out


# -------------------------------------------------------------------------------------------------
# Fixtures and the hook (imported into conftest.py)


@pytest.fixture(scope="session")
def secret_ledger():
    return Ledger()


@pytest.fixture(autouse=True)
def _ledger_collects_cookies(request, secret_ledger):
    """After each test that used the WebView: every cookie it holds, of every site."""
    browser = request.getfixturevalue("browser") if "webview" in request.fixturenames else None
    yield
    if browser is not None:
        try:
            cookies = browser.execute_cdp_cmd("Network.getAllCookies", {}).get("cookies", [])
        except Exception:   # a browser that died is reported by the test itself
            return
        secret_ledger.add_cookies(cookies)


def pytest_collection_modifyitems(items):
    # The run-wide scan reads what every other test made the proxies write: it runs last.
    last = [i for i in items if getattr(getattr(i, "function", None), "run_last", False)]
    items[:] = [i for i in items if i not in last] + last
