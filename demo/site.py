#!/usr/bin/env python3
"""A stand-in for the unchanged website behind the proxy: it shows what reached it.

Run by `scripts/run`. `GET /` answers an HTML page (with who is signed in), `GET /headers` a
JSON list of the request headers the site received (so the proxy's X-Forwarded-* are visible).

Its sign-in callback is an ordinary OAuth client's: it redeems the code it is given at its token
URL — the one setting changed for the product, pointed at the proxy's relay token endpoint — and
signs the user in with a cookie. (A real site would check `state` against its session too; the
end-to-end suite does that with Rails + Devise + OmniAuth.)
"""
import base64
import html
import http.server
import json
import os
import sys
import urllib.parse
import urllib.request

TOKEN_URL = os.environ.get("DEMO_TOKEN_URL", "http://127.0.0.1:8081/_oauth/token")
CLIENT_ID = os.environ.get("DEMO_CLIENT_ID", "123-web.apps.googleusercontent.com")
CLIENT_SECRET = os.environ.get("DEMO_CLIENT_SECRET", "")


class Site(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        if url.path == "/users/auth/google_oauth2/callback":
            return self.callback(dict(urllib.parse.parse_qsl(url.query)))
        if self.path.startswith("/headers"):
            body = json.dumps({"method": self.command, "path": self.path,
                               "headers": [[k, v] for k, v in self.headers.items()]}, indent=2).encode()
            ctype = "application/json"
        else:
            rows = "".join(f"<tr><td>{k}</td><td>{v}</td></tr>" for k, v in self.headers.items())
            user = next((c.split("=", 1)[1] for c in (self.headers.get("Cookie") or "").split("; ")
                         if c.startswith("demo_user=")), None)
            who = f"Signed in as {user}" if user else "Not signed in"
            failed = dict(urllib.parse.parse_qsl(url.query)).get("sign_in_failed")
            failed = f"<p id=failed>Sign-in failed: {html.escape(failed)}</p>" if failed else ""
            body = (f"<!doctype html><title>Legacy site</title><h1>The unchanged site</h1>{failed}<p id=who>{who}</p>"
                    f"<p>This page came through CallbackProxy. The site saw these headers:</p>"
                    f"<table>{rows}</table>").encode()
            ctype = "text/html; charset=utf-8"
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def callback(self, q):
        if "error" in q:    # the site's failure path: back home, saying why
            return self.redirect("/?sign_in_failed=" + urllib.parse.quote(q["error"]), None)
        form = urllib.parse.urlencode({"grant_type": "authorization_code", "code": q.get("code", ""),
                                       "client_id": CLIENT_ID, "client_secret": CLIENT_SECRET,
                                       "redirect_uri": "http://127.0.0.1:8080/users/auth/google_oauth2/callback"}).encode()
        try:
            with urllib.request.urlopen(urllib.request.Request(TOKEN_URL, data=form), timeout=10) as r:
                token = json.loads(r.read())
        except Exception:
            return self.redirect("/", None)
        claims = json.loads(base64.urlsafe_b64decode(token["id_token"].split(".")[1] + "=="))
        self.redirect("/", claims.get("email") or claims.get("sub"))

    def redirect(self, location, user):
        self.send_response(302)
        self.send_header("Location", location)
        if user:
            self.send_header("Set-Cookie", f"demo_user={user}; Path=/; HttpOnly")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, fmt, *args):
        pass


if __name__ == "__main__":
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
    try:
        http.server.ThreadingHTTPServer(("127.0.0.1", port), Site).serve_forever()
    except KeyboardInterrupt:
        # Ctrl-C reaches the whole terminal's process group: scripts/run stops it in order.
        pass
