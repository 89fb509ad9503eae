import ProxyCore
import Testing
@testable import OAuthCallback

/// `jwt_assertion`: what the proxy-signed token says, that its published keys verify it, and
/// that a loop reuses a token only while half its lifetime is left.
@Suite struct JWTAssertionsTests {
    let loop = TestLoop.shared.loop

    static func settings(audience: String? = "grafana", previous: [String] = []) -> JWTAssertionSettings {
        var s = JWTAssertionSettings(signingKeyPEM: Secret(FixedP8.pem))
        s.issuer = "https://app.example.com"
        s.audience = audience
        s.previousKeyPEMs = previous.map { Secret($0) }
        return s
    }

    static let session = ProxySession(provider: "corp", subject: "248289761001", email: "Alice@Example.com", emailVerified: true,
                                      name: "Alice", preferredUsername: "alice", groups: ["staff", "admins"],
                                      issuedAt: 1_000, expiresAt: 50_000)

    /// The JWKS's key verifies the token: the app's side, done with the proxy's own verifier
    /// (the integration suite verifies with PyJWT as a second, independent implementation).
    func verified(_ token: String, _ assertions: JWTAssertions) throws -> JWT {
        let jwt = try JWT(compact: token)
        guard case .object(let set)? = try? JSONParser.parse(assertions.jwks), case .array(let keys)? = set["keys"],
              case .object(let first)? = keys.first else { throw JOSEError(.invalidJSON, "no keys") }
        let jwk = try JWK(first)
        #expect(jwk.verify(.es256, signature: jwt.signature, message: jwt.signingInput))
        return jwt
    }

    @Test func claimsAreTheSessionsAndTheKeyVerifiesThem() throws {
        let assertions = try JWTAssertions(Self.settings())
        let token = try #require(assertions.assertion(for: Self.session, user: "alice", on: loop, now: 2_000))
        let jwt = try verified(token, assertions)
        #expect(jwt.header.algorithm == "ES256")
        #expect(jwt.header.keyID == "7CT21Jlcst4wUtxO8huhqg7lKM2rlg5NpCIQ-NAf5sU")   // RFC 7638, computed in Python
        let c = jwt.claims
        #expect(c["iss"] == .string("https://app.example.com"))
        #expect(c["aud"] == .string("grafana"))
        #expect(c["sub"] == .string("248289761001"))
        #expect(c["user"] == .string("alice"))
        #expect(c["email"] == .string("Alice@Example.com"))
        #expect(c["email_verified"] == .bool(true))
        #expect(c["groups"] == .array([.string("staff"), .string("admins")]))
        #expect(c["provider"] == .string("corp"))
        #expect(c["iat"] == .number("2000"))
        #expect(c["exp"] == .number("2060"))
    }

    @Test func anUnverifiedEmailIsNotClaimed() throws {
        var session = Self.session
        session.emailVerified = false
        let assertions = try JWTAssertions(Self.settings(audience: nil))
        let jwt = try verified(try #require(assertions.assertion(for: session, user: nil, on: loop, now: 2_000)), assertions)
        #expect(jwt.claims["email"] == nil && jwt.claims["email_verified"] == nil)
        #expect(jwt.claims["aud"] == nil && jwt.claims["user"] == nil)
    }

    @Test func aLoopReusesATokenWhileHalfItsLifetimeIsLeft() throws {
        let assertions = try JWTAssertions(Self.settings())
        let first = assertions.assertion(for: Self.session, user: "alice", on: loop, now: 2_000)
        #expect(assertions.assertion(for: Self.session, user: "alice", on: loop, now: 2_029) == first)
        // Half the 60 s gone: a new token, with new times.
        let renewed = try #require(assertions.assertion(for: Self.session, user: "alice", on: loop, now: 2_030))
        #expect(renewed != first)
        #expect(try JWT(compact: renewed).claims["exp"] == .number("2090"))
        // Other claims, another token: a user whose groups changed is never given the old ones.
        var changed = Self.session
        changed.groups = ["staff"]
        let other = try #require(assertions.assertion(for: changed, user: "alice", on: loop, now: 2_031))
        #expect(try JWT(compact: other).claims["groups"] == .array([.string("staff")]))
    }

    /// Another P-256 key, made with the same openssl commands as `FixedP8`.
    static let rotatedOut = """
        -----BEGIN PRIVATE KEY-----
        MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgQVogxGC0/BuSrlmG
        D6nxLRycC/k81VLgldHKLJMD6dehRANCAATxmxWH/ziswZR0yhMfZ49zbt/W3PlX
        /ZjsZgJ/eQgo0VHIa9JEAzcmVqxm/3LKPJmxoEw7SsMwgrWDcFssF1Jy
        -----END PRIVATE KEY-----
        """

    func keys(_ assertions: JWTAssertions) throws -> [[String: JSONValue]] {
        guard case .object(let set) = try JSONParser.parse(assertions.jwks), case .array(let keys)? = set["keys"] else {
            throw JOSEError(.invalidJSON, "JWKS is not {keys: [...]}")
        }
        return keys.compactMap { if case .object(let o) = $0 { return o } else { return nil } }
    }

    @Test func thePreviousKeyIsPublishedAfterTheSigningKey() throws {
        let published = try keys(JWTAssertions(Self.settings(previous: [Self.rotatedOut])))
        #expect(published.count == 2)
        #expect(published[0]["x"] == .string(FixedP8.x) && published[0]["y"] == .string(FixedP8.y))
        #expect(published[0]["kid"] == .string("7CT21Jlcst4wUtxO8huhqg7lKM2rlg5NpCIQ-NAf5sU"))
        #expect(published[1]["kid"] != published[0]["kid"] && published[1]["kid"] != nil)
        for jwk in published {
            #expect(jwk["kty"] == .string("EC") && jwk["crv"] == .string("P-256") && jwk["alg"] == .string("ES256"))
            #expect(jwk["d"] == nil)   // never the private part
        }
        // The same key given twice is published once.
        #expect(try keys(JWTAssertions(Self.settings(previous: [FixedP8.pem]))).count == 1)
    }

    @Test func aKeyThatIsNotP256IsRefused() {
        #expect(throws: CryptoError.self) { try JWTAssertions(JWTAssertionSettings(signingKeyPEM: Secret(FixedP8.p384))) }
    }
}
