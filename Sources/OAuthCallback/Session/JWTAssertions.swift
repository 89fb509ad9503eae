import ProxyCore

/// Signs the `jwt_assertion` header's tokens and publishes the keys that verify them.
///
/// Claims: `iss`, `aud` (when configured), `sub` (the IdP's subject), `user` (what the user
/// header carries: `user_claim`), `email` with `email_verified: true` (only a verified address,
/// as in the headers), `preferred_username`, `name`, `groups`, `provider`, `iat`, `exp`.
/// Header: `alg: ES256`, `typ: JWT`, `kid`: the key's RFC 7638 thumbprint.
///
/// An ES256 signature costs more than the rest of a proxied request, so each loop keeps the
/// tokens it signed, by their claims, and reuses one while more than half its lifetime is left
/// (a loop serves many requests of one user in a row). Nothing a request can observe changes:
/// the claims are identical and the token is still valid for at least half its lifetime.
public final class JWTAssertions: @unchecked Sendable {
    public let settings: JWTAssertionSettings
    private let key: P256PrivateKey
    private let keyID: String
    /// `{"keys":[…]}`: the signing key first, then the previous ones.
    public let jwks: [UInt8]

    /// Tokens signed, per loop, by their claims (the JSON text without the times).
    private let signed = PerLoopCache<(token: String, renewAt: Int64)>(capacity: 4_096)

    /// Throws when a key is not a P-256 private key in PEM (the loader checks it first).
    public init(_ settings: JWTAssertionSettings) throws(CryptoError) {
        self.settings = settings
        key = try P256PrivateKey(pem: settings.signingKeyPEM.value)
        var published: [[String: JSONValue]] = []
        var ids: Set<String> = []
        for pem in [settings.signingKeyPEM] + settings.previousKeyPEMs {
            let jwk = Self.publicJWK(try P256PrivateKey(pem: pem.value).publicKey)
            guard case .string(let kid)? = jwk["kid"], ids.insert(kid).inserted else { continue }
            published.append(jwk)
        }
        guard case .string(let kid)? = published.first?["kid"] else { throw CryptoError(.invalidKey, "no signing key") }
        keyID = kid
        jwks = JSONValue.object(["keys": .array(published.map { .object($0) })]).serialized()
    }

    /// The assertion for `session` at `now` (seconds since the epoch), nil if signing failed
    /// (then the header is left out: the app sees an anonymous request, never a forged one).
    /// Call on `loop`'s thread.
    public func assertion(for session: ProxySession, user: String?, on loop: EventLoop, now: Int64) -> String? {
        let claims = identityClaims(session, user: user)
        return signed.value(for: JSONValue.object(claims).serializedString, on: loop, isFresh: { now < $0.renewAt }) {
            var timed = claims
            timed["iat"] = .number(String(now))
            timed["exp"] = .number(String(now + settings.lifetimeSeconds))
            guard let token = try? JWTSigner.signES256(claims: timed, keyID: keyID, key: key, type: "JWT") else { return nil }
            return (token, now + settings.lifetimeSeconds / 2)
        }?.token
    }

    /// Everything but the times: also the cache key.
    func identityClaims(_ session: ProxySession, user: String?) -> [String: JSONValue] {
        var claims: [String: JSONValue] = ["iss": .string(settings.issuer), "sub": .string(session.subject),
                                           "provider": .string(session.provider)]
        if let audience = settings.audience { claims["aud"] = .string(audience) }
        if let user { claims["user"] = .string(user) }
        if let email = session.verifiedEmail {
            claims["email"] = .string(email)
            claims["email_verified"] = .bool(true)
        }
        if let username = session.preferredUsername { claims["preferred_username"] = .string(username) }
        if let name = session.name { claims["name"] = .string(name) }
        if !session.groups.isEmpty { claims["groups"] = .array(session.groups.map { .string($0) }) }
        return claims
    }

    /// The public JWK of `key`, `kid` its RFC 7638 thumbprint: SHA-256 over the required
    /// members in lexicographic order, no whitespace — the same key always has the same id, on
    /// every instance, so a fleet sharing the key publishes one set.
    static func publicJWK(_ key: P256PublicKey) -> [String: JSONValue] {
        let (xBytes, yBytes) = key.coordinates
        let x = Base64URL.encode(xBytes), y = Base64URL.encode(yBytes)
        let thumbprint = Base64URL.encode(SHA256.hash(#"{"crv":"P-256","kty":"EC","x":"\#(x)","y":"\#(y)"}"#))
        return ["kty": .string("EC"), "crv": .string("P-256"), "x": .string(x), "y": .string(y),
                "kid": .string(thumbprint), "alg": .string("ES256"), "use": .string("sig")]
    }
}
