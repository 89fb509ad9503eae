#!/usr/bin/env python3
"""The demo behind `scripts/run`: everything real, on loopback.

  demo site (the unchanged website)        http://127.0.0.1:3000
  strict test IdP (OpenID provider, HTTPS) https://127.0.0.1:<port>   (throwaway CA)
  callback-proxy in front of the site      http://127.0.0.1:8080       (internal: 8081)

It then plays the wrapper app once: signs in at the IdP with the *native* iOS client and PKCE and
loads /_oauth_callback with the unconsumed code. The proxy exchanges and verifies it, then (relay
mode) forwards the site's own callback with a one-time relay code, which the site redeems at the
proxy's relay token endpoint — and the site shows the user signed in. The same callback replayed
is refused and handed to the site's own failure path. Ctrl-C stops everything.
"""
import http.cookiejar
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "IntegrationTests" / "idp"))
from idp_harness import IdP, make_test_pki  # noqa: E402

BIN = os.environ.get("CALLBACK_PROXY_BIN", str(ROOT / ".build" / "release" / "callback-proxy"))
IOS_CLIENT = "123-ios.apps.googleusercontent.com"


def wait_http(url, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url, timeout=1).read()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"demo: {url} did not come up")


JAR = http.cookiejar.CookieJar()
BROWSER = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(JAR))


def callback(grant):
    query = urllib.parse.urlencode({
        "provider": "google", "platform": "ios", "client_id": grant.client_id,
        "redirect_uri": grant.redirect_uri, "code": grant.code, "state": grant.state,
        "code_verifier": grant.code_verifier})
    try:
        with BROWSER.open(f"http://127.0.0.1:8080/_oauth_callback?{query}", timeout=15) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def text_of(html):
    for tag in ("<p id=failed>", "<p id=who>", "<p>"):
        start = html.find(tag)
        if start >= 0:
            return html[start + len(tag):html.find("</p>", start)]
    return html[:200]


def main():
    # SIGTERM (e.g. `timeout`) ends the demo like Ctrl-C, so the children are stopped too.
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    tmp = Path(tempfile.mkdtemp(prefix="callback-proxy-demo-"))
    procs = []
    idp = IdP.start(make_test_pki(str(tmp)), log_dir=tmp)
    try:
        web = next(c for c in json.load(open(idp.clients_file))["clients"] if "client_secret" in c)
        env = dict(os.environ, DEMO_CLIENT_ID=web["client_id"], DEMO_CLIENT_SECRET=web["client_secret"],
                   WEB_CLIENT_SECRET=web["client_secret"])
        procs.append(subprocess.Popen([sys.executable, str(ROOT / "demo" / "site.py"), "3000"], env=env))
        config = tmp / "demo.yaml"
        config.write_text(f"""\
listen: 127.0.0.1:8080
internal_listen: 127.0.0.1:8081
upstream: http://127.0.0.1:3000
oauth: {{ ca_file: {idp.ca_cert} }}
providers:
  google:
    kind: google
    handoff: relay
    app_callback: /users/auth/google_oauth2/callback
    app_client: {{ id: {web["client_id"]}, secret_env: WEB_CLIENT_SECRET }}
    endpoints: {{ token: {idp.base_url}/token, jwks: {idp.base_url}/jwks, issuer: {idp.base_url} }}
    native:
      ios: {{ client_id: {IOS_CLIENT} }}
""")
        proxy = subprocess.Popen([BIN, "--config", str(config)], env=env)
        procs.append(proxy)
        wait_http("http://127.0.0.1:8081/healthz")
        wait_http("http://127.0.0.1:3000/")

        print("\n== the wrapper app signs in at the IdP with its native client and PKCE")
        grant = idp.get_code(IOS_CLIENT, username="alice@example.test")
        print("   got an unconsumed code; loading /_oauth_callback into the WebView")
        status, page = callback(grant)
        print(f"   the WebView ends on the site's own page ({status}): {text_of(page)}")
        status, page = callback(grant)
        print(f"== the same callback again → {status}: {text_of(page)}")
        with urllib.request.urlopen("http://127.0.0.1:8081/metrics", timeout=5) as r:
            counted = [l for l in r.read().decode().splitlines()
                       if l.startswith(("callback_proxy_callbacks_total", "callback_proxy_relay_codes"))]
        print("== what the operator sees on the internal /metrics:\n   " + "\n   ".join(counted))
        print(f"""
Running (Ctrl-C to stop). Try:
  curl -i http://127.0.0.1:8080/headers      # proxied to the site, with X-Forwarded-*
  curl -i http://127.0.0.1:8081/healthz      # the internal listener: alive
  curl -i http://127.0.0.1:8081/readyz       # ready: store answering, upstream accepting connections
  curl -s http://127.0.0.1:8081/metrics      # Prometheus metrics
  curl -i 'http://127.0.0.1:8080/_oauth_callback?provider=google&platform=ios'   # refused: 400
Configuration used: {config}
""")
        proxy.wait()
    except KeyboardInterrupt:
        pass
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
        idp.stop()


if __name__ == "__main__":
    main()
