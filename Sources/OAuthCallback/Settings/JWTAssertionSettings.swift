/// `oauth.session.jwt_assertion`: a short-lived JWT about the signed-in user, signed by the
/// proxy, added to every upstream request that carries identity headers (Pomerium's
/// `X-Pomerium-Jwt-Assertion`). An app that can verify a JWT (Grafana's `[auth.jwt]`, any
/// JWT middleware) then need not trust plain headers: it checks the signature against the
/// proxy's keys (`/.well-known/jwks.json` on the internal listener), `iss`, `aud` and `exp`.
public struct JWTAssertionSettings: Sendable, Equatable {
    // The header's name is `IdentityHeaderNames.jwtAssertion` (`jwt_assertion.header`), so that
    // it is stripped from client requests with the other identity headers.
    /// The P-256 key it is signed with (PEM), and keys still published for verification
    /// while a rotation settles (assertions are short-lived, so a minute or two suffices).
    public var signingKeyPEM: Secret
    public var previousKeyPEMs: [Secret] = []
    /// `iss`; the app checks it.
    public var issuer = "callback-proxy"
    /// `aud`, when set: the app it is meant for (Grafana: `expect_claims = {"aud": "…"}`).
    public var audience: String? = nil
    /// `exp` − `iat` (seconds). Default 60: long enough for a request, short enough that a
    /// copied assertion is useless soon.
    public var lifetimeSeconds: Int64 = 60

    public init(signingKeyPEM: Secret) {
        self.signingKeyPEM = signingKeyPEM
    }
}
