"""Processes of the end-to-end suite: the legacy Rails app (puma), the proxy, and the headless
Chromium that plays the WebView. The fixtures that wire them together are in conftest.py; the
native wrapper app is wrapper.py.

Every process writes its output to a file (printed on failure by the fixtures) and gets SIGTERM
if the test process dies (PR_SET_PDEATHSIG), so an interrupted run leaves nothing behind.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import http.server
import json
import os
import random
import secrets
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

E2E_DIR = Path(__file__).resolve().parent
REPO_ROOT = E2E_DIR.parents[1]
RAILS_SRC = E2E_DIR / "rails_app"
CHROMIUM = os.environ.get("E2E_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("E2E_CHROMEDRIVER", "/usr/bin/chromedriver")

APP_CALLBACK = "/users/auth/google_oauth2/callback"
# The app's second provider, for the params hand-off (see rails_app/lib/omniauth/strategies).
PARAMS_PROVIDER = "google_params"
PARAMS_CALLBACK = "/users/auth/google_params/callback"
RELAY_TOKEN_PATH = "/_oauth/token"     # the proxy's default relay_token_path

# The clients registered at the test IdP for this suite (written per run: see clients_file()).
WEB_CLIENT = "123-web.apps.googleusercontent.com"
WEB_SECRET = "e2e-web-secret-" + secrets.token_hex(8)
IOS_CLIENT = "123-ios.apps.googleusercontent.com"
IOS_REDIRECT = "com.googleusercontent.apps.123-ios:/oauth2redirect"   # Google's reversed client id
ANDROID_CLIENT = "123-android.apps.googleusercontent.com"
# What the Android core derives from BuildConfig's GOOGLE_CLIENT_ID (and AppAuth's placeholder must
# carry): the reversed client id. IntegrationTests/idp/clients.example.json registers the package
# scheme com.example.app instead, which the core's Google provider never sends.
ANDROID_REDIRECT = "com.googleusercontent.apps.123-android:/oauth2redirect"
NATIVE = {"ios": (IOS_CLIENT, IOS_REDIRECT), "android": (ANDROID_CLIENT, ANDROID_REDIRECT)}
SECRET_KEY_BASE = secrets.token_hex(64)     # the Rails app's, one per run (both pumas)


# -------------------------------------------------------------------------------------------------
# Ports and processes


def free_port(taken=()) -> int:
    """A free loopback TCP port below the ephemeral range (no outgoing connection takes it), and
    below the 20000-32000 that IntegrationTests/integration picks from: the proxy binds with SO_REUSEPORT, so
    two proxies of concurrent runs on one port would silently share its connections."""
    for _ in range(200):
        port = random.randint(12000, 19999)
        if port in taken:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port found")


def die_with_parent():
    """preexec_fn: SIGTERM the child when the test process dies."""
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)   # PR_SET_PDEATHSIG


def http_status(url, timeout=1.0) -> int | None:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return None


def tail(path, limit=6000) -> str:
    with contextlib.suppress(OSError):
        return Path(path).read_text(errors="replace")[-limit:]
    return "(no output)"


class Process:
    """A child process whose stdout and stderr go to one log file."""

    def __init__(self, name, cmd, log_path, env=None, cwd=None):
        self.name = name
        self.cmd = [str(c) for c in cmd]
        self.log_path = Path(log_path)
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.cmd, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, env=env, cwd=cwd,
                                         preexec_fn=die_with_parent)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def wait_http(self, url, timeout, ok=(200,)):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.alive():
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode} before it was "
                                   f"ready:\n{tail(self.log_path)}")
            if http_status(url, timeout=1.0) in ok:
                return
            time.sleep(0.05)
        raise RuntimeError(f"{self.name} not ready at {url} within {timeout}s:\n{tail(self.log_path)}")

    def stop(self, timeout=10):
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def output(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


# -------------------------------------------------------------------------------------------------
# The IdP's clients for this run


def clients_file(path, redirect_ports) -> str:
    """The IdP's registered clients: the site's web client (confidential, client_secret_post only,
    PKCE required) whose redirect URIs are the app's callback on each of `redirect_ports` (the
    proxy's public port and the apps' own ports, known only at run time; the IdP compares them
    exactly), and the iOS and Android native clients of IntegrationTests/idp/clients.example.json
    (the Android one with the redirect its core derives, see ANDROID_REDIRECT)."""
    doc = {"clients": [
        {"client_id": WEB_CLIENT, "type": "web", "client_secret": WEB_SECRET,
         "token_endpoint_auth_method": ["client_secret_post"], "require_pkce": True,
         "redirect_uris": [f"http://127.0.0.1:{p}{APP_CALLBACK}" for p in redirect_ports]},
        {"client_id": IOS_CLIENT, "type": "native", "platform": "ios",
         "token_endpoint_auth_method": "none", "redirect_uris": [IOS_REDIRECT]},
        {"client_id": ANDROID_CLIENT, "type": "native", "platform": "android",
         "token_endpoint_auth_method": "none", "redirect_uris": [ANDROID_REDIRECT]},
    ]}
    Path(path).write_text(json.dumps(doc, indent=2))
    return str(path)


# -------------------------------------------------------------------------------------------------
# The legacy Rails app


def prepare_rails_app(workdir) -> Path:
    """Copy IntegrationTests/e2e/rails_app to `workdir`, resolve its Gemfile against the installed Debian gems
    (`bundle install --local`: nothing is fetched) and create its SQLite database from
    db/schema.rb. Returns the app directory."""
    app = Path(workdir) / "rails_app"
    shutil.copytree(RAILS_SRC, app, ignore=shutil.ignore_patterns("Gemfile.lock", "*.sqlite3",
                                                                  "log", "tmp"))
    env = rails_env(app, issuer="https://127.0.0.1:1", ca_file=None)
    for cmd in (["bundle", "install", "--local", "--quiet"], ["bin/rails", "db:schema:load"]):
        proc = subprocess.run(cmd, cwd=app, env=env, capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            raise RuntimeError(f"rails app: {' '.join(cmd)} failed ({proc.returncode}):\n"
                               f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return app


def rails_env(app, *, issuer, ca_file, token_url=None) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BUNDLE_", "RUBY", "GEM_"))}
    env.update(RAILS_ENV="production", RACK_ENV="production", BUNDLE_GEMFILE=str(app / "Gemfile"),
               BUNDLE_SILENCE_ROOT_WARNING="1", SECRET_KEY_BASE=SECRET_KEY_BASE,
               GOOGLE_ISSUER=issuer, GOOGLE_CLIENT_ID=WEB_CLIENT, GOOGLE_CLIENT_SECRET=WEB_SECRET)
    if ca_file:
        env["SSL_CERT_FILE"] = str(ca_file)     # Ruby's OpenSSL trusts the throwaway CA
    # The params strategy's one setting: the native clients whose tokens it accepts.
    env["GOOGLE_AUTHORIZED_CLIENT_IDS"] = f"{IOS_CLIENT},{ANDROID_CLIENT}"
    if token_url:
        env["OAUTH_TOKEN_URL"] = token_url      # the app's one setting for the relay hand-off
    else:
        env.pop("OAUTH_TOKEN_URL", None)
    return env


class RailsApp:
    """One puma serving the app on 127.0.0.1:port. `token_url` is OAUTH_TOKEN_URL (None: the
    IdP's own token endpoint, i.e. the app as it was before CallbackProxy)."""

    def __init__(self, app_dir, port, log_path, *, issuer, ca_file, token_url=None, name="rails"):
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.token_url = token_url
        env = rails_env(Path(app_dir), issuer=issuer, ca_file=ca_file, token_url=token_url)
        self.process = Process(name, ["bundle", "exec", "puma", "-b", f"tcp://127.0.0.1:{port}",
                                      "-t", "2:4", "-e", "production", "config.ru"],
                               log_path, env=env, cwd=app_dir)

    def wait_ready(self, timeout=60):
        self.process.wait_http(self.url + "/", timeout)

    def stop(self):
        self.process.stop()


# -------------------------------------------------------------------------------------------------
# The proxy


def proxy_config(*, port, internal_port, upstream, idp=None, handoff="relay", ca_file=None,
                 web_secret_env="WEB_CLIENT_SECRET", params_provider=False, tls=None,
                 static_root=None, x_accel_redirect=(), http3=False) -> str:
    """The proxy's YAML. Without `idp`: plain proxying (no providers). With it: provider `google`
    (kind google, endpoints overridden to the test IdP) in `handoff` mode, the app's web client
    for the relay token endpoint, and the two native clients. `tls`: (cert, key) to serve HTTPS
    (and with it HTTP/2) on the public listener. `static_root`: a directory whose files are
    answered before the upstream (`static.root`, its other keys at their defaults).
    `x_accel_redirect`: (location, root) pairs. `http3`: HTTP/3 on beside the TLS listener."""
    q = json.dumps
    lines = [f"listen: {q(f'127.0.0.1:{port}')}",
             f"internal_listen: {q(f'127.0.0.1:{internal_port}')}",
             f"upstream: {q(upstream)}",
             "loops: 1",
             "access_log: stdout",
             "log: { level: debug, format: json }"]
    if tls is not None:
        lines += [f"tls: {{ cert: {q(str(tls[0]))}, key: {q(str(tls[1]))} }}"]
        if http3:
            lines += ["http3: { enabled: true }"]
    if static_root is not None:
        lines += [f"static: {{ root: {q(str(static_root))} }}"]
    if x_accel_redirect:
        lines += ["x_accel_redirect:"] + [f"  - {{ location: {q(loc)}, root: {q(str(root))} }}"
                                          for loc, root in x_accel_redirect]
    if idp is not None:
        lines += ["oauth:",
                  f"  ca_file: {q(str(ca_file or idp.ca_cert))}",
                  "  idp_timeout: 5s",
                  "providers:",
                  "  google:",
                  "    kind: google",
                  f"    handoff: {handoff}",
                  f"    app_callback: {q(APP_CALLBACK)}",
                  f"    app_client: {{ id: {q(WEB_CLIENT)}, secret_env: {web_secret_env} }}",
                  "    endpoints:",
                  f"      token: {q(idp.url('/token'))}",
                  f"      jwks: {q(idp.url('/jwks'))}",
                  f"      issuer: {q(idp.issuer)}",
                  "    native:",
                  f"      ios: {{ client_id: {q(IOS_CLIENT)} }}",        # redirect derived
                  f"      android: {{ client_id: {q(ANDROID_CLIENT)}, "
                  f"redirect_uri: {q(ANDROID_REDIRECT)} }}"]
        if params_provider:
            lines += params_provider_lines(idp)
    return "\n".join(lines) + "\n"


def params_provider_lines(idp) -> list[str]:
    """A second provider entry, `google_params`, in params mode: the same IdP and native
    clients, handed off to the app's google_params strategy (which accepts the tokens)."""
    q = json.dumps
    return [f"  {PARAMS_PROVIDER}:",
            "    kind: google",
            "    handoff: params",
            f"    app_callback: {q(PARAMS_CALLBACK)}",
            "    endpoints:",
            f"      token: {q(idp.url('/token'))}",
            f"      jwks: {q(idp.url('/jwks'))}",
            f"      issuer: {q(idp.issuer)}",
            "    native:",
            f"      ios: {{ client_id: {q(IOS_CLIENT)} }}",
            f"      android: {{ client_id: {q(ANDROID_CLIENT)}, redirect_uri: {q(ANDROID_REDIRECT)} }}"]


def port_is_free(port) -> bool:
    """Nobody listens on 127.0.0.1:port (a bind without SO_REUSEPORT fails even next to a
    SO_REUSEPORT listener)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


class Proxy:
    # Every proxy started in this test session, whoever started it: the run-wide log scan
    # (test_log_secrets.py) reads all their lines.
    started: list["Proxy"] = []

    def __init__(self, binary, workdir, config_text, *, port, internal_port, name="proxy", tls=False):
        for p in (port, internal_port):     # the session's fixed ports: still ours?
            if not port_is_free(p):
                raise RuntimeError(f"port {p} is taken by another process; the proxy of this "
                                   f"test would share it (SO_REUSEPORT)")
        self.port = port
        self.internal_port = internal_port
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{port}"
        self.internal_url = f"http://127.0.0.1:{internal_port}"
        workdir = Path(workdir)
        self.config_path = workdir / f"{name}.yaml"
        self.config_path.write_text(config_text)
        self.stdout_path = workdir / f"{name}.access.log"
        self.stderr_path = workdir / f"{name}.log"
        env = dict(os.environ, WEB_CLIENT_SECRET=WEB_SECRET)
        Proxy.started.append(self)
        with open(self.stdout_path, "ab") as out, open(self.stderr_path, "ab") as err:
            self.proc = subprocess.Popen([binary, "--config", str(self.config_path)], stdout=out,
                                         stderr=err, stdin=subprocess.DEVNULL, env=env,
                                         preexec_fn=die_with_parent)
        deadline = time.monotonic() + 10
        while http_status(self.internal_url + "/healthz", 0.5) != 200:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"proxy did not start (exit {self.proc.returncode}):\n"
                                   f"config:\n{config_text}\nstderr:\n{tail(self.stderr_path)}")
            time.sleep(0.02)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def log_lines(self) -> list[str]:
        """Every line the proxy wrote: its operator log (stderr) and its access log (stdout)."""
        lines = []
        for path in (self.stderr_path, self.stdout_path):
            with contextlib.suppress(OSError):
                lines += Path(path).read_text(errors="replace").splitlines()
        return lines

    def log_events(self) -> list[dict]:
        out = []
        for line in self.log_lines():
            with contextlib.suppress(ValueError):
                obj = json.loads(line)
                if isinstance(obj, dict):
                    out.append(obj)
        return out


# -------------------------------------------------------------------------------------------------
# The browser


def spki_hash(cert_pem_path) -> str:
    """base64(sha256(SubjectPublicKeyInfo)) of a certificate: what Chromium's
    --ignore-certificate-errors-spki-list takes (trusts the IdP's cert without touching NSS)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    cert = x509.load_pem_x509_certificate(Path(cert_pem_path).read_bytes())
    spki = cert.public_key().public_bytes(serialization.Encoding.DER,
                                          serialization.PublicFormat.SubjectPublicKeyInfo)
    digest = hashes.Hash(hashes.SHA256())
    digest.update(spki)
    return base64.b64encode(digest.finalize()).decode()


def start_browser(profile_dir, idp_server_cert, extra_args=()):
    """Headless Chromium through Debian's chromedriver (Selenium downloads nothing)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--no-first-run", "--no-default-browser-check", "--disable-extensions",
                "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--password-store=basic", "--window-size=1000,800",
                f"--user-data-dir={profile_dir}",
                f"--ignore-certificate-errors-spki-list={spki_hash(idp_server_cert)}", *extra_args):
        opts.add_argument(arg)
    service = Service(CHROMEDRIVER, log_output=str(Path(profile_dir).parent / "chromedriver.log"))
    driver = webdriver.Chrome(service=service, options=opts)
    driver.set_page_load_timeout(30)
    return driver


# -------------------------------------------------------------------------------------------------
# The token tap


class TokenTap:
    """A transparent HTTP forwarder between the relay app and the proxy's relay token endpoint:
    the app's OAUTH_TOKEN_URL is http://127.0.0.1:<tap>/_oauth/token, the tap forwards each request
    byte for byte to the proxy's internal listener and returns the answer unchanged. It records
    both, so the tests can see what the app sent (its client authentication, its own
    code_verifier, the relay code) and what it got (the tokens) — the relay code and tokens never
    reach the browser, and the log-hygiene test needs them to search the proxy's logs."""

    HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host"}

    def __init__(self, port, target_port):
        import http.client

        self.port = port
        self.target_port = target_port
        self.records: list[dict] = []
        self.history: list[dict] = []     # every record of the session (records is per test)
        tap = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                headers = {k: v for k, v in self.headers.items() if k.lower() not in tap.HOP}
                rec = {"path": self.path, "headers": dict(self.headers.items()),
                       "body": body.decode(errors="replace")}
                try:
                    conn = http.client.HTTPConnection("127.0.0.1", tap.target_port, timeout=30)
                    conn.request("POST", self.path, body=body, headers=headers)
                    resp = conn.getresponse()
                    data, status = resp.read(), resp.status
                    out_headers = [(k, v) for k, v in resp.getheaders() if k.lower() not in tap.HOP]
                    conn.close()
                except OSError as exc:
                    data, status = f'{{"error":"tap: {exc}"}}'.encode(), 502
                    out_headers = [("Content-Type", "application/json")]
                rec.update(status=status, response=data.decode(errors="replace"))
                tap.records.append(rec)
                tap.history.append(rec)
                self.send_response(status)
                for k, v in out_headers:
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = serve_http(Handler, port)

    @property
    def token_url(self):
        return f"http://127.0.0.1:{self.port}{RELAY_TOKEN_PATH}"

    def clear(self):
        self.records.clear()

    def forms(self):
        from urllib.parse import parse_qs
        return [{k: v[0] for k, v in parse_qs(r["body"]).items()} for r in self.records]

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def serve_http(handler, port=0, tls=None):
    """A ThreadingHTTPServer for `handler` on 127.0.0.1:`port` (0: any), wrapped in `tls` (an
    ssl.SSLContext) when given, serving from a daemon thread. Stop it with shutdown() and
    server_close()."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
    server.daemon_threads = True
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server
