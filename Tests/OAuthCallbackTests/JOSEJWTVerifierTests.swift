import Testing
@testable import OAuthCallback

@Suite struct JOSEJWTVerifierTests {
    let verifier = JWTVerifier(allowedAlgorithms: [.rs256, .es256], issuers: [Mint.issuer], audience: Mint.clientID)
    let keys = Mint.standardKeys
    let now = Mint.now

    /// The refusal code for `token`, or nil when it verifies.
    func refusal(_ token: String, verifier: JWTVerifier? = nil, keys: JWKSet? = nil,
                 nonce: String? = nil) -> JOSEError.Code? {
        do {
            _ = try (verifier ?? self.verifier).verify(token, keys: keys ?? self.keys, now: now, expectedNonce: nonce)
            return nil
        } catch {
            return error.code
        }
    }

    // MARK: Accepted

    @Test func acceptsAValidRS256TokenAndReturnsItsClaims() throws {
        let claims = try verifier.verify(Mint.rs256(), keys: keys, now: now, expectedNonce: "n-0S6_WzA2Mj")
        #expect(claims.subject == "110169484474386276334")
        #expect(claims.issuer == Mint.issuer)
        #expect(claims.audience == [Mint.clientID])
        #expect(claims.email == "jane@example.com")
        #expect(claims.emailVerified == true)
        #expect(claims.name == "Jane Doe")
        #expect(claims.nonce == "n-0S6_WzA2Mj")
        #expect(claims.algorithm == .rs256)
        #expect(claims.keyID == "rsa-a")
        #expect(claims.expiresAt == now + 3_590)
        #expect(claims.raw["sub"] == .string("110169484474386276334"))
    }

    @Test func acceptsAValidES256Token() throws {
        let claims = try verifier.verify(Mint.es256(), keys: keys, now: now)
        #expect(claims.algorithm == .es256)
        #expect(claims.keyID == "ec-a")
    }

    @Test func acceptsATokenSignedWithTheSecondKeyOfTheSet() {
        #expect(refusal(Mint.rs256(kid: "rsa-b", key: TestKeys.rsaB)) == nil)
    }

    @Test(arguments: [
        (JSONValue.string("true"), Bool?.some(true)),
        (.string("false"), false),
        (.bool(false), false),
        (.string("yes"), nil),
        (.number("1"), nil),
    ])
    func readsEmailVerifiedAsABoolOrAppleStyleString(value: JSONValue, expected: Bool?) throws {
        let claims = try verifier.verify(Mint.rs256(Mint.claims(["email_verified": value])), keys: keys, now: now)
        #expect(claims.emailVerified == expected)
    }

    @Test func acceptsAnAudienceArrayWhenAzpIsOurs() throws {
        let token = Mint.rs256(Mint.claims(["aud": .array([.string(Mint.clientID), .string("other")]),
                                            "azp": .string(Mint.clientID)]))
        #expect(try verifier.verify(token, keys: keys, now: now).audience == [Mint.clientID, "other"])
    }

    @Test func acceptsASingleElementAudienceArrayWithoutAzp() {
        #expect(refusal(Mint.rs256(Mint.claims(["aud": .array([.string(Mint.clientID)])]))) == nil)
    }

    @Test func acceptsAnyOfSeveralExpectedIssuers() {
        let verifier = JWTVerifier(allowedAlgorithms: [.rs256], issuers: ["accounts.google.com", Mint.issuer],
                                   audience: Mint.clientID)
        #expect(refusal(Mint.rs256(), verifier: verifier) == nil)
    }

    @Test func acceptsClockSkewWithinTheLeeway() {
        #expect(refusal(Mint.rs256(Mint.claims(["exp": .number(now - 299)]))) == nil)
        #expect(refusal(Mint.rs256(Mint.claims(["iat": .number(now + 300)]))) == nil)
        #expect(refusal(Mint.rs256(Mint.claims(["nbf": .number(now + 300)]))) == nil)
    }

    @Test func acceptsAKidlessTokenWhenExactlyOneKeyCanVerifyItsAlg() {
        // standardKeys has two RSA keys but one EC key.
        #expect(refusal(Mint.es256(kid: nil)) == nil)
    }

    // MARK: Refused — algorithm

    @Test(arguments: ["none", "None", "NONE"])
    func refusesAlgNone(_ alg: String) {
        let token = Mint.token(header: ["alg": .string(alg)], claims: Mint.claims()) { _ in Array("x".utf8) }
        #expect(refusal(token) == .unsecuredAlgorithm)
    }

    @Test func refusesAlgNoneWithAnEmptySignature() {
        let token = Mint.encoded(["alg": .string("none")]) + "." + Mint.encoded(Mint.claims()) + "."
        #expect(refusal(token) == .malformedToken)
    }

    /// The classic key-confusion attack: sign with HS256 using the RSA public key (here its
    /// modulus, its JWK JSON, or its JWK `n` text) as the HMAC secret, and hope the verifier
    /// hands the "key" to HMAC.
    @Test(arguments: ["modulus", "jwk", "n"])
    func refusesHS256SignedWithTheRSAPublicKeyAsSecret(_ form: String) {
        let (n, _) = TestKeys.rsaA.publicComponents
        let secret: [UInt8]
        switch form {
        case "modulus": secret = n
        case "jwk": secret = Mint.jwk(TestKeys.rsaA, kid: "rsa-a").serialized()
        default: secret = Array(Base64URL.encode(n).utf8)
        }
        for alg in ["HS256", "HS384", "HS512"] {
            let token = Mint.token(header: ["alg": .string(alg), "kid": .string("rsa-a")], claims: Mint.claims()) {
                HMACSHA256.authenticationCode(for: $0, key: secret)
            }
            #expect(refusal(token) == .symmetricAlgorithm)
        }
    }

    @Test func refusesAnImplementedAlgNotAllowedForThisProvider() {
        let googleLike = JWTVerifier(allowedAlgorithms: [.rs256], issuers: [Mint.issuer], audience: Mint.clientID)
        #expect(refusal(Mint.es256(), verifier: googleLike) == .algorithmNotAllowed)
    }

    @Test(arguments: ["PS256", "RS512", "ES384", "EdDSA", "rs256"])
    func refusesAlgorithmsWeDoNotImplement(_ alg: String) {
        let token = Mint.token(header: ["alg": .string(alg), "kid": .string("rsa-a")], claims: Mint.claims()) {
            try! TestKeys.rsaA.signRS256($0)
        }
        #expect(refusal(token) == .unsupportedAlgorithm)
    }

    @Test func refusesAKeyWhoseAlgDisagreesWithTheHeader() {
        let keys = Mint.keySet([Mint.jwk(TestKeys.rsaA, kid: "rsa-a", alg: "RS512")])
        #expect(refusal(Mint.rs256(), keys: keys) == .keyAlgorithmMismatch)
    }

    @Test func refusesAKeyOfTheWrongTypeForTheHeaderAlg() {
        // ES256 header naming the RSA key's kid.
        #expect(refusal(Mint.es256(kid: "rsa-a")) == .keyAlgorithmMismatch)
    }

    // MARK: Refused — keys and signature

    @Test func refusesAnUnknownKidWithATypedErrorSoTheCallerCanRefetch() throws {
        do {
            _ = try verifier.verify(Mint.rs256(kid: "rotated-in"), keys: keys, now: now)
            Issue.record("token with an unknown kid was accepted")
        } catch {
            #expect(error.code == .unknownKeyID)
            #expect(error.refetchingKeysMayHelp)
        }
    }

    @Test func refusesAKidlessTokenWhenSeveralKeysCouldVerifyIt() {
        #expect(refusal(Mint.rs256(kid: nil)) == .ambiguousKey)
    }

    @Test func refusesATokenSignedByAnotherKeyThanItsKidNames() {
        #expect(refusal(Mint.rs256(kid: "rsa-a", key: TestKeys.rsaB)) == .badSignature)
        #expect(refusal(Mint.es256(kid: "ec-a", key: TestKeys.ecB)) == .badSignature)
    }

    @Test func refusesATokenWhosePayloadWasChangedAfterSigning() {
        let original = Mint.rs256()
        let parts = original.split(separator: ".")
        let forged = parts[0] + "." + Mint.encoded(Mint.claims(["sub": .string("admin")])) + "." + parts[2]
        #expect(refusal(String(forged)) == .badSignature)
    }

    @Test func refusesAnES256SignatureInDERForm() {
        let token = Mint.token(header: ["alg": .string("ES256"), "kid": .string("ec-a")], claims: Mint.claims()) {
            P256PublicKey.derSignature(fromRaw: try! TestKeys.ecA.signES256($0))!
        }
        #expect(refusal(token) == .badSignature)
    }

    // MARK: Refused — claims

    @Test func refusesAWrongIssuer() {
        #expect(refusal(Mint.rs256(Mint.claims(["iss": .string("https://evil.example.com")]))) == .invalidIssuer)
    }

    @Test func refusesAWrongAudience() {
        #expect(refusal(Mint.rs256(Mint.claims(["aud": .string("someone-else")]))) == .invalidAudience)
    }

    @Test func refusesAnAudienceArrayWithoutUs() {
        #expect(refusal(Mint.rs256(Mint.claims(["aud": .array([.string("a"), .string("b")]), "azp": .string("a")])))
                == .invalidAudience)
    }

    @Test func refusesAnAudienceArrayWithoutAzp() {
        #expect(refusal(Mint.rs256(Mint.claims(["aud": .array([.string(Mint.clientID), .string("other")])])))
                == .invalidAuthorizedParty)
    }

    @Test func refusesAnAudienceArrayWhoseAzpIsSomeoneElse() {
        #expect(refusal(Mint.rs256(Mint.claims(["aud": .array([.string(Mint.clientID), .string("other")]),
                                                "azp": .string("other")]))) == .invalidAuthorizedParty)
    }

    @Test func refusesATokenExpiredBeyondTheLeeway() {
        #expect(refusal(Mint.rs256(Mint.claims(["exp": .number(now - 300)]))) == .expired)
        #expect(refusal(Mint.rs256(Mint.claims(["exp": .number(now - 86_400)]))) == .expired)
    }

    @Test func refusesATokenIssuedInTheFuture() {
        #expect(refusal(Mint.rs256(Mint.claims(["iat": .number(now + 301)]))) == .issuedInFuture)
    }

    @Test func refusesATokenNotYetValid() {
        #expect(refusal(Mint.rs256(Mint.claims(["nbf": .number(now + 301)]))) == .notYetValid)
    }

    @Test func leewayIsConfigurable() {
        let strict = JWTVerifier(allowedAlgorithms: [.rs256], issuers: [Mint.issuer], audience: Mint.clientID, leeway: 0)
        #expect(refusal(Mint.rs256(Mint.claims(["exp": .number(now)])), verifier: strict) == .expired)
        #expect(refusal(Mint.rs256(Mint.claims(["exp": .number(now + 1)])), verifier: strict) == nil)
    }

    @Test(arguments: ["exp", "iat", "iss", "aud", "sub"])
    func refusesATokenMissingARequiredClaim(_ claim: String) {
        #expect(refusal(Mint.rs256(Mint.claims([claim: nil]))) == .missingClaim)
    }

    @Test(arguments: [
        ("exp", JSONValue.string("1700003590")),
        ("iat", .bool(true)),
        ("nbf", .string("0")),
        ("iss", .number("1")),
        ("aud", .number("1")),
        ("aud", .array([.string(Mint.clientID), .number("1")])),
        ("azp", .array([])),
        ("sub", .object([:])),
        ("exp", .number("1e400")),
    ])
    func refusesMistypedClaims(claim: String, value: JSONValue) {
        #expect(refusal(Mint.rs256(Mint.claims([claim: value]))) == .invalidClaim)
    }

    @Test func refusesAnEmptySubject() {
        #expect(refusal(Mint.rs256(Mint.claims(["sub": .string("")]))) == .missingClaim)
    }

    @Test func refusesANonceThatDoesNotMatch() {
        #expect(refusal(Mint.rs256(), nonce: "another-nonce") == .nonceMismatch)
        #expect(refusal(Mint.rs256(Mint.claims(["nonce": nil])), nonce: "n-0S6_WzA2Mj") == .nonceMismatch)
    }

    @Test func refusesEverythingWhenConfiguredWithAnEmptyAudience() {
        let misconfigured = JWTVerifier(allowedAlgorithms: [.rs256], issuers: [Mint.issuer], audience: "")
        #expect(refusal(Mint.rs256(Mint.claims(["aud": .string("")])), verifier: misconfigured) == .invalidAudience)
    }

    // MARK: Refused — malformed compact forms (through the verifier)

    enum Mangling: String, CaseIterable {
        case twoParts, fourParts, badBase64, nonObjectHeader, nonObjectPayload

        func apply(to token: String) -> String {
            let parts = token.split(separator: ".").map(String.init)
            switch self {
            case .twoParts: return parts[0] + "." + parts[1]
            case .fourParts: return token + ".c2ln"
            case .badBase64: return parts[0] + "." + parts[1] + "!." + parts[2]
            case .nonObjectHeader: return Base64URL.encode("[]") + "." + parts[1] + "." + parts[2]
            case .nonObjectPayload: return parts[0] + "." + Base64URL.encode("\"x\"") + "." + parts[2]
            }
        }

        var expected: JOSEError.Code {
            switch self {
            case .twoParts, .fourParts, .badBase64: return .malformedToken
            case .nonObjectHeader, .nonObjectPayload: return .invalidJSON
            }
        }
    }

    @Test(arguments: Mangling.allCases)
    func refusesMalformedCompactForms(_ mangling: Mangling) {
        #expect(refusal(mangling.apply(to: Mint.rs256())) == mangling.expected)
    }

    @Test func errorDescriptionsCarryNoTokenContent() {
        let token = Mint.rs256(Mint.claims(["iss": .string("https://evil.example.com/very-unique-issuer")]))
        do {
            _ = try verifier.verify(token, keys: keys, now: now)
            Issue.record("wrong issuer accepted")
        } catch {
            #expect(!error.description.contains("very-unique-issuer"))
            #expect(!error.description.contains(String(token.split(separator: ".")[2].prefix(20))))
        }
    }
}
