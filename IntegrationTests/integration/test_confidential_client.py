"""A confidential native client at an OpenID provider found by discovery, as an operator sets one
up: the IdP registers the client for client_secret_basic only. With the default client_auth
(client_secret_post) the sign-in fails, and the log line carries the IdP's own words
(`error_description`), which name the method; with client_auth: client_secret_basic it works.
"""
import json
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "idp"))
from idp_harness import IdP, make_test_pki  # noqa: E402
from callback_fixtures import encode, send  # noqa: E402

CLIENT = "corp-android"
SECRET = "corp-android-secret-for-tests"
REDIRECT = "http://127.0.0.1/android-callback"


def basic_only_clients(d):
    """The IdP's clients file: the Android app's client, confidential, Basic only."""
    path = d / "clients.json"
    path.write_text(json.dumps({"clients": [{
        "client_id": CLIENT, "type": "web", "client_secret": SECRET,
        "token_endpoint_auth_method": ["client_secret_basic"], "require_pkce": True,
        "redirect_uris": [REDIRECT]}]}))
    return path


@pytest.fixture(scope="module")
def idp(tmp_path_factory):
    d = tmp_path_factory.mktemp("idp")
    with IdP.start(make_test_pki(str(d)), log_dir=d, clients_file=basic_only_clients(d)) as srv:
        yield srv


def start(proxy_factory, upstream, tmp_path, idp, client_auth):
    os.environ["CORP_ANDROID_SECRET"] = SECRET
    config = tmp_path / "corp.yaml"
    config.write_text(f"""
oauth: {{ ca_file: {idp.ca_cert} }}
providers:
  corp:
    kind: oidc
    handoff: verify
    endpoints: {{ issuer: "{idp.base_url}" }}
    native:
      android:
        client_id: {CLIENT}
        redirect_uri: "{REDIRECT}"
        client_secret_env: CORP_ANDROID_SECRET
        {client_auth}
""")
    return proxy_factory(upstream, extra=["--config", str(config)])


def callback(p, idp):
    grant = idp.get_code(CLIENT)
    return send(p, "/_oauth_callback?" + encode([
        ("provider", "corp"), ("platform", "android"), ("client_id", CLIENT), ("redirect_uri", REDIRECT),
        ("code", grant.code), ("state", grant.state), ("code_verifier", grant.code_verifier)]))


def test_the_wrong_client_auth_is_named_by_the_idps_own_words_in_the_log(proxy_factory, upstream, tmp_path, idp):
    p = start(proxy_factory, upstream, tmp_path, idp, "")
    r = callback(p, idp)
    assert r.status == 502, r
    lines = [json.loads(l) for l in p.stderr_text().splitlines() if '"callback failed"' in l]
    assert lines, p.stderr_text()
    detail = lines[-1]["detail"]
    assert "error=invalid_client" in detail, detail
    assert 'error_description="The client is not registered for client_secret_post."' in detail, detail
    # A refused client stays refused until the configuration changes: a setting, named.
    assert lines[-1]["source"] == "config" and lines[-1]["setting"] == "providers.corp.native.android", lines[-1]
    assert lines[-1]["level"] == "error"
    assert SECRET not in p.stderr_text() + p.stdout_text()


def test_with_client_secret_basic_the_sign_in_is_verified(proxy_factory, upstream, tmp_path, idp):
    p = start(proxy_factory, upstream, tmp_path, idp, "client_auth: client_secret_basic")
    r = callback(p, idp)
    assert r.status == 200, r
    assert SECRET not in p.stderr_text() + p.stdout_text()
