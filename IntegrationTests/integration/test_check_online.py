"""`callback-proxy check --online` against the strict test IdP: each operator mistake from a first
run is named by its key path, with what was found, before any user signs in."""
import os
import subprocess

from test_session import IOS, idp  # noqa: F401  (idp: the strict test IdP, one per module)


def check_online(proxy_bin, tmp_path, provider_yaml, ca_file=None):
    oauth = f"oauth: {{ ca_file: {ca_file}, idp_timeout: 3s }}" if ca_file else "oauth: { idp_timeout: 3s }"
    config = tmp_path / "online.yaml"
    config.write_text(f"upstream: http://127.0.0.1:9\n{oauth}\nproviders:\n{provider_yaml}")
    out = subprocess.run([proxy_bin, "check", "--online", "--config", str(config)], capture_output=True, text=True,
                         timeout=30, env={**os.environ, "SSL_CERT_FILE": "/nonexistent", "SSL_CERT_DIR": "/nonexistent"})
    return out.returncode, out.stdout


def oidc(issuer, extra=""):
    return f"""  corp:
    kind: oidc
    handoff: verify
    endpoints: {{ issuer: "{issuer}" {extra} }}
    native: {{ ios: {{ client_id: {IOS}, redirect_uri: "com.example.app:/cb" }} }}
"""


def test_a_correct_provider_passes(proxy_bin, tmp_path, idp):
    code, out = check_online(proxy_bin, tmp_path, oidc(idp.base_url), ca_file=idp.ca_cert)
    assert code == 0, out
    assert "online: every provider's documents fetched and usable" in out


def test_without_oauth_ca_file_the_private_ca_is_named(proxy_bin, tmp_path, idp):
    code, out = check_online(proxy_bin, tmp_path, oidc(idp.base_url))
    assert code == 1, out
    line = [l for l in out.splitlines() if ": oauth.ca_file: " in l]
    assert line and "does not verify against the system CA store (no oauth.ca_file is set)" in line[0], out
    assert "certificate" in line[0]


def test_a_trailing_slash_on_the_issuer_is_named_with_both_values(proxy_bin, tmp_path, idp):
    code, out = check_online(proxy_bin, tmp_path, oidc(idp.base_url + "/"), ca_file=idp.ca_cert)
    assert code == 1, out
    line = [l for l in out.splitlines() if "providers.corp.endpoints.issuer:" in l]
    assert line, out
    assert f'document issuer "{idp.base_url}" does not equal endpoints.issuer "{idp.base_url}/"' in line[0]
    assert "they differ only in a trailing /" in line[0]


def test_a_jwks_that_is_not_there_is_named_with_its_status(proxy_bin, tmp_path, idp):
    google = f"""  g:
    kind: google
    handoff: verify
    endpoints: {{ jwks: "{idp.base_url}/no-such-keys" }}
    native: {{ ios: {{ client_id: {IOS} }} }}
"""
    code, out = check_online(proxy_bin, tmp_path, google, ca_file=idp.ca_cert)
    assert code == 1, out
    assert f"providers.g.endpoints.jwks: {idp.base_url}/no-such-keys: answered HTTP 404" in out, out


def test_keys_for_the_wrong_algorithm_are_named(proxy_bin, tmp_path, idp):
    google = f"""  g:
    kind: google
    handoff: verify
    algorithms: [ES256]
    endpoints: {{ jwks: "{idp.base_url}/jwks" }}
    native: {{ ios: {{ client_id: {IOS} }} }}
"""
    code, out = check_online(proxy_bin, tmp_path, google, ca_file=idp.ca_cert)
    # The test IdP signs with RS256 only (IntegrationTests/idp: ID_TOKEN_ALG), so its JWKS has RSA keys alone.
    assert code == 1 and f"providers.g.endpoints.jwks: {idp.base_url}/jwks: no key can verify ES256 id_tokens" in out, out
