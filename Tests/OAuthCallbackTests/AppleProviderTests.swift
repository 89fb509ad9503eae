import Testing
import ProxyCore
@testable import OAuthCallback

@Suite struct AppleProviderTests {
    static let bundleID = "com.example.app"

    let clock = TestClock()
    let idp: FakeIdP
    let settings: ProviderSettings
    let client = NativeClient(clientID: bundleID, redirectURI: "com.example.app:/apple")
    let provider: AppleProvider

    init() throws {
        idp = FakeIdP(clock: clock)
        idp.publishKeys(FakeIdP.URLs.appleJWKS, [Mint.jwk(TestKeys.rsaA, kid: "rsa-a"), Mint.jwk(TestKeys.rsaB, kid: "rsa-b")])
        settings = Self.settings(teamID: idp.apple.teamID, keyID: idp.apple.keyID, pem: FixedP8.pem)
        provider = try AppleProvider(settings, http: idp, clock: clock.function)
    }

    static func settings(teamID: String, keyID: String, pem: String) -> ProviderSettings {
        var settings = ProviderSettings(name: "apple", kind: .apple)
        settings.native["ios"] = NativeClient(clientID: bundleID, redirectURI: "com.example.app:/apple")
        settings.apple = AppleSettings(teamID: teamID, keyID: keyID, privateKeyPEM: Secret(pem))
        return settings
    }

    /// Claims of an Apple id_token for our bundle id (Apple sends email_verified as a string).
    static func claims(_ overrides: [String: JSONValue?] = [:]) -> [String: JSONValue] {
        var base: [String: JSONValue?] = ["iss": .string("https://appleid.apple.com"), "aud": .string(bundleID),
                                          "sub": .string("001234.abcdef0123456789.0042"),
                                          "email": .string("x7k2@privaterelay.appleid.com"),
                                          "email_verified": .string("true"), "is_private_email": .string("true"),
                                          "name": nil]
        base.merge(overrides) { $1 }
        return Mint.claims(base)
    }

    /// A native code (no redirect bound to it), optionally with PKCE.
    func signIn(idToken: String? = Mint.rs256(claims()), pkce: Bool = true) -> ExchangeRequest {
        let verifier = PKCE.verifier()
        let code = idp.issueCode(.apple, .init(clientID: Self.bundleID, redirectURI: nil,
                                               codeChallenge: pkce ? PKCE.challenge(verifier) : nil, idToken: idToken))
        return ExchangeRequest(provider: settings, platform: "ios", client: client, code: code,
                               codeVerifier: pkce ? verifier : nil, expectedNonce: "n-0S6_WzA2Mj")
    }

    func sentFields(_ index: Int = 0) -> [String: String] {
        FakeIdP.decodeForm(String(decoding: idp.requests(to: FakeIdP.URLs.appleToken)[index].body, as: UTF8.self)) ?? [:]
    }

    // MARK: Accepted

    @Test func redeemsANativeCodeAndReadsEmailVerifiedFromAString() async throws {
        let identity = try await redeem(provider, signIn()).get()
        #expect(identity.provider == "apple")
        #expect(identity.subject == "001234.abcdef0123456789.0042")
        #expect(identity.email == "x7k2@privaterelay.appleid.com")
        #expect(identity.emailVerified == true)
        #expect(identity.name == nil)
        #expect(identity.tokens.refreshToken != nil)
    }

    @Test func readsEmailVerifiedFalseFromTheString() async throws {
        let identity = try await redeem(provider, signIn(idToken: Mint.rs256(Self.claims(["email_verified": .string("false")])))).get()
        #expect(identity.emailVerified == false)
    }

    @Test func sendsNoRedirectURIAndAClientSecretSignedByTheTeamKey() async throws {
        let request = signIn()
        _ = try await redeem(provider, request).get()
        let fields = sentFields()
        #expect(Set(fields.keys) == ["grant_type", "code", "client_id", "client_secret", "code_verifier"])
        #expect(fields["redirect_uri"] == nil)
        #expect(fields["client_id"] == Self.bundleID)
        #expect(fields["code_verifier"] == request.codeVerifier)
        let secret = try #require(fields["client_secret"])
        #expect(idp.verifyAppleClientSecret(secret, clientID: Self.bundleID))
        let jwt = try JWT(compact: secret)
        #expect(jwt.header.algorithm == "ES256")
        #expect(jwt.header.keyID == idp.apple.keyID)
        #expect(jwt.claims["iss"] == .string(idp.apple.teamID))
        #expect(jwt.claims["sub"] == .string(Self.bundleID))
        #expect(jwt.claims["aud"] == .string("https://appleid.apple.com"))
        #expect(jwt.claims["iat"] == .number(clock.now - 60))
        #expect(jwt.claims["exp"] == .number(clock.now - 60 + 3_600))
    }

    @Test func redeemsACodeWithoutPKCEWithoutSendingAVerifier() async {
        #expect(await redeem(provider, signIn(pkce: false)).refusal == nil)
        #expect(sentFields()["code_verifier"] == nil)
    }

    @Test func reusesTheClientSecretUntilItIsHalfWayToExpiry() async {
        #expect(await redeem(provider, signIn()).refusal == nil)
        clock.advance(1_799)
        #expect(await redeem(provider, signIn(idToken: Mint.rs256(Self.claims(["iat": .number(clock.now)])))).refusal == nil)
        clock.advance(1)
        #expect(await redeem(provider, signIn(idToken: Mint.rs256(Self.claims(["iat": .number(clock.now)])))).refusal == nil)
        let secrets = (0..<3).map { sentFields($0)["client_secret"] }
        #expect(secrets[0] == secrets[1])
        #expect(secrets[1] != secrets[2])
    }

    // MARK: Refused by Apple

    @Test func aRedirectURIIsRefusedByApple() async {
        // What the provider must never do: the fake refuses it as Apple does.
        var request = signIn()
        request.code = idp.issueCode(.apple, .init(clientID: Self.bundleID, redirectURI: nil, codeChallenge: nil,
                                                   idToken: Mint.rs256(Self.claims())))
        let withRedirect = OutboundRequest.form(url: FakeIdP.URLs.appleToken, fields: [
            ("grant_type", "authorization_code"), ("code", request.code), ("client_id", Self.bundleID),
            ("client_secret", try! provider.currentClientSecret(for: Self.bundleID).get()),
            ("redirect_uri", "com.example.app:/apple"),
        ])
        let answer = await onLoop { loop, done in idp.fetch(withRedirect, on: loop, done) }
        #expect(answer.result.outbound?.status == 400)
        let body = String(decoding: answer.result.outbound?.body ?? [], as: UTF8.self)
        #expect(body.contains("invalid_request"))
    }

    @Test func aClientSecretSignedWithAnotherKeyIsRefused() async throws {
        let other = try AppleProvider(Self.settings(teamID: idp.apple.teamID, keyID: idp.apple.keyID, pem: Self.otherPEM),
                                      http: idp, clock: clock.function)
        let failure = await redeem(other, signIn()).refusal
        #expect(failure?.code == "exchange_failed")
        #expect(failure?.logDetail == "apple token endpoint: HTTP 400 error=invalid_client error_description=\"refused by the fake IdP\""
                + " (Apple refuses the client-secret JWT: check team_id, key_id, private_key_file and providers.apple.native.ios.client_id)")
        #expect(failure?.source == .config && failure?.setting == "providers.apple.private_key_file")
    }

    @Test func aClientSecretFromAnotherTeamIsRefused() async throws {
        let other = try AppleProvider(Self.settings(teamID: "OTHERTEAM1", keyID: idp.apple.keyID, pem: FixedP8.pem),
                                      http: idp, clock: clock.function)
        #expect(await redeem(other, signIn()).refusal?.logDetail.contains("error=invalid_client") == true)
    }

    @Test func aClientSecretNamingAnotherKeyIDIsRefused() async throws {
        let other = try AppleProvider(Self.settings(teamID: idp.apple.teamID, keyID: "OTHERKEY99", pem: FixedP8.pem),
                                      http: idp, clock: clock.function)
        #expect(await redeem(other, signIn()).refusal?.logDetail.contains("error=invalid_client") == true)
    }

    @Test func theFakeRefusesClientSecretsWithTheWrongSubjectAudienceOrExpiry() throws {
        let key = try P256PrivateKey(pem: FixedP8.pem)
        func secret(_ claims: [String: JSONValue]) throws -> String {
            try JWTSigner.signES256(claims: claims, keyID: idp.apple.keyID, key: key)
        }
        let good: [String: JSONValue] = ["iss": .string(idp.apple.teamID), "sub": .string(Self.bundleID),
                                         "aud": .string("https://appleid.apple.com"), "iat": .number(clock.now - 60),
                                         "exp": .number(clock.now + 600)]
        #expect(idp.verifyAppleClientSecret(try secret(good), clientID: Self.bundleID))
        var wrongSub = good
        wrongSub["sub"] = .string("com.example.other")
        #expect(!idp.verifyAppleClientSecret(try secret(wrongSub), clientID: Self.bundleID))
        var wrongAud = good
        wrongAud["aud"] = .string("https://appleid.apple.com/")
        #expect(!idp.verifyAppleClientSecret(try secret(wrongAud), clientID: Self.bundleID))
        var expired = good
        expired["exp"] = .number(clock.now - 1)
        #expect(!idp.verifyAppleClientSecret(try secret(expired), clientID: Self.bundleID))
    }

    @Test func aWrongVerifierIsRefusedByApple() async {
        var request = signIn()
        request.codeVerifier = PKCE.verifier()
        let failure = await redeem(provider, request).refusal
        #expect(failure?.logDetail == "apple token endpoint: HTTP 400 error=invalid_grant error_description=\"refused by the fake IdP\"")
        expectNothingSecret(in: failure, [request.code, request.codeVerifier!])
    }

    @Test func aReplayedCodeIsRefusedByApple() async {
        let request = signIn()
        #expect(await redeem(provider, request).refusal == nil)
        #expect(await redeem(provider, request).refusal?.logDetail.contains("error=invalid_grant") == true)
    }

    // MARK: Refused at verification

    @Test func anIDTokenFromAnotherIssuerIsRefused() async {
        let failure = await redeem(provider, signIn(idToken: Mint.rs256(Self.claims(["iss": .string("https://appleid.apple.com/")])))).refusal
        #expect(failure?.logDetail == "apple id_token refused: iss is not an expected issuer")
    }

    @Test func anIDTokenForAnotherClientIsRefused() async {
        let failure = await redeem(provider, signIn(idToken: Mint.rs256(Self.claims(["aud": .string("com.example.web")])))).refusal
        #expect(failure?.code == "invalid_id_token")
    }

    @Test func anExpiredIDTokenIsRefused() async {
        let token = Mint.rs256(Self.claims(["exp": .number(Mint.now - 301)]))
        #expect(await redeem(provider, signIn(idToken: token)).refusal?.logDetail == "apple id_token refused: token expired")
    }

    // MARK: Configuration

    @Test func aProviderWithoutAppleSettingsCannotBeMade() {
        var settings = ProviderSettings(name: "apple", kind: .apple)
        settings.native["ios"] = client
        #expect(throws: ProviderConfigurationError.self) { try ProviderFactory.make(settings, http: idp) }
    }

    @Test func aKeyThatIsNotAP256PEMIsAConfigurationErrorThatDoesNotShowTheKey() throws {
        let error = #expect(throws: ProviderConfigurationError.self) {
            try AppleProvider(Self.settings(teamID: "T", keyID: "K", pem: FixedP8.p384), http: idp, clock: clock.function)
        }
        #expect(error?.description.contains("MIG") == false)
    }

    /// A second P-256 key in `.p8` form, made like FixedP8's with
    /// `openssl ecparam -name prime256v1 -genkey -noout | openssl pkcs8 -topk8 -nocrypt`.
    static let otherPEM = """
        -----BEGIN PRIVATE KEY-----
        MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg2vvnKym8WBGti5GB
        vrNGT1QPvtTOmocByrKc/ZqYxcyhRANCAARRjycBpY/AZ1z5M0V1I6iIg18J4Wi7
        1VOF4uvIxhZTUFhnx5+Fmr1nXhGz7W/G+ErXcwzFdNKvZ281tCq0+w4T
        -----END PRIVATE KEY-----
        """
}

private extension Result where Success == OutboundResponse {
    var outbound: OutboundResponse? {
        if case .success(let r) = self { return r }
        return nil
    }
}
