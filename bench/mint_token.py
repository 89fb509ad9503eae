#!/usr/bin/env python3
"""Mints the stub IdP's answers for bench/callbacks and bench/session, once, at start.

Writes two files into --out-dir:
  token.json  the token endpoint's answer: access_token, token_type, expires_in, scope and an
              id_token that is a real RS256 JWT (fresh 2048-bit RSA key, like Google's) with
              iss = --issuer, aud = azp = --aud, sub, email, email_verified, iat = now,
              exp = now + --ttl (default 1 h), and the key's kid in the header
  jwks.json   {"keys": [the matching public JWK]}

Both are single-line JSON without single quotes or backslashes, so bench/callbacks can put
them into an nginx `return 200 '...'` as they are. Needs `cryptography` and `PyJWT`
(the project's .venv: scripts/setup).
"""
import argparse
import json
import os
import time

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--issuer", required=True, help="the stub's URL, e.g. http://127.0.0.1:18301")
    ap.add_argument("--aud", required=True, help="the native client id")
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--ttl", type=int, default=3600, help="id_token lifetime in seconds")
    ap.add_argument("--kid", default="bench-key-1")
    ap.add_argument("--nonce", help="the nonce claim (a session-mode web sign-in checks it)")
    a = ap.parse_args()

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    now = int(time.time())
    claims = {
        "iss": a.issuer,
        "aud": a.aud,
        "azp": a.aud,
        "sub": "110169484474386276334",
        "email": "bench.user@example.com",
        "email_verified": True,
        "iat": now,
        "exp": now + a.ttl,
    }
    if a.nonce:
        claims["nonce"] = a.nonce
    id_token = jwt.encode(claims, key, algorithm="RS256", headers={"kid": a.kid})
    token = {
        "access_token": "ya29.bench-access-token",
        "token_type": "Bearer",
        "expires_in": 3599,
        "scope": "openid email profile",
        "id_token": id_token,
    }
    jwk = json.loads(RSAAlgorithm.to_jwk(key.public_key()))
    jwk.update({"kid": a.kid, "use": "sig", "alg": "RS256"})
    jwks = {"keys": [jwk]}

    for name, obj in (("token.json", token), ("jwks.json", jwks)):
        text = json.dumps(obj, separators=(",", ":"))
        assert "'" not in text and "\\" not in text and "$" not in text, f"{name}: not safe inside nginx '...'"
        with open(os.path.join(a.out_dir, name), "w") as f:
            f.write(text)
    print(f"id_token: {len(id_token)} bytes, RS256, kid {a.kid}, exp in {a.ttl} s")


if __name__ == "__main__":
    main()
