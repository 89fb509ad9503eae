"""`oauth.session.jwt_assertion`: the proxy signs a short-lived JWT about the signed-in user and adds
it upstream; the app verifies it with the keys on the internal listener. Verified here with PyJWT
(an implementation independent of the proxy's), as an app such as Grafana's `[auth.jwt]` would:
signature by the JWKS, `iss`, `aud`, `exp`.
"""
import base64
import hashlib
import json
import subprocess
import time
import urllib.request

import jwt
import pytest

from test_session import get, idp, session_config, set_cookies, sign_in  # noqa: F401  (idp: fixture)


def make_key(path):
    """A P-256 key as the docs tell operators to make one."""
    key = subprocess.run("openssl ecparam -name prime256v1 -genkey -noout | openssl pkcs8 -topk8 -nocrypt",
                         shell=True, check=True, capture_output=True).stdout
    path.write_bytes(key)
    return path


def assertion_proxy(proxy_factory, upstream, tmp_path, idp, assertion):
    config = tmp_path / "session.yaml"
    text = session_config(idp).replace("session: { secret_env: SESSION_SECRET,",
                                       f"session: {{ jwt_assertion: {assertion}, secret_env: SESSION_SECRET,")
    config.write_text(text)
    return proxy_factory(upstream, extra=["--config", str(config)])


@pytest.fixture
def keys(tmp_path):
    return make_key(tmp_path / "assertion.pem"), make_key(tmp_path / "previous.pem")


@pytest.fixture
def aproxy(proxy_factory, upstream, tmp_path, idp, keys):
    return assertion_proxy(proxy_factory, upstream, tmp_path, idp,
                           f"{{ signing_key_file: {keys[0]}, previous_signing_key_file: {keys[1]}, "
                           "issuer: https://app.example.com, audience: grafana }")


def jwks(p):
    with urllib.request.urlopen(f"http://127.0.0.1:{p.internal_port}/.well-known/jwks.json", timeout=5) as r:
        assert r.headers["Content-Type"] == "application/json"
        return json.load(r)


def thumbprint(jwk):
    """RFC 7638 §3.2 for an EC key."""
    members = json.dumps({k: jwk[k] for k in ("crv", "kty", "x", "y")}, separators=(",", ":"), sort_keys=True)
    return base64.urlsafe_b64encode(hashlib.sha256(members.encode()).digest()).rstrip(b"=").decode()


def upstream_headers(p, cookies=None, headers=None):
    e = get(p, "/echo", cookies=cookies, headers=headers).json()
    return [(k.lower(), v) for k, v in e["headers"]]


def signed_in(p, idp):
    r, _, _, _ = sign_in(p, idp, login={"groups": "staff,admins"})
    assert r.status == 302, r
    return {k: v for k, v in set_cookies(r).items() if k.startswith("_oauth_session")}


def verify(token, key_set):
    header = jwt.get_unverified_header(token)
    (jwk,) = [k for k in key_set["keys"] if k["kid"] == header["kid"]]
    public = jwt.PyJWK(jwk).key
    return header, jwt.decode(token, public, algorithms=["ES256"], audience="grafana", issuer="https://app.example.com",
                              options={"require": ["exp", "iat", "iss", "aud", "sub"]})


def test_the_upstream_gets_an_assertion_the_published_keys_verify(aproxy, idp):
    session = signed_in(aproxy, idp)
    names = upstream_headers(aproxy, cookies=session)
    (token,) = [v for k, v in names if k == "x-jwt-assertion"]
    key_set = jwks(aproxy)
    assert len(key_set["keys"]) == 2, "the signing key and the previous one"
    assert [k["kid"] for k in key_set["keys"]] == [thumbprint(k) for k in key_set["keys"]]
    assert all("d" not in k for k in key_set["keys"]), "never the private part"
    header, claims = verify(token, key_set)
    assert header["alg"] == "ES256" and header["typ"] == "JWT" and header["kid"] == key_set["keys"][0]["kid"]
    assert claims["sub"] == dict(names)["x-forwarded-user"] and claims["user"] == claims["sub"]
    assert claims["email"] == "alice@example.test" and claims["email_verified"] is True
    assert claims["groups"] == ["staff", "admins"] and claims["provider"] == "google"
    assert claims["exp"] - claims["iat"] == 60 and abs(claims["iat"] - time.time()) < 30


def test_the_assertion_does_not_verify_under_another_audience_or_key(aproxy, idp, keys):
    token = dict(upstream_headers(aproxy, cookies=signed_in(aproxy, idp)))["x-jwt-assertion"]
    key_set = jwks(aproxy)
    with pytest.raises(jwt.InvalidAudienceError):
        jwt.decode(token, jwt.PyJWK(key_set["keys"][0]).key, algorithms=["ES256"], audience="another-app")
    with pytest.raises(jwt.InvalidSignatureError):   # the previous key is published, never used to sign
        jwt.decode(token, jwt.PyJWK(key_set["keys"][1]).key, algorithms=["ES256"], audience="grafana")


def test_a_client_cannot_send_its_own_assertion_in_any_spelling(aproxy, idp):
    forged = jwt.encode({"sub": "root", "iss": "https://app.example.com", "aud": "grafana"}, "k" * 32, algorithm="HS256")
    spoofs = {"X-Jwt-Assertion": forged, "x_jwt_assertion": forged, "X-JWT-ASSERTION": forged}
    # Signed out: nothing arrives.
    assert not [k for k, v in upstream_headers(aproxy, headers=spoofs) if v == forged or "jwt" in k]
    # Signed in: only the proxy's.
    names = upstream_headers(aproxy, cookies=signed_in(aproxy, idp), headers=spoofs)
    carried = [v for k, v in names if "jwt" in k.replace("_", "-")]
    assert len(carried) == 1 and carried[0] != forged
    verify(carried[0], jwks(aproxy))


def test_forward_auth_answers_with_the_assertion(aproxy, idp):
    r = get(aproxy, "/_oauth/auth", cookies=signed_in(aproxy, idp))
    assert r.status == 202, r
    _, claims = verify(r.one("x-jwt-assertion"), jwks(aproxy))
    assert claims["email"] == "alice@example.test"


def test_without_the_setting_no_keys_are_published_and_the_name_is_still_stripped(proxy_factory, upstream, tmp_path, idp):
    config = tmp_path / "session.yaml"
    config.write_text(session_config(idp))
    p = proxy_factory(upstream, extra=["--config", str(config)])
    with pytest.raises(urllib.error.HTTPError) as e:
        jwks(p)
    assert e.value.code == 404
    names = upstream_headers(p, cookies=signed_in(p, idp), headers={"X-Jwt-Assertion": "forged"})
    assert not [k for k, v in names if "jwt" in k or v == "forged"]


def test_a_key_that_is_not_p256_is_refused_by_check(proxy_bin, tmp_path, idp):
    rsa = tmp_path / "rsa.pem"
    subprocess.run(["openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", str(rsa)],
                   check=True, capture_output=True)
    config = tmp_path / "session.yaml"
    config.write_text(session_config(idp).replace("session: { secret_env: SESSION_SECRET,",
                                                  f"session: {{ jwt_assertion: {{ signing_key_file: {rsa} }}, secret_env: SESSION_SECRET,"))
    r = subprocess.run([proxy_bin, "check", "--config", str(config)], capture_output=True, text=True)
    assert r.returncode != 0
    assert "oauth.session.jwt_assertion.signing_key_file (line 5): must be a P-256 (prime256v1) private key" in r.stdout, r.stdout
    assert "1 problem(s)" in r.stdout, "the key is the only problem"
