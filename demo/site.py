#!/usr/bin/env python3
"""A stand-in for the unchanged website behind the proxy: it shows what reached it.

Run by `scripts/run`. `GET /` answers an HTML page, `GET /headers` a JSON list of the request
headers the site received (so the X-Forwarded-* headers added by the proxy are visible).
"""
import http.server
import json
import sys


class Site(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        if self.path.startswith("/headers"):
            body = json.dumps({"method": self.command, "path": self.path,
                               "headers": [[k, v] for k, v in self.headers.items()]}, indent=2).encode()
            ctype = "application/json"
        else:
            rows = "".join(f"<tr><td>{k}</td><td>{v}</td></tr>" for k, v in self.headers.items())
            body = (f"<!doctype html><title>Legacy site</title><h1>The unchanged site</h1>"
                    f"<p>This page came through CallbackProxy. The site saw these headers:</p>"
                    f"<table>{rows}</table>").encode()
            ctype = "text/html; charset=utf-8"
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, fmt, *args):
        pass


if __name__ == "__main__":
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
    http.server.ThreadingHTTPServer(("127.0.0.1", port), Site).serve_forever()
