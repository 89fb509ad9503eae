"""A site that trusts identity headers, the way Grafana's auth proxy or a Rack app behind
oauth2-proxy does: it shows "Signed in as <X-Forwarded-Email>" (or "Not signed in") and nothing
else about authentication.

Like Rack, Django, PHP and CGI it folds header names (any case, `_` for `-`) before looking one
up, so `X_Forwarded_Email` would count as `X-Forwarded-Email` — the weakness the proxy's header
stripping exists for. It records every request's identity-looking headers, exactly as received,
so a test can assert that a forged value never arrived under any spelling.
"""

from __future__ import annotations

import html
import http.server
import threading

from harness import serve_http

IDENTITY = ("x-forwarded-", "x-auth-request-")


def folded(name: str) -> str:
    return name.lower().replace("_", "-")


class HeaderApp:
    def __init__(self, port: int):
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.records: list[dict] = []
        self._lock = threading.Lock()
        app = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):
                received = [(k, v) for k, v in self.headers.items()
                            if folded(k).startswith(IDENTITY) and folded(k) not in
                            ("x-forwarded-for", "x-forwarded-proto", "x-forwarded-host")]
                emails = [v for k, v in received if folded(k) == "x-forwarded-email"]
                with app._lock:
                    app.records.append({"path": self.path, "identity": received})
                # A header-trusting app takes the first one it finds.
                status = f"Signed in as {emails[0]}" if emails else "Not signed in"
                body = (f"<!doctype html><html><head><title>Header app</title></head><body>"
                        f"<p id=\"status\">{html.escape(status)}</p></body></html>").encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Cache-Control", "no-store")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = serve_http(Handler, port)

    def clear(self):
        with self._lock:
            self.records.clear()

    def seen(self) -> list[dict]:
        with self._lock:
            return list(self.records)

    def identity_values(self) -> list[str]:
        """Every identity header value that reached the app, under any spelling."""
        return [v for r in self.seen() for _, v in r["identity"]]

    def stop(self):
        self.server.shutdown()
        self.server.server_close()
