"""Revoking a user's sessions from outside (oauth.session.revocation): the internal listener's
POST /sessions/revoke with email= or sub= ends every session of that user issued until then, at its
next request, on every instance sharing the store — sealed cookie sessions and server-side ones,
native and web sign-ins alike — and refuses anything it cannot read exactly."""
import json
import time

import pytest

from helpers import HTTPConn
from test_redis_store import Redis
from test_session import (get, idp, session_config, session_of, sign_in, web_idp, web_proxy_factory,  # noqa: F401
                          web_sign_in)

JSON = {"Accept": "application/json"}
FORM = "application/x-www-form-urlencoded"


def revoke(p, body, content_type=FORM, method="POST", target="/sessions/revoke"):
    with HTTPConn(p.internal_port) as c:
        c.request(method, target, headers=[("Content-Type", content_type)], body=body.encode())
        return c.read_response()


def lines(p, message):
    return [json.loads(l) for l in p.stderr_text().splitlines() if f'"{message}"' in l]


@pytest.fixture
def gate(proxy_factory, upstream, tmp_path, idp):
    def start(extra=", revocation: true", store="memory", name="gate"):
        config = tmp_path / f"{name}.yaml"
        config.write_text(session_config(idp, store=store, rules=f"protect: [/private]{extra}"))
        return proxy_factory(upstream, extra=["--config", str(config)])
    return start


def test_revoking_an_address_ends_its_sessions_at_the_next_request_and_no_one_elses(gate, idp):
    p = gate()
    alice, _, _, _ = sign_in(p, idp)
    again, _, _, _ = sign_in(p, idp)  # a second device
    bob, _, _, _ = sign_in(p, idp, username="bob@example.test")
    for s in (alice, again, bob):
        assert get(p, "/private/x", cookies=session_of(s), headers=JSON).status == 404
    r = revoke(p, "email=Alice%40Example.TEST")
    assert r.status == 200, r
    body = r.json()
    assert body["result"] == "marker_set" and body["by"] == "email" and body["issued_until"] >= int(time.time()) - 5
    for s in (alice, again):
        assert get(p, "/private/x", cookies=session_of(s), headers=JSON).status == 401
        assert get(p, "/_oauth/auth", cookies=session_of(s)).status == 401, "forward-auth too"
        echo = get(p, "/echo", cookies=session_of(s)).json()
        assert not [k for k, _ in echo["headers"] if k.lower() == "x-forwarded-email"], "anonymous where none is needed"
    assert get(p, "/private/x", cookies=session_of(bob), headers=JSON).status == 404
    line = lines(p, "sessions revoked")[0]
    assert line["by"] == "email" and line["email_domain"] == "example.test"
    assert "alice" not in p.stderr_text().lower(), "the user is never logged"
    time.sleep(1.1)  # a session of the revocation's own second is revoked too
    fresh, _, _, _ = sign_in(p, idp)
    assert get(p, "/private/x", cookies=session_of(fresh), headers=JSON).status == 404, "a sign-in after it lives"


def test_revoking_a_subject_ends_its_server_side_sessions(gate, idp):
    p = gate(extra=", revocation: true, server_side: true")
    alice, _, _, _ = sign_in(p, idp)
    sub = get(p, "/_oauth/userinfo", cookies=session_of(alice)).json()["user"]
    assert revoke(p, "sub=" + sub).json()["by"] == "sub"
    assert get(p, "/private/x", cookies=session_of(alice), headers=JSON).status == 401
    assert get(p, "/_oauth/userinfo", cookies=session_of(alice)).status == 401
    assert "sub_digest" in lines(p, "sessions revoked")[0] and sub not in p.stderr_text()


def test_a_web_sign_in_is_revoked_the_same_way(web_proxy_factory, web_idp):
    p = web_proxy_factory(name="revocable", extra_session=", revocation: true")
    r, _, _ = web_sign_in(p, web_idp)
    assert get(p, "/private/x", cookies=session_of(r), headers=JSON).status == 404
    assert revoke(p, "email=alice@example.test").status == 200
    assert get(p, "/private/x", cookies=session_of(r), headers=JSON).status == 401


@pytest.mark.parametrize("server_side", ["true", "false"])
def test_a_revocation_through_one_instance_holds_on_every_instance_sharing_the_store(gate, idp, tmp_path, server_side):
    redis = Redis(tmp_path)
    try:
        store = f"redis://127.0.0.1:{redis.port}/0"
        a = gate(extra=f", revocation: true, server_side: {server_side}", store=store, name="a")
        b = gate(extra=f", revocation: true, server_side: {server_side}", store=store, name="b")
        alice, _, _, _ = sign_in(a, idp)
        assert get(b, "/private/x", cookies=session_of(alice), headers=JSON).status == 404
        assert revoke(b, "email=alice@example.test").status == 200
        for p in (a, b):
            assert get(p, "/private/x", cookies=session_of(alice), headers=JSON).status == 401
        # Without the store nobody can tell: fail closed, never let a maybe-revoked session by.
        bob, _, _, _ = sign_in(a, idp, username="bob@example.test")
        redis.stop()
        assert get(a, "/private/x", cookies=session_of(bob), headers=JSON).status == 503
    finally:
        redis.stop()


@pytest.mark.parametrize("body, content_type, reason", [
    ("", FORM, "exactly one of email= or sub="),
    ("email=alice@example.test&sub=1", FORM, "exactly one of email= or sub="),
    ("email=alice@example.test&email=bob@example.test", FORM, "exactly one"),
    ("user=alice", FORM, "unknown parameter 'user'"),
    ("email=alice", FORM, "email is not an address"),
    ("email=alice%ZZ@example.test", FORM, "does not decode strictly"),
    ("email=alice@example.test&", FORM, ""),
    ("sub=a%20b", FORM, "sub must be"),
    ('{"email":"alice@example.test"}', "application/json", "application/x-www-form-urlencoded"),
])
def test_a_revocation_that_cannot_be_read_is_refused_with_a_reason(gate, idp, body, content_type, reason):
    p = gate()
    alice, _, _, _ = sign_in(p, idp)
    r = revoke(p, body, content_type=content_type)
    assert r.status == 400 and r.json()["error"] == "invalid_request" and reason in r.json()["reason"], r
    assert get(p, "/private/x", cookies=session_of(alice), headers=JSON).status == 404, "nobody was revoked"
    line = lines(p, "session revocation refused")[0]
    assert line["level"] == "warn" and line["setting"] == "POST /sessions/revoke on the internal listener"
    assert "alice" not in p.stderr_text()


def test_only_post_without_a_query_and_only_with_revocation_on(gate, idp):
    p = gate()
    r = revoke(p, "", method="GET")
    assert r.status == 405 and r.one("allow") == "POST"
    assert revoke(p, "", target="/sessions/revoke?email=alice@example.test").status == 400
    off = gate(extra="", name="off")
    r = revoke(off, "email=alice@example.test")
    assert r.status == 409 and "oauth.session.revocation" in r.json()["reason"]
