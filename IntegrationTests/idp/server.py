#!/usr/bin/env python3
"""Strict test IdP for CallbackProxy's end-to-end tests. See README.md beside this file.

    python IntegrationTests/idp/server.py --port 0 --issuer https://127.0.0.1:PORT \\
        --tls-cert server.pem --tls-key server.key --clients clients.json [--test-hooks]

Binds first, then builds the issuer (so with --port 0 the issuer carries the real port: write the
port in --issuer as PORT or {port}, or leave --issuer out), then prints `READY <port>` on stdout.
One log line per request goes to stderr.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import ssl
import sys
import time
from datetime import datetime, timezone
from urllib.parse import parse_qs, urlsplit

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from werkzeug.serving import ThreadedWSGIServer, WSGIRequestHandler  # noqa: E402

from idp_clients import ClientConfigError, load_clients  # noqa: E402
from idp_provider import ENDPOINTS, IdPConfig, IdPError, create_app, parse_basic  # noqa: E402

HANDSHAKE_TIMEOUT = 10.0
IO_TIMEOUT = 30.0


def log(line: str):
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    sys.stderr.write(f"{stamp} idp {line}\n")
    sys.stderr.flush()


class RequestHandler(WSGIRequestHandler):
    """werkzeug's handler, with one log line per request (path without its query: codes and
    verifiers stay out of the log) and the 'close' misbehaviour mode."""

    def run_wsgi(self):
        self._started = time.monotonic()
        endpoint = self.server.endpoint_for(self.path)
        if endpoint and self.server.app.idp_state.take_mode(endpoint, only="close") == "close":
            self._drop_connection(endpoint)
            return
        super().run_wsgi()

    def _drop_connection(self, endpoint: str):
        # Read the request body (so the close is a clean FIN, not a reset), record it, then close
        # without a byte of response.
        state = self.server.app.idp_state
        try:
            length = min(int(self.headers.get("Content-Length") or 0), 64 * 1024)
            body = self.rfile.read(length) if length else b""
        except (ValueError, OSError):
            body = b""
        if endpoint == "token":
            cid = (parse_qs(body.decode("utf-8", "replace")).get("client_id") or ["<none>"])[0]
            if self.headers.get("Authorization"):
                try:
                    cid = parse_basic(self.headers["Authorization"])[0]
                except IdPError:
                    cid = "<malformed>"
            state.stats.record_token(cid, "forced", "mode:close", None, 0, state.now())
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.log_request("closed", "-")

    def log_request(self, code="-", size="-"):
        path = getattr(self, "path", "") or ""
        path = path.split("?", 1)[0][:200].translate(self._control_char_table).replace(" ", "%20")
        started = getattr(self, "_started", None)
        ms = f"{(time.monotonic() - started) * 1000:.1f}ms" if started else "-"
        note = ""
        environ = getattr(self, "environ", None)
        if environ and environ.get("idp.log"):
            note = " " + environ["idp.log"]
        method = getattr(self, "command", None) or "-"
        log(f'{self.client_address[0]} "{method} {path}" {code} {ms}{note}')

    def log_error(self, format, *args):
        log("error " + (format % args))

    def log_message(self, format, *args):
        log(format % args)


class IdPHTTPServer(ThreadedWSGIServer):
    """werkzeug's threaded server, with the TLS handshake moved off the accept loop (werkzeug
    wraps the listening socket, so one client that never finishes its handshake would stall every
    other connection) and a timeout on every connection."""

    def __init__(self, host, port, app, tls: ssl.SSLContext | None):
        super().__init__(host, port, app, handler=RequestHandler)
        self.tls = tls
        # werkzeug reads this to set wsgi.url_scheme; the listening socket stays plain.
        self.ssl_context = tls
        self.prefix = ""

    def endpoint_for(self, raw_path: str) -> str | None:
        path = raw_path.split("?", 1)[0]
        if not path.startswith(self.prefix):
            return None
        return ENDPOINTS.get(path[len(self.prefix):])

    def finish_request(self, request, client_address):
        conn = request
        try:
            # Without TCP_NODELAY, the response waits ~10 ms behind the TLS 1.3 session tickets
            # (Nagle holding the write until the client's delayed ACK).
            request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.tls is not None:
                request.settimeout(HANDSHAKE_TIMEOUT)
                try:
                    conn = self.tls.wrap_socket(request, server_side=True)
                except (ssl.SSLError, OSError) as e:
                    log(f"{client_address[0]} TLS handshake failed: {e}")
                    return
            conn.settimeout(IO_TIMEOUT)
            self.RequestHandlerClass(conn, client_address, self)
        finally:
            if conn is not request:
                try:
                    conn.close()
                except OSError:
                    pass

    def handle_error(self, request, client_address):
        log(f"{client_address[0]} connection error: {sys.exc_info()[1]!r}")


def build_issuer(template: str | None, scheme: str, host: str, port: int) -> str:
    if not template:
        shown = f"[{host}]" if ":" in host else host
        return f"{scheme}://{shown}:{port}"
    issuer = template.replace("{port}", str(port)).replace(":PORT", f":{port}")
    parts = urlsplit(issuer)
    if parts.scheme != scheme:
        raise SystemExit(f"--issuer must use {scheme}:// (it is {issuer})")
    if parts.query or parts.fragment or not parts.hostname:
        raise SystemExit(f"--issuer must be scheme://host[:port][/path] (it is {issuer})")
    if issuer.endswith("/"):
        raise SystemExit(f"--issuer must not end with '/' (it is {issuer})")
    return issuer


def main(argv=None):
    p = argparse.ArgumentParser(description="Strict OpenID Connect test IdP (see README.md).")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0, help="0 picks a free port (printed as READY <port>)")
    p.add_argument("--issuer", help="issuer URL; PORT or {port} in it is replaced by the bound "
                   "port (default: scheme://host:port)")
    p.add_argument("--tls-cert", help="PEM certificate chain for HTTPS")
    p.add_argument("--tls-key", help="PEM private key for HTTPS")
    p.add_argument("--insecure-http", action="store_true",
                   help="serve plain HTTP instead of HTTPS (debugging only)")
    p.add_argument("--clients", required=True, help="JSON file of registered clients")
    p.add_argument("--test-hooks", action="store_true", help="enable the /_test/* endpoints")
    p.add_argument("--code-ttl", type=int, default=60, help="authorization code lifetime, s")
    p.add_argument("--id-token-ttl", type=int, default=3600, help="id_token lifetime, s")
    p.add_argument("--jwks-max-age", type=int, default=3600,
                   help="Cache-Control max-age of the JWKS response, s")
    args = p.parse_args(argv)

    if args.insecure_http == bool(args.tls_cert or args.tls_key):
        p.error("give either --tls-cert and --tls-key (HTTPS) or --insecure-http")
    if not args.insecure_http and not (args.tls_cert and args.tls_key):
        p.error("--tls-cert and --tls-key go together")
    for name in ("code_ttl", "id_token_ttl", "jwks_max_age"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")

    try:
        clients = load_clients(args.clients)
    except ClientConfigError as e:
        print(f"idp: {e}", file=sys.stderr)
        return 2

    tls = None
    if args.insecure_http:
        os.environ["AUTHLIB_INSECURE_TRANSPORT"] = "1"   # authlib refuses http:// URLs otherwise
    else:
        tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        tls.minimum_version = ssl.TLSVersion.TLSv1_2
        tls.load_cert_chain(args.tls_cert, args.tls_key)

    # Bind first: the issuer, hence the app, needs the real port.
    server = IdPHTTPServer(args.host, args.port, None, tls)
    port = server.socket.getsockname()[1]
    scheme = "http" if args.insecure_http else "https"
    issuer = build_issuer(args.issuer, scheme, args.host, port)
    server.app = create_app(IdPConfig(issuer=issuer, code_ttl=args.code_ttl,
                                      id_token_ttl=args.id_token_ttl,
                                      jwks_max_age=args.jwks_max_age, test_hooks=args.test_hooks),
                            clients)
    server.prefix = urlsplit(issuer).path.rstrip("/")

    def stop(signum, _frame):
        log(f"signal {signum}: shutting down")
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    log(f"issuer {issuer} clients {sorted(clients)} test_hooks={args.test_hooks} "
        f"code_ttl={args.code_ttl}s")
    print(f"READY {port}", flush=True)
    try:
        server.serve_forever(poll_interval=0.2)
    except SystemExit:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
