"""Self-tests of the strict test IdP: it must refuse everything Google refuses (and a little more),
and a correct native-client flow must yield an id_token that verifies against its JWKS.

Every refusal is checked three ways: the HTTP status, the OAuth `error` code, and the `reason` the
IdP recorded in /_test/stats (so a refusal for the wrong reason does not pass).
"""

import base64
import json
import socket
import ssl
import subprocess
import sys
import threading
import time
from html.parser import HTMLParser
from urllib.parse import parse_qs, urlsplit

import jwt
import pytest
import requests

from idp_harness import EXAMPLE_CLIENTS, SERVER, pkce_pair, sub_for

IOS = "123-ios.apps.googleusercontent.com"
ANDROID = "123-android.apps.googleusercontent.com"
WEB = "123-web.apps.googleusercontent.com"
NATIVE = [IOS, ANDROID]


def last_event(idp):
    return idp.stats()["events"][-1]


def assert_refused(idp, resp, status, error, reason):
    assert resp.status_code == status, resp.text
    body = resp.json()
    assert body["error"] == error, body
    assert resp.headers["Cache-Control"] == "no-store"
    event = last_event(idp)
    assert (event["outcome"], event["reason"], event["error"]) == ("failure", reason, error)


def redirect_params(resp):
    assert resp.status_code == 302, resp.text
    return parse_qs(urlsplit(resp.headers["Location"]).query)


# -------------------------------------------------------------------------------------------------
# Discovery and keys


def test_discovery_names_the_real_port_and_only_strict_options(idp):
    doc = idp.discovery()
    assert doc["issuer"] == idp.base_url and f":{idp.port}" in doc["issuer"]
    assert doc["token_endpoint"] == idp.base_url + "/token"
    assert doc["jwks_uri"] == idp.base_url + "/jwks"
    assert doc["code_challenge_methods_supported"] == ["S256"]
    assert doc["id_token_signing_alg_values_supported"] == ["RS256"]
    assert doc["response_types_supported"] == ["code"]
    assert set(doc["token_endpoint_auth_methods_supported"]) == {
        "client_secret_post", "client_secret_basic", "none"}


def test_jwks_has_one_public_rs256_key_and_a_cache_lifetime(idp):
    resp = idp.request("GET", "/jwks")
    keys = resp.json()["keys"]
    assert len(keys) == 1
    assert keys[0]["kty"] == "RSA" and keys[0]["alg"] == "RS256" and keys[0]["use"] == "sig"
    assert keys[0]["kid"] and "d" not in keys[0] and "p" not in keys[0]
    assert resp.headers["Cache-Control"] == "public, max-age=3600"


# -------------------------------------------------------------------------------------------------
# Happy paths


@pytest.mark.parametrize("client_id", NATIVE)
def test_native_client_full_flow_yields_an_id_token_that_verifies(idp, client_id):
    grant = idp.get_code(client_id, username="alice@example.test")
    assert grant.location.startswith(idp.clients[client_id]["redirect_uris"][0] + "?")

    resp = idp.exchange(grant)     # client_id + code_verifier, no secret

    assert resp.status_code == 200, resp.text
    assert resp.headers["Cache-Control"] == "no-store"
    body = resp.json()
    assert body["token_type"] == "Bearer" and body["access_token"] and body["expires_in"] == 3599
    assert "refresh_token" not in body
    claims = idp.verify_id_token(body["id_token"], client_id, nonce=grant.nonce)
    assert claims["iss"] == idp.issuer
    assert claims["aud"] == client_id and claims["azp"] == client_id
    assert claims["sub"] == sub_for("alice@example.test")
    assert claims["email"] == "alice@example.test" and claims["email_verified"] is True
    assert claims["name"] == "Alice"
    assert claims["nonce"] == grant.nonce
    assert 0 < claims["exp"] - claims["iat"] <= 3600 and abs(claims["iat"] - time.time()) < 10
    header = jwt.get_unverified_header(body["id_token"])
    assert header["alg"] == "RS256" and header["kid"] == idp.jwks()["keys"][0]["kid"]

    userinfo = idp.request("GET", "/userinfo",
                           headers={"Authorization": f"Bearer {body['access_token']}"})
    assert userinfo.status_code == 200 and userinfo.json()["sub"] == claims["sub"]

    stats = idp.stats()
    assert stats["token"] == {"requests": 1, "successes": 1, "failures": 0, "forced": 0}
    assert stats["clients"][client_id]["successes"] == 1


@pytest.mark.parametrize("auth", ["post", "basic"])
@pytest.mark.parametrize("pkce", [False, True])
def test_web_client_authenticates_with_its_secret_by_post_or_basic(idp, auth, pkce):
    grant = idp.get_code(WEB, pkce=pkce)
    resp = idp.exchange(grant, client_secret=idp.web_secret(WEB), auth=auth)
    assert resp.status_code == 200, resp.text
    idp.verify_id_token(resp.json()["id_token"], WEB, nonce=grant.nonce)
    assert last_event(idp)["outcome"] == "success"


def test_without_nonce_the_id_token_has_none(idp):
    grant = idp.get_code(IOS, nonce=None)
    claims = idp.verify_id_token(idp.exchange(grant).json()["id_token"], IOS)
    assert "nonce" not in claims


def test_scope_decides_the_claims(idp):
    grant = idp.get_code(IOS, scope="openid")
    claims = idp.verify_id_token(idp.exchange(grant).json()["id_token"], IOS)
    assert "email" not in claims and "name" not in claims and claims["sub"]


def test_login_form_fields_set_the_claims(idp):
    grant = idp.get_code(ANDROID, username="bob",
                         login={"name": "Bob B", "email": "bob@corp.test", "email_verified": "false"})
    claims = idp.verify_id_token(idp.exchange(grant).json()["id_token"], ANDROID)
    assert claims["sub"] == sub_for("bob")
    assert (claims["email"], claims["email_verified"], claims["name"]) == ("bob@corp.test", False,
                                                                           "Bob B")


def test_groups_and_the_workspace_domain_reach_the_id_token_when_given(idp):
    grant = idp.get_code(ANDROID, username="carol", login={"groups": "staff, admins", "hd": "corp.test"})
    claims = idp.verify_id_token(idp.exchange(grant).json()["id_token"], ANDROID)
    assert claims["groups"] == ["staff", "admins"] and claims["realm_access"] == {"roles": ["staff", "admins"]}
    assert claims["hd"] == "corp.test"
    plain = idp.get_code(ANDROID, username="dave")
    claims = idp.verify_id_token(idp.exchange(plain).json()["id_token"], ANDROID)
    assert "groups" not in claims and "hd" not in claims


class _FormParser(HTMLParser):
    def __init__(self):
        super().__init__()
        self.forms, self.fields, self.buttons, self.external = [], [], [], []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "form":
            self.forms.append(a)
        elif tag in ("input", "select"):
            self.fields.append(a.get("name"))
        elif tag == "button":
            self.buttons.append((a.get("name"), a.get("value")))
        for attr in ("src", "href"):
            if a.get(attr, "").startswith(("http:", "https:", "//")):
                self.external.append(a[attr])


def test_login_page_is_a_self_contained_form_that_posts_back_to_itself(idp):
    params, _ = idp.authorize_params(IOS)
    page = idp.request("GET", "/authorize", params=params)
    assert page.status_code == 200 and page.headers["Content-Type"].startswith("text/html")
    assert page.headers["Cache-Control"] == "no-store"
    parser = _FormParser()
    parser.feed(page.text)
    assert len(parser.forms) == 1
    assert parser.forms[0]["method"] == "post" and "action" not in parser.forms[0]
    assert "username" in parser.fields
    assert ("action", "approve") in parser.buttons and ("action", "deny") in parser.buttons
    assert parser.external == []     # no CDN: the test machines have no network


def test_deny_redirects_with_access_denied_and_the_state(idp):
    location = idp.deny(IOS, state="st-123")
    assert location.startswith("com.googleusercontent.apps.123-ios:/oauth2redirect?")
    q = parse_qs(urlsplit(location).query)
    assert q["error"] == ["access_denied"] and q["state"] == ["st-123"] and "code" not in q


def test_login_without_username_shows_the_form_again(idp):
    params, _ = idp.authorize_params(IOS)
    resp = idp.request("POST", "/authorize", params=params, data={"action": "approve"})
    assert resp.status_code == 400 and 'id="problem"' in resp.text and "Location" not in resp.headers


# -------------------------------------------------------------------------------------------------
# Token endpoint refusals: PKCE


def test_wrong_code_verifier_is_refused(idp):
    grant = idp.get_code(IOS)
    resp = idp.exchange(grant, override={"code_verifier": pkce_pair()[0]})
    assert_refused(idp, resp, 400, "invalid_grant", "pkce_mismatch")


def test_missing_code_verifier_is_refused(idp):
    grant = idp.get_code(IOS)
    resp = idp.exchange(grant, omit=["code_verifier"])
    assert_refused(idp, resp, 400, "invalid_grant", "missing_code_verifier")


def test_malformed_code_verifier_is_refused(idp):
    grant = idp.get_code(ANDROID)
    resp = idp.exchange(grant, override={"code_verifier": "short"})
    assert_refused(idp, resp, 400, "invalid_grant", "malformed_code_verifier")


def test_the_challenge_itself_is_not_a_verifier(idp):
    grant = idp.get_code(IOS)
    resp = idp.exchange(grant, override={"code_verifier": grant.code_challenge})
    assert_refused(idp, resp, 400, "invalid_grant", "pkce_mismatch")


def test_code_verifier_without_a_challenge_is_refused(idp):
    grant = idp.get_code(WEB, pkce=False)
    resp = idp.exchange(grant, client_secret=idp.web_secret(WEB),
                        override={"code_verifier": pkce_pair()[0]})
    assert_refused(idp, resp, 400, "invalid_grant", "unexpected_code_verifier")


# -------------------------------------------------------------------------------------------------
# Token endpoint refusals: binding of the code


def test_redirect_uri_different_from_the_authorize_one_is_refused(idp):
    grant = idp.get_code(IOS)
    resp = idp.exchange(grant, override={"redirect_uri": "com.googleusercontent.apps.123-ios:/other"})
    assert_refused(idp, resp, 400, "redirect_uri_mismatch", "redirect_uri_mismatch")


def test_redirect_uri_missing_at_the_token_endpoint_is_refused(idp):
    grant = idp.get_code(IOS)
    resp = idp.exchange(grant, omit=["redirect_uri"])
    assert_refused(idp, resp, 400, "invalid_request", "missing_redirect_uri")


def test_code_issued_to_another_client_is_refused(idp):
    grant = idp.get_code(IOS)
    resp = idp.exchange(grant, override={"client_id": ANDROID,
                                         "redirect_uri": "com.example.app:/oauth2redirect"})
    assert_refused(idp, resp, 400, "invalid_grant", "code_issued_to_another_client")
    # ... and the presentation consumed it: the rightful client cannot use it either.
    assert_refused(idp, idp.exchange(grant), 400, "invalid_grant", "code_already_redeemed")


def test_code_is_single_use(idp):
    grant = idp.get_code(IOS)
    assert idp.exchange(grant).status_code == 200
    assert_refused(idp, idp.exchange(grant), 400, "invalid_grant", "code_already_redeemed")


def test_a_failed_redemption_consumes_the_code(idp):
    grant = idp.get_code(ANDROID)
    bad = idp.exchange(grant, override={"code_verifier": pkce_pair()[0]})
    assert bad.status_code == 400
    assert_refused(idp, idp.exchange(grant), 400, "invalid_grant", "code_already_redeemed")


def test_concurrent_redemptions_of_one_code_yield_one_token(idp):
    grant = idp.get_code(IOS)
    results = []
    threads = [threading.Thread(target=lambda: results.append(idp.exchange(grant).status_code))
               for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [200] + [400] * 5


def test_expired_code_is_refused(idp):
    grant = idp.get_code(IOS)
    idp.set_clock(61)        # the IdP's clock, 61 s on: past the 60 s lifetime
    assert_refused(idp, idp.exchange(grant), 400, "invalid_grant", "code_expired")


def test_lifetime_flags_and_real_time_code_expiry(idp_factory):
    srv = idp_factory("--code-ttl", "1", "--id-token-ttl", "120", "--jwks-max-age", "7")
    assert srv.request("GET", "/jwks").headers["Cache-Control"] == "public, max-age=7"
    claims = srv.verify_id_token(srv.exchange(srv.get_code(IOS)).json()["id_token"], IOS)
    assert claims["exp"] - claims["iat"] == 120
    grant = srv.get_code(IOS)
    time.sleep(1.2)
    assert_refused(srv, srv.exchange(grant), 400, "invalid_grant", "code_expired")


def test_unknown_code_is_refused(idp):
    grant = idp.get_code(IOS)
    resp = idp.exchange(grant, override={"code": grant.code[:-1] + ("A" if grant.code[-1] != "A" else "B")})
    assert_refused(idp, resp, 400, "invalid_grant", "unknown_code")


# -------------------------------------------------------------------------------------------------
# Token endpoint refusals: client authentication


@pytest.mark.parametrize("client_id", NATIVE)
def test_client_secret_from_a_public_client_is_refused_in_the_body(idp, client_id):
    grant = idp.get_code(client_id)
    resp = idp.exchange(grant, client_secret="anything")
    assert_refused(idp, resp, 401, "invalid_client", "public_client_sent_secret")


def test_client_secret_from_a_public_client_is_refused_in_basic_auth(idp):
    grant = idp.get_code(IOS)
    resp = idp.exchange(grant, client_secret="anything", auth="basic")
    assert_refused(idp, resp, 401, "invalid_client", "public_client_sent_secret")
    assert resp.headers["WWW-Authenticate"].startswith("Basic")


def test_empty_client_secret_from_a_public_client_is_refused(idp):
    grant = idp.get_code(IOS)
    resp = idp.exchange(grant, override={"client_secret": ""})
    assert_refused(idp, resp, 401, "invalid_client", "public_client_sent_secret")


def test_unknown_client_is_refused(idp):
    grant = idp.get_code(IOS)
    resp = idp.exchange(grant, override={"client_id": "999-nobody.apps.googleusercontent.com"})
    assert_refused(idp, resp, 401, "invalid_client", "unknown_client")


def test_missing_client_id_is_refused(idp):
    grant = idp.get_code(IOS)
    resp = idp.exchange(grant, omit=["client_id"])
    assert_refused(idp, resp, 400, "invalid_request", "missing_client_id")


def test_web_client_with_a_wrong_secret_is_refused(idp):
    grant = idp.get_code(WEB)
    resp = idp.exchange(grant, client_secret="wrong-secret-123")
    assert_refused(idp, resp, 401, "invalid_client", "bad_client_secret")


def test_web_client_without_a_secret_is_refused(idp):
    grant = idp.get_code(WEB)
    resp = idp.exchange(grant)
    assert_refused(idp, resp, 400, "invalid_request", "missing_client_secret")


def test_secret_in_both_basic_and_body_is_refused(idp):
    grant = idp.get_code(WEB)
    resp = idp.exchange(grant, client_secret=idp.web_secret(WEB), auth="basic",
                        override={"client_secret": idp.web_secret(WEB)})
    assert_refused(idp, resp, 400, "invalid_request", "multiple_client_auth_methods")


# -------------------------------------------------------------------------------------------------
# Token endpoint refusals: request shape


def test_parameters_in_the_query_string_are_refused(idp):
    grant = idp.get_code(IOS)
    resp = idp.request("POST", "/token", params={"code": grant.code},
                       data={"grant_type": "authorization_code", "client_id": IOS,
                             "redirect_uri": grant.redirect_uri,
                             "code_verifier": grant.code_verifier})
    assert_refused(idp, resp, 400, "invalid_request", "parameters_in_query")


def test_json_body_is_refused(idp):
    grant = idp.get_code(IOS)
    resp = idp.request("POST", "/token", json={"grant_type": "authorization_code", "code": grant.code,
                                               "client_id": IOS})
    assert_refused(idp, resp, 400, "invalid_request", "bad_content_type")


def test_duplicate_parameters_are_refused(idp):
    grant = idp.get_code(IOS)
    body = (f"grant_type=authorization_code&code={grant.code}&client_id={IOS}&client_id={ANDROID}"
            f"&redirect_uri={grant.redirect_uri}&code_verifier={grant.code_verifier}")
    resp = idp.request("POST", "/token", data=body,
                       headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert_refused(idp, resp, 400, "invalid_request", "duplicate_parameter")


@pytest.mark.parametrize("omit, reason", [("grant_type", "missing_grant_type"),
                                          ("code", "missing_code")])
def test_missing_grant_type_or_code_is_refused(idp, omit, reason):
    resp = idp.exchange(idp.get_code(IOS), omit=[omit])
    assert_refused(idp, resp, 400, "invalid_request", reason)


@pytest.mark.parametrize("header, reason", [
    ("Basic " + base64.b64encode(b"no-colon").decode(), "malformed_basic_credentials"),
    ("Basic %%%", "malformed_basic_credentials"),
    ("Bearer abc", "unsupported_auth_scheme"),
])
def test_malformed_authorization_header_is_refused(idp, header, reason):
    resp = idp.exchange(idp.get_code(WEB), headers={"Authorization": header})
    assert_refused(idp, resp, 401, "invalid_client", reason)


def test_client_id_differing_between_header_and_body_is_refused(idp):
    grant = idp.get_code(WEB)
    basic = base64.b64encode(f"{WEB}:{idp.web_secret(WEB)}".encode()).decode()
    resp = idp.exchange(grant, override={"client_id": IOS},
                        headers={"Authorization": f"Basic {basic}"})
    assert_refused(idp, resp, 400, "invalid_request", "client_id_conflict")


@pytest.mark.parametrize("grant_type", ["client_credentials", "password", "urn:ietf:params:oauth:grant-type:device_code"])
def test_other_grant_types_are_refused(idp, grant_type):
    resp = idp.request("POST", "/token", data={"grant_type": grant_type, "client_id": IOS})
    assert_refused(idp, resp, 400, "unsupported_grant_type", "unsupported_grant_type")


# -------------------------------------------------------------------------------------------------
# Refresh tokens (offline access)


def offline_tokens(idp, client_id=IOS, username="rita@example.test", how="scope", login=None):
    """A sign-in that grants offline access: the offline_access scope, or Google's
    access_type=offline with prompt=consent. Returns the token response's body."""
    if how == "scope":
        grant = idp.get_code(client_id, username=username, scope="openid email profile offline_access", login=login)
    else:
        grant = idp.get_code(client_id, username=username, login=login,
                             extra={"access_type": "offline", "prompt": "consent"})
    secret = idp.web_secret(client_id) if client_id == WEB else None
    resp = idp.exchange(grant, client_secret=secret)
    assert resp.status_code == 200, resp.text
    return resp.json()


@pytest.mark.parametrize("extra", [{}, {"access_type": "offline"}, {"access_type": "online", "prompt": "consent"}])
def test_no_refresh_token_without_offline_access(idp, extra):
    """access_type=offline alone is not enough: like Google for a returning user, the refresh
    token comes only with prompt=consent."""
    grant = idp.get_code(IOS, extra=extra)
    assert "refresh_token" not in idp.exchange(grant).json()


def test_an_unknown_access_type_is_refused(idp):
    params, _ = idp.authorize_params(IOS, extra={"access_type": "forever"})
    resp = idp.request("GET", "/authorize", params=params, allow_redirects=False)
    assert redirect_params(resp)["error"] == ["invalid_request"]


@pytest.mark.parametrize("how", ["scope", "google"])
@pytest.mark.parametrize("client_id", [IOS, WEB])
def test_a_refresh_rotates_the_token_and_brings_a_new_id_token(idp, client_id, how):
    first = offline_tokens(idp, client_id, how=how)
    assert first["refresh_token"]
    secret = idp.web_secret(client_id) if client_id == WEB else None
    resp = idp.refresh(client_id, first["refresh_token"], client_secret=secret)
    assert resp.status_code == 200, resp.text
    assert resp.headers["Cache-Control"] == "no-store"
    body = resp.json()
    assert body["access_token"] != first["access_token"]
    assert body["refresh_token"] and body["refresh_token"] != first["refresh_token"]
    claims = idp.verify_id_token(body["id_token"], client_id)
    assert claims["sub"] == sub_for("rita@example.test") and "nonce" not in claims
    assert last_event(idp)["grant"] == "refresh_token" and last_event(idp)["outcome"] == "success"
    # The old token is spent; the new one works once.
    assert_refused(idp, idp.refresh(client_id, first["refresh_token"], client_secret=secret),
                   400, "invalid_grant", "refresh_token_already_used")
    assert idp.refresh(client_id, body["refresh_token"], client_secret=secret).status_code == 200


def test_a_refresh_token_is_bound_to_its_client(idp):
    tokens = offline_tokens(idp, IOS)
    assert_refused(idp, idp.refresh(ANDROID, tokens["refresh_token"]), 400, "invalid_grant",
                   "refresh_token_issued_to_another_client")
    # Another client's try does not burn it.
    assert idp.refresh(IOS, tokens["refresh_token"]).status_code == 200


def test_a_refresh_needs_the_clients_own_authentication(idp):
    web = offline_tokens(idp, WEB)
    assert_refused(idp, idp.refresh(WEB, web["refresh_token"]), 400, "invalid_request", "missing_client_secret")
    assert_refused(idp, idp.refresh(WEB, web["refresh_token"], client_secret="wrong-secret"), 401,
                   "invalid_client", "bad_client_secret")
    ios = offline_tokens(idp, IOS)
    assert_refused(idp, idp.refresh(IOS, ios["refresh_token"], client_secret="x"), 401, "invalid_client",
                   "public_client_sent_secret")
    # Refused before the token was looked at: both still work.
    assert idp.refresh(WEB, web["refresh_token"], client_secret=idp.web_secret(WEB), auth="basic").status_code == 200
    assert idp.refresh(IOS, ios["refresh_token"]).status_code == 200


def test_a_revoked_or_unknown_refresh_token_is_invalid_grant(idp):
    tokens = offline_tokens(idp, IOS, username="revoked@example.test")
    assert idp.revoke("revoked@example.test") == 1
    assert_refused(idp, idp.refresh(IOS, tokens["refresh_token"]), 400, "invalid_grant", "refresh_token_revoked")
    assert_refused(idp, idp.refresh(IOS, "never-issued"), 400, "invalid_grant", "unknown_refresh_token")


def test_a_disabled_user_cannot_refresh(idp):
    tokens = offline_tokens(idp, IOS, username="gone@example.test")
    idp.change_user("gone@example.test", disabled=True)
    assert_refused(idp, idp.refresh(IOS, tokens["refresh_token"]), 400, "invalid_grant", "user_disabled")


def test_a_refresh_sees_the_users_groups_now(idp):
    tokens = offline_tokens(idp, IOS, username="gail@example.test", login={"groups": "staff"})
    assert idp.verify_id_token(tokens["id_token"], IOS)["groups"] == ["staff"]
    idp.change_user("gail@example.test", groups=["staff", "admins"], hd="example.test")
    body = idp.refresh(IOS, tokens["refresh_token"]).json()
    claims = idp.verify_id_token(body["id_token"], IOS)
    assert claims["groups"] == ["staff", "admins"] and claims["hd"] == "example.test"
    userinfo = idp.request("GET", "/userinfo", headers={"Authorization": f"Bearer {body['access_token']}"}).json()
    assert userinfo["groups"] == ["staff", "admins"]


def test_concurrent_refreshes_with_one_token_yield_one_token(idp):
    tokens = offline_tokens(idp, IOS)
    results = []
    threads = [threading.Thread(target=lambda: results.append(idp.refresh(IOS, tokens["refresh_token"]).status_code))
               for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [200] + [400] * 5


def test_refresh_request_shape_is_checked(idp):
    tokens = offline_tokens(idp, IOS)
    assert_refused(idp, idp.refresh(IOS, ""), 400, "invalid_request", "missing_refresh_token")
    assert_refused(idp, idp.refresh(IOS, tokens["refresh_token"], override={"code": "x"}), 400, "invalid_request",
                   "unexpected_parameter")
    # Shape refusals come before the token is looked at: it still works, once.
    body = idp.refresh(IOS, tokens["refresh_token"]).json()
    # Like a code, a token its own client presents is spent, whatever comes after.
    assert_refused(idp, idp.refresh(IOS, body["refresh_token"], override={"scope": "openid https://x"}),
                   400, "invalid_scope", "invalid_scope")
    assert_refused(idp, idp.refresh(IOS, body["refresh_token"]), 400, "invalid_grant", "refresh_token_already_used")


def test_id_token_modes_apply_to_refreshes_and_omit_removes_it(idp):
    tokens = offline_tokens(idp, IOS)
    idp.set_mode(id_token="omit")
    body = idp.refresh(IOS, tokens["refresh_token"]).json()
    assert "id_token" not in body and body["refresh_token"]
    idp.set_mode(id_token="other_subject")
    body = idp.refresh(IOS, body["refresh_token"]).json()
    assert idp.verify_id_token(body["id_token"], IOS)["sub"] == sub_for("someone-else@example.test")


# -------------------------------------------------------------------------------------------------
# Authorization endpoint refusals


def test_public_client_must_send_a_code_challenge(idp):
    params, _ = idp.authorize_params(IOS, pkce=False, state="s-1")
    q = redirect_params(idp.request("GET", "/authorize", params=params))
    assert q["error"] == ["invalid_request"] and q["state"] == ["s-1"] and "code" not in q


@pytest.mark.parametrize("method", ["plain", None])
def test_only_s256_is_accepted(idp, method):
    params, _ = idp.authorize_params(ANDROID, code_challenge_method=method)
    q = redirect_params(idp.request("GET", "/authorize", params=params))
    assert q["error"] == ["invalid_request"]
    assert "S256" in q["error_description"][0]


def test_unknown_client_gets_an_error_page_not_a_redirect(idp):
    params, _ = idp.authorize_params("999-nobody.apps.googleusercontent.com",
                                     redirect_uri="com.example.app:/oauth2redirect")
    resp = idp.request("GET", "/authorize", params=params)
    assert resp.status_code == 400 and "Location" not in resp.headers
    assert resp.headers["X-OAuth-Error"] == "invalid_client"


def test_unregistered_redirect_uri_gets_an_error_page_not_a_redirect(idp):
    for uri in ["com.example.app:/oauth2redirect",                        # another client's
                "com.googleusercontent.apps.123-ios:/oauth2redirect/x",   # a longer path
                "https://attacker.example/cb"]:
        params, _ = idp.authorize_params(IOS, redirect_uri=uri)
        resp = idp.request("GET", "/authorize", params=params)
        assert resp.status_code == 400 and "Location" not in resp.headers, uri
        assert resp.headers["X-OAuth-Error"] == "redirect_uri_mismatch"


def test_missing_redirect_uri_gets_an_error_page(idp):
    params, _ = idp.authorize_params(IOS)
    del params["redirect_uri"]
    resp = idp.request("GET", "/authorize", params=params)
    assert resp.status_code == 400 and resp.headers["X-OAuth-Error"] == "invalid_request"


def test_unknown_scope_is_refused(idp):
    params, _ = idp.authorize_params(IOS, scope="openid email https://www.googleapis.com/auth/drive")
    assert redirect_params(idp.request("GET", "/authorize", params=params))["error"] == [
        "invalid_scope"]


@pytest.mark.parametrize("response_type", ["token", "code id_token", 'co"de\\'])
def test_response_type_other_than_code_is_refused(idp, response_type):
    params, _ = idp.authorize_params(IOS, extra={"response_type": response_type}, state="s-9")
    q = redirect_params(idp.request("GET", "/authorize", params=params))
    assert q["error"] == ["unsupported_response_type"] and q["state"] == ["s-9"]
    params["redirect_uri"] = "https://attacker.example/cb"
    resp = idp.request("GET", "/authorize", params=params)
    assert resp.status_code == 400 and "Location" not in resp.headers


@pytest.mark.parametrize("change, error", [
    ({"prompt": "none"}, "login_required"),
    ({"response_mode": "fragment"}, "invalid_request"),
    ({"request": "eyJhbGciOiJub25lIn0.e30."}, "request_not_supported"),
    ({"scope": ""}, "invalid_request"),
    ({"code_challenge": "too-short"}, "invalid_request"),
])
def test_other_authorize_refusals_redirect_with_an_error(idp, change, error):
    params, _ = idp.authorize_params(ANDROID, extra=change, state="s-2")
    q = redirect_params(idp.request("GET", "/authorize", params=params))
    assert q["error"] == [error] and q["state"] == ["s-2"] and "code" not in q


def test_repeated_redirect_uri_gets_an_error_page(idp):
    params, _ = idp.authorize_params(IOS)
    query = list(params.items()) + [("redirect_uri", params["redirect_uri"])]
    resp = idp.request("GET", "/authorize", params=query)
    assert resp.status_code == 400 and "Location" not in resp.headers


def test_nonce_of_a_live_code_cannot_be_reused(idp):
    idp.get_code(IOS, nonce="n-fixed-1")
    params, _ = idp.authorize_params(IOS, nonce="n-fixed-1")
    q = redirect_params(idp.request("GET", "/authorize", params=params))
    assert q["error"] == ["invalid_request"]


# -------------------------------------------------------------------------------------------------
# Test hooks


def test_stats_count_per_client_with_reasons_and_reset(idp):
    ok = idp.get_code(IOS)
    idp.exchange(ok)
    idp.exchange(ok)
    idp.exchange(idp.get_code(ANDROID), override={"code_verifier": pkce_pair()[0]})
    stats = idp.stats()
    assert stats["token"] == {"requests": 3, "successes": 1, "failures": 2, "forced": 0}
    assert stats["clients"][IOS] == {"requests": 2, "successes": 1, "failures": 1, "forced": 0,
                                     "reasons": {"code_already_redeemed": 1}}
    assert stats["clients"][ANDROID]["reasons"] == {"pkce_mismatch": 1}
    assert stats["authorize"]["codes_issued"] == 2
    idp.reset_stats()
    assert idp.stats()["token"]["requests"] == 0 and idp.stats()["clients"] == {}


def test_secrets_hook_lists_what_was_issued_and_presented_and_survives_reset(idp):
    grant = idp.get_code(IOS)
    tokens = idp.exchange(grant).json()
    web = idp.get_code(WEB)
    secret = idp.web_secret(WEB)
    idp.exchange(web, client_secret=secret, auth="basic")
    idp.reset()
    seen = idp.issued_secrets()
    assert {grant.code, web.code} <= set(seen["code"])
    assert grant.code_verifier in seen["code_verifier"]
    assert tokens["access_token"] in seen["access_token"] and tokens["id_token"] in seen["id_token"]
    assert any(a.startswith("Basic ") for a in seen["authorization"])
    assert "refresh_token" not in tokens
    offline = offline_tokens(idp, IOS)
    assert offline["refresh_token"] in idp.issued_secrets()["refresh_token"]


def test_rotate_keys_replaces_the_signing_key(idp):
    old_token = idp.exchange(idp.get_code(IOS)).json()["id_token"]
    old_kid = jwt.get_unverified_header(old_token)["kid"]

    new_kid = idp.rotate_keys()

    assert new_kid != old_kid
    assert [k["kid"] for k in idp.jwks()["keys"]] == [new_kid]
    with pytest.raises(jwt.InvalidTokenError):
        idp.verify_id_token(old_token, IOS)
    new_token = idp.exchange(idp.get_code(IOS)).json()["id_token"]
    assert jwt.get_unverified_header(new_token)["kid"] == new_kid
    idp.verify_id_token(new_token, IOS)


def test_mode_500_answers_500_without_consuming_the_code(idp):
    grant = idp.get_code(IOS)
    idp.set_mode(token="500")
    resp = idp.exchange(grant)
    assert resp.status_code == 500 and resp.json()["error"] == "server_error"
    assert last_event(idp)["reason"] == "mode:500"
    idp.set_mode(token="ok")
    assert idp.exchange(grant).status_code == 200


def test_mode_garbage_answers_200_with_a_body_that_is_not_json(idp):
    idp.set_mode(token="garbage")
    resp = idp.exchange(idp.get_code(IOS))
    assert resp.status_code == 200
    with pytest.raises(ValueError):
        json.loads(resp.content)


def test_mode_slow_delays_then_answers_normally(idp):
    grant = idp.get_code(IOS)
    idp.set_mode(token="slow:400")
    started = time.monotonic()
    resp = idp.exchange(grant)
    assert time.monotonic() - started >= 0.4
    assert resp.status_code == 200
    assert last_event(idp)["mode"] == "slow:400"


def test_mode_close_drops_the_connection_without_an_answer(idp):
    grant = idp.get_code(IOS)
    idp.set_mode(token="close", times=1)
    with pytest.raises(requests.ConnectionError):
        idp.exchange(grant)
    assert last_event(idp)["reason"] == "mode:close"
    # times=1: the next request is answered normally, and the code was never looked at.
    assert idp.exchange(grant).status_code == 200


def test_mode_times_reverts_after_n_requests(idp):
    idp.set_mode(token="500", times=2)
    grant = idp.get_code(IOS)
    assert [idp.exchange(grant).status_code for _ in range(3)] == [500, 500, 200]


@pytest.mark.parametrize("mode", ["bad_signature", "wrong_issuer", "wrong_audience", "expired",
                                  "issued_in_future", "wrong_nonce", "missing_nonce",
                                  "unknown_kid", "alg_none"])
def test_id_token_modes_produce_tokens_a_verifier_must_refuse(idp, mode):
    idp.set_mode(id_token=mode)
    grant = idp.get_code(IOS)
    resp = idp.exchange(grant)
    assert resp.status_code == 200
    with pytest.raises(jwt.InvalidTokenError):
        claims = idp.verify_id_token(resp.json()["id_token"], IOS, nonce=grant.nonce)
        if mode == "missing_nonce" and "nonce" not in claims:
            raise jwt.InvalidTokenError("nonce missing")


def test_bad_hook_requests_are_refused(idp):
    for body in [{"token": "explode"}, {"nowhere": "500"}, {"token": "500", "times": 0}, {}]:
        assert idp.request("POST", "/_test/mode", json=body).status_code == 400, body
    assert idp.request("POST", "/_test/mode", data="not json").status_code == 400


def test_web_client_registered_for_one_method_and_pkce(idp_factory, tmp_path):
    clients = tmp_path / "clients.json"
    clients.write_text(json.dumps({"clients": [
        {"client_id": "web-post-only", "type": "web", "client_secret": "post-only-secret",
         "token_endpoint_auth_method": "client_secret_post", "require_pkce": True,
         "redirect_uris": ["https://127.0.0.1:8443/cb"]}]}))
    srv = idp_factory(clients_file=clients)
    params, _ = srv.authorize_params("web-post-only", pkce=False)
    assert redirect_params(srv.request("GET", "/authorize", params=params))["error"] == [
        "invalid_request"]
    grant = srv.get_code("web-post-only")
    resp = srv.exchange(grant, client_secret="post-only-secret", auth="basic")
    assert_refused(srv, resp, 401, "invalid_client", "auth_method_not_allowed")
    grant = srv.get_code("web-post-only")
    assert srv.exchange(grant, client_secret="post-only-secret").status_code == 200


def test_hooks_do_not_exist_without_the_flag(idp_factory):
    srv = idp_factory(test_hooks=False)
    for method, path in [("GET", "/_test/stats"), ("GET", "/_test/secrets"), ("POST", "/_test/rotate-keys"),
                         ("POST", "/_test/mode"), ("POST", "/_test/reset-stats")]:
        resp = srv.request(method, path)
        assert resp.status_code == 404 and resp.json()["error"] == "not_found"


# -------------------------------------------------------------------------------------------------
# Robustness, transport, CLI


def test_bad_input_always_gets_an_oauth_error_json(idp):
    cases = [
        ("GET", "/token", {}),
        ("POST", "/token", {"data": b"\xff\xfe\x00garbage",
                            "headers": {"Content-Type": "application/x-www-form-urlencoded"}}),
        ("POST", "/token", {"data": {"grant_type": "authorization_code", "code": "x"},
                            "headers": {"Authorization": "Basic %%%not-base64"}}),
        ("POST", "/token", {"data": {"grant_type": "authorization_code", "code": "x"},
                            "headers": {"Authorization": "Bearer abc"}}),
        ("POST", "/token", {"data": {"grant_type": "authorization_code", "code": "x",
                                     "client_id": IOS, "redirect_uri": "\x01\u00e9"}}),
        ("POST", "/token", {"data": {"grant_type": "\"\\\u2603"}}),
        ("POST", "/token", {"data": "a=" + "x" * 70_000,
                            "headers": {"Content-Type": "application/x-www-form-urlencoded"}}),
        ("GET", "/nowhere", {}),
        ("GET", "/userinfo", {"headers": {"Authorization": "Bearer nope"}}),
        ("DELETE", "/jwks", {}),
    ]
    for method, path, kw in cases:
        resp = idp.request(method, path, **kw)
        assert 400 <= resp.status_code < 500, (method, path, resp.status_code, resp.text[:200])
        assert "error" in resp.json(), (method, path)
    assert idp.proc.poll() is None
    assert "Traceback" not in open(idp.log_path).read()


def test_junk_requests_never_get_a_server_error(idp):
    import random
    rnd = random.Random(20261129)
    keys = ["response_type", "client_id", "redirect_uri", "scope", "state", "nonce", "code_challenge",
            "code_challenge_method", "prompt", "response_mode", "request", "grant_type", "code",
            "code_verifier", "client_secret", "username", "action", "times", "token"]
    values = ["code", "token", IOS, WEB, "com.googleusercontent.apps.123-ios:/oauth2redirect",
              "openid email", "S256", "plain", "none", "query", "authorization_code", "", "approve",
              "deny", '"\\\x00\u2603', "x" * 300, "A" * 43, "%ff%fe"]
    for _ in range(150):
        params = [(rnd.choice(keys), rnd.choice(values)) for _ in range(rnd.randint(0, 8))]
        method = rnd.choice(["GET", "POST"])
        path = rnd.choice(["/authorize", "/token", "/userinfo", "/_test/mode", "/jwks"])
        kw = {"params": params} if method == "GET" or rnd.random() < 0.3 else {}
        if method == "POST":
            kw["data"] = (bytes(rnd.getrandbits(8) for _ in range(rnd.randint(0, 200)))
                          if rnd.random() < 0.3 else params)
            if rnd.random() < 0.3:
                kw["headers"] = {"Authorization": rnd.choice(["Basic !!!", "Basic eDp5", "Bearer x",
                                                              "Basic", "Digest a=b"]),
                                 "Content-Type": rnd.choice(["application/x-www-form-urlencoded",
                                                             "application/json", "text/plain"])}
        resp = idp.request(method, path, **kw)
        assert resp.status_code < 500, (method, path, kw, resp.status_code, resp.text[:300])
    assert "Traceback" not in open(idp.log_path).read()


def test_a_client_that_stalls_its_tls_handshake_does_not_block_others(idp):
    with socket.create_connection(("127.0.0.1", idp.port)) as stalled:
        stalled.sendall(b"\x16\x03\x01")       # a third of a ClientHello, then nothing
        started = time.monotonic()
        assert idp.request("GET", "/jwks").status_code == 200
        assert time.monotonic() - started < 2


def test_tls_is_verified_against_the_throwaway_ca(idp):
    with pytest.raises(requests.exceptions.SSLError):
        requests.get(idp.url("/jwks"), timeout=5)      # system CAs do not know it
    ctx = ssl.create_default_context(cafile=idp.ca_cert)
    with socket.create_connection(("127.0.0.1", idp.port)) as raw:
        with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            assert tls.version() in ("TLSv1.2", "TLSv1.3")


def test_one_log_line_per_request_and_no_secrets_in_it(idp):
    grant = idp.get_code(IOS)
    idp.exchange(grant)
    log = open(idp.log_path).read()
    assert grant.code not in log and grant.code_verifier not in log and grant.state not in log
    token_lines = [line for line in log.splitlines() if '"POST /token"' in line]
    assert token_lines and "outcome=success" in token_lines[-1]


def test_plain_http_when_asked(idp_factory):
    srv = idp_factory(tls=False)
    assert srv.base_url.startswith("http://") and srv.discovery()["issuer"] == srv.base_url
    grant = srv.get_code(IOS)
    resp = srv.exchange(grant)
    assert resp.status_code == 200
    srv.verify_id_token(resp.json()["id_token"], IOS, nonce=grant.nonce)


def test_issuer_with_a_path(idp_factory):
    srv = idp_factory(issuer_path="/realms/test")
    doc = srv.discovery()
    assert doc["issuer"] == srv.base_url and doc["token_endpoint"] == srv.base_url + "/token"
    grant = srv.get_code(ANDROID)
    srv.verify_id_token(srv.exchange(grant).json()["id_token"], ANDROID)


def test_invalid_clients_file_is_refused_with_every_problem_listed(tmp_path):
    bad = {"clients": [
        {"client_id": "a", "type": "native", "client_secret": "x", "redirect_uris": ["https://a/cb"]},
        {"client_id": "b", "type": "web", "redirect_uris": ["http://example.com/cb"]},
        {"client_id": "c", "type": "web", "client_secret": "long-enough", "redirect_uris": ["x:/y"],
         "colour": "blue"},
    ]}
    path = tmp_path / "clients.json"
    path.write_text(json.dumps(bad))
    proc = subprocess.run([sys.executable, str(SERVER), "--insecure-http", "--clients", str(path)],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2 and "READY" not in proc.stdout
    for needle in ["clients[0]: a native (public) client has no client_secret",
                   "clients[0]: redirect_uri 'https://a/cb'", "clients[1]: a web (confidential) "
                   "client needs a client_secret", "clients[1]: redirect_uri 'http://example.com/cb'",
                   "clients[2]: unknown keys ['colour']", "clients[2]: redirect_uri 'x:/y'"]:
        assert needle in proc.stderr, proc.stderr


def test_https_or_explicit_http_must_be_chosen():
    proc = subprocess.run([sys.executable, str(SERVER), "--clients", str(EXAMPLE_CLIENTS)],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2 and "--insecure-http" in proc.stderr
