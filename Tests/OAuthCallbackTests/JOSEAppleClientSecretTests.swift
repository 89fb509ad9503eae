import Testing
@testable import OAuthCallback

@Suite struct JOSEAppleClientSecretTests {
    let now: Int64 = 1_700_000_000

    @Test func clientSecretHasAppleHeaderAndClaimsAndVerifiesWithTheKey() throws {
        let key = try P256PrivateKey(pem: FixedP8.pem)
        let secret = try AppleClientSecret.make(teamID: "TEAM123456", clientID: "com.example.app.web",
                                                keyID: "ABC123DEFG", key: key, now: now)
        let jwt = try JWT(compact: secret)
        #expect(jwt.header.raw == ["alg": .string("ES256"), "kid": .string("ABC123DEFG")])
        #expect(jwt.claims == [
            "iss": .string("TEAM123456"),
            "sub": .string("com.example.app.web"),
            "aud": .string("https://appleid.apple.com"),
            "iat": .number(now),
            "exp": .number(now + 3_600),
        ])
        // Verify it the way Apple would: ES256 with the key's public half.
        let verifier = JWTVerifier(allowedAlgorithms: [.es256], issuers: ["TEAM123456"],
                                   audience: "https://appleid.apple.com", leeway: 0)
        let keys = JWKSet(keys: [JWK(keyID: "ABC123DEFG", algorithm: "ES256", material: .p256(key.publicKey))])
        let claims = try verifier.verify(secret, keys: keys, now: now)
        #expect(claims.subject == "com.example.app.web")
    }

    @Test func lifetimeIsLimitedToSixMonths() throws {
        let key = TestKeys.ecA
        _ = try AppleClientSecret.make(teamID: "T", clientID: "C", keyID: "K", key: key, now: now,
                                       lifetime: AppleClientSecret.maximumLifetime)
        for lifetime: Int64 in [0, -1, AppleClientSecret.maximumLifetime + 1] {
            let error = #expect(throws: JOSEError.self) {
                try AppleClientSecret.make(teamID: "T", clientID: "C", keyID: "K", key: key, now: now, lifetime: lifetime)
            }
            #expect(error?.code == .signingFailed)
        }
    }

    @Test func refusesEmptyIdentifiers() {
        #expect(throws: JOSEError.self) {
            try AppleClientSecret.make(teamID: "", clientID: "C", keyID: "K", key: TestKeys.ecA, now: now)
        }
    }

    @Test func signedTokensUseFreshSignatures() throws {
        // ECDSA signatures are randomized: the same claims never give the same token twice,
        // yet both verify.
        let a = try JWTSigner.signES256(claims: ["sub": .string("x")], keyID: nil, key: TestKeys.ecA)
        let b = try JWTSigner.signES256(claims: ["sub": .string("x")], keyID: nil, key: TestKeys.ecA)
        #expect(a != b)
        #expect(a.split(separator: ".")[0] == "eyJhbGciOiJFUzI1NiJ9")  // {"alg":"ES256"}
    }
}
