"""`oauth.app_links`: the proxy serves the universal-link and App Link files for the site's domain
(no file deployed on the site), exactly, as application/json, without a redirect, the Apple apps
under `webcredentials` too (iOS 17.4's hand-back); paths left out are every provider's app_callback
and the callback path; unset, the paths are the site's; a mistake is named by its key in `check`,
and `check` notes an app_callback the Apple paths do not claim."""
import json
import subprocess

from helpers import HTTPConn

FINGERPRINT = ":".join(["14", "6D", "E9", "83", "C5", "73", "06", "50", "D8", "EE", "B9", "95", "2F", "34", "FC", "64",
                        "16", "A0", "83", "42", "E6", "1D", "BE", "A8", "8A", "04", "96", "B2", "3F", "CF", "44", "E5"])
LINKS = f"""  app_links:
    apple: {{ app_ids: [ABCDE12345.com.example.app, ABCDE12345.com.example.app2], paths: ["/_oauth_callback*", "/signin/*"] }}
    android:
      - {{ package: com.example.app, sha256_cert_fingerprints: ["{FINGERPRINT}"] }}
"""


def write(tmp_path, links=LINKS, provider=""):
    cfg = tmp_path / "links.yaml"
    cfg.write_text(f"""oauth:
{links}providers:
  google:
    handoff: verify
{provider}    endpoints: {{ jwks: "http://127.0.0.1:9/jwks" }}
    native: {{ ios: {{ client_id: 123-ios.apps.googleusercontent.com }} }}
""")
    return str(cfg)


def get(p, path, method="GET"):
    with HTTPConn(p.port) as c:
        c.request(method, path)
        return c.read_response(method=method)


def test_both_files_are_served_exactly_and_nothing_reaches_the_site(proxy_factory, upstream, tmp_path):
    p = proxy_factory(upstream, extra=["--config", write(tmp_path)])
    r = get(p, "/.well-known/apple-app-site-association")
    assert (r.status, r.one("content-type"), r.one("cache-control")) == (200, "application/json", "public, max-age=3600")
    ids, paths = ["ABCDE12345.com.example.app", "ABCDE12345.com.example.app2"], ["/_oauth_callback*", "/signin/*"]
    assert json.loads(r.body) == {"applinks": {"apps": [], "details": [
        {"appIDs": ids, "components": [{"/": "/_oauth_callback*"}, {"/": "/signin/*"}]},
        {"appID": ids[0], "paths": paths}, {"appID": ids[1], "paths": paths}]},
        "webcredentials": {"apps": ids}}
    r = get(p, "/.well-known/assetlinks.json")
    assert (r.status, r.one("content-type")) == (200, "application/json")
    assert json.loads(r.body) == [{
        "relation": ["delegate_permission/common.handle_all_urls"],
        "target": {"namespace": "android_app", "package_name": "com.example.app", "sha256_cert_fingerprints": [FINGERPRINT]}}]
    head = get(p, "/.well-known/assetlinks.json", "HEAD")
    assert head.status == 200 and head.body == b""
    refused = get(p, "/.well-known/assetlinks.json", "POST")
    assert refused.status == 405 and refused.one("allow") == "GET, HEAD"
    # another spelling of the same path is the same file (one canonical target)
    assert json.loads(get(p, "/.well-known/./assetlinks.json").body)[0]["target"]["package_name"] == "com.example.app"
    assert upstream.record.requests() == []
    assert get(p, "/.well-known/other").status == 404, "other .well-known paths are the site's"


def test_apple_paths_default_to_the_sites_callback_and_check_is_quiet(proxy_factory, upstream, proxy_bin, tmp_path):
    cfg = write(tmp_path, links="  app_links:\n    apple: { app_ids: [ABCDE12345.com.example.app] }\n",
                provider="    app_callback: /users/auth/google_oauth2/callback\n")
    p = proxy_factory(upstream, extra=["--config", cfg])
    served = json.loads(get(p, "/.well-known/apple-app-site-association").body)
    assert served["applinks"]["details"][0]["components"] == [{"/": "/users/auth/google_oauth2/callback"}, {"/": "/_oauth_callback*"}]
    assert served["webcredentials"] == {"apps": ["ABCDE12345.com.example.app"]}
    out = subprocess.run([proxy_bin, "check", "--config", cfg, "--upstream", "http://127.0.0.1:9"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0 and "app_links" not in out.stdout, out.stdout


def test_check_notes_an_app_callback_the_apple_paths_do_not_claim(proxy_bin, tmp_path):
    cfg = write(tmp_path, links="  app_links:\n    apple: { app_ids: [ABCDE12345.com.example.app], paths: [\"/_oauth_callback*\"] }\n",
                provider="    app_callback: /users/auth/google_oauth2/callback\n")
    out = subprocess.run([proxy_bin, "check", "--config", cfg, "--upstream", "http://127.0.0.1:9"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stdout + out.stderr
    assert ("note: oauth.app_links.apple.paths: providers.google.app_callback /users/auth/google_oauth2/callback "
            "is not among them") in out.stdout, out.stdout


def test_unset_the_paths_are_the_sites(proxy_factory, upstream, tmp_path):
    p = proxy_factory(upstream, extra=["--config", write(tmp_path, links="  idp_timeout: 2s\n")])
    get(p, "/.well-known/apple-app-site-association")
    assert [r["target"] for r in upstream.record.requests()] == ["/.well-known/apple-app-site-association"]


def test_check_names_each_mistake_by_its_key(proxy_bin, tmp_path):
    bad = """  app_links:
    apple: { app_ids: [abcde12345.com.example.app, ABCDE12345], paths: [signin] }
    android:
      - { package: example, sha256_cert_fingerprints: ["14:6d"] }
      - { package: com.example.other }
"""
    out = subprocess.run([proxy_bin, "check", "--config", write(tmp_path, bad)], capture_output=True, text=True, timeout=30)
    assert out.returncode == 1
    text = out.stdout + out.stderr
    lines = text.splitlines()
    for key, message in [
        ("oauth.app_links.apple.app_ids", "'abcde12345.com.example.app' is not <Team ID>.<bundle id>"),
        ("oauth.app_links.apple.app_ids", "'ABCDE12345' is not <Team ID>.<bundle id>"),
        ("oauth.app_links.apple.paths", "'signin' must start with /"),
        ("oauth.app_links.android[0].package", "'example' is not an Android package name"),
        ("oauth.app_links.android[0].sha256_cert_fingerprints", "'14:6d' is not 32 upper-case hex pairs"),
        ("oauth.app_links.android[1].sha256_cert_fingerprints", "is required"),
    ]:
        assert any(f": {key} (line " in l and message in l for l in lines), (key, message, text)
    assert "6 problem(s)" in text, "one message per problem"
