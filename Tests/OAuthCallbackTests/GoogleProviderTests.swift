import Testing
import ProxyCore
@testable import OAuthCallback

@Suite struct GoogleProviderTests {
    static let clientID = "123-ios.apps.googleusercontent.com"
    static let redirect = "com.googleusercontent.apps.123-ios:/oauth2redirect"

    let clock = TestClock()
    let idp: FakeIdP
    let settings: ProviderSettings
    let client = NativeClient(clientID: clientID, redirectURI: redirect)
    let provider: GoogleProvider

    init() throws {
        idp = FakeIdP(clock: clock)
        idp.publishKeys(FakeIdP.URLs.googleJWKS, [Mint.jwk(TestKeys.rsaA, kid: "rsa-a"), Mint.jwk(TestKeys.rsaB, kid: "rsa-b")],
                        cacheControl: "public, max-age=19800, must-revalidate, no-transform")
        var settings = ProviderSettings(name: "google", kind: .google)
        settings.native["ios"] = client
        self.settings = settings
        provider = try GoogleProvider(settings, http: idp, clock: clock.function)
    }

    /// Claims Google puts in a native client's id_token; tests override single members.
    static func claims(_ overrides: [String: JSONValue?] = [:]) -> [String: JSONValue] {
        var base: [String: JSONValue?] = ["iss": .string("https://accounts.google.com"), "aud": .string(clientID),
                                          "azp": .string(clientID)]
        base.merge(overrides) { $1 }
        return Mint.claims(base)
    }

    /// A code Google issued to our iOS client with PKCE, and the request that redeems it.
    func signIn(idToken: String? = Mint.rs256(claims()), verifier: String? = nil,
                nonce: String? = "n-0S6_WzA2Mj") -> (ExchangeRequest, verifier: String) {
        let real = PKCE.verifier()
        let code = idp.issueCode(.google, .init(clientID: Self.clientID, redirectURI: Self.redirect,
                                                codeChallenge: PKCE.challenge(real), idToken: idToken))
        let request = ExchangeRequest(provider: settings, platform: "ios", client: client, code: code,
                                      codeVerifier: verifier ?? real, expectedNonce: nonce)
        return (request, real)
    }

    func failure(idToken: String, provider: GoogleProvider? = nil) async -> CallbackFailure? {
        await redeem(provider ?? self.provider, signIn(idToken: idToken).0).refusal
    }

    // MARK: Accepted

    @Test func redeemsANativeCodeWithPKCEAndReturnsTheVerifiedIdentity() async throws {
        let (request, _) = signIn()
        let identity = try await redeem(provider, request).get()
        #expect(identity.provider == "google")
        #expect(identity.subject == "110169484474386276334")
        #expect(identity.email == "jane@example.com")
        #expect(identity.emailVerified == true)
        #expect(identity.name == "Jane Doe")
        #expect(identity.tokens.tokenType == "Bearer")
        #expect(identity.tokens.expiresIn == 3599)
        #expect(identity.tokens.idToken != nil)
        #expect(String(decoding: identity.tokens.raw, as: UTF8.self).contains(identity.tokens.accessToken))
    }

    @Test func sendsExactlyTheFivePKCEFieldsAndNoClientSecret() async throws {
        let (request, verifier) = signIn()
        _ = try await redeem(provider, request).get()
        let sent = idp.requests(to: FakeIdP.URLs.googleToken)
        try #require(sent.count == 1)
        #expect(sent[0].method == "POST")
        #expect(sent[0].idempotent == false)
        #expect(FakeIdP.header(sent[0], "Authorization") == nil)
        let fields = try #require(FakeIdP.decodeForm(String(decoding: sent[0].body, as: UTF8.self)))
        #expect(fields == ["grant_type": "authorization_code", "code": request.code, "client_id": Self.clientID,
                           "redirect_uri": Self.redirect, "code_verifier": verifier])
    }

    @Test func acceptsTheIssuerWithoutScheme() async {
        #expect(await failure(idToken: Mint.rs256(Self.claims(["iss": .string("accounts.google.com")]))) == nil)
    }

    @Test func acceptsATokenWithoutNonceWhenNoneIsExpected() async {
        let (request, _) = signIn(idToken: Mint.rs256(Self.claims(["nonce": nil])), nonce: nil)
        #expect(await redeem(provider, request).refusal == nil)
    }

    @Test func configuredIssuerReplacesGooglesTwo() async throws {
        var settings = self.settings
        settings.endpoints.issuer = "https://accounts.example.com"
        let custom = try GoogleProvider(settings, http: idp, clock: clock.function)
        #expect(await failure(idToken: Mint.rs256(Self.claims(["iss": .string("https://accounts.example.com")])),
                              provider: custom) == nil)
        #expect(await failure(idToken: Mint.rs256(Self.claims()), provider: custom)?.code == "invalid_id_token")
    }

    @Test func usesTheConfiguredTokenAndJWKSEndpoints() async throws {
        var settings = self.settings
        settings.endpoints.token = "https://oauth2.googleapis.com/token"
        settings.endpoints.jwks = "https://keys.example.net/google"
        idp.publishKeys("https://keys.example.net/google", [Mint.jwk(TestKeys.rsaA, kid: "rsa-a")])
        let custom = try GoogleProvider(settings, http: idp, clock: clock.function)
        #expect(await redeem(custom, signIn().0).refusal == nil)
        #expect(idp.requests(to: "https://keys.example.net/google").count == 1)
        #expect(idp.requests(to: FakeIdP.URLs.googleJWKS).isEmpty)
    }

    // MARK: Refused at the exchange

    @Test func aWrongVerifierIsRefusedByGoogle() async {
        let (request, _) = signIn(verifier: PKCE.verifier())
        let failure = await redeem(provider, request).refusal
        #expect(failure?.code == "exchange_failed")
        #expect(failure?.source == .idp)
        #expect(failure?.logDetail == "google token endpoint: HTTP 400 error=invalid_grant error_description=\"refused by the fake IdP\"")
        expectNothingSecret(in: failure, [request.code, request.codeVerifier!])
    }

    @Test func aMissingVerifierIsRefusedBeforeGoogleIsCalled() async {
        var (request, _) = signIn()
        request.codeVerifier = nil
        let failure = await redeem(provider, request).refusal
        #expect(failure?.code == "invalid_request")
        #expect(failure?.source == .client)
        #expect(idp.allRequests.isEmpty)
    }

    @Test func aReplayedCodeIsRefusedByGoogle() async {
        let (request, _) = signIn()
        #expect(await redeem(provider, request).refusal == nil)
        let failure = await redeem(provider, request).refusal
        #expect(failure?.code == "exchange_failed")
        #expect(failure?.logDetail.contains("error=invalid_grant") == true)
    }

    @Test func aRedirectOtherThanTheAuthorizationRequestsIsRefused() async {
        var (request, _) = signIn()
        request.client.redirectURI = "com.example.other:/oauth2redirect"
        #expect(await redeem(provider, request).refusal?.logDetail.contains("error=redirect_uri_mismatch") == true)
    }

    @Test func anIdPServerErrorIsRetryable() async {
        idp.override(FakeIdP.URLs.googleToken, .response(FakeIdP.oauthError(500, "internal_failure")))
        let failure = await redeem(provider, signIn().0).refusal
        #expect(failure?.code == "idp_unavailable")
        #expect(failure?.retryable == true)
        #expect(failure?.status == 502)
        #expect(failure?.logDetail == "google token endpoint: HTTP 500 error=internal_failure error_description=\"refused by the fake IdP\"")
    }

    @Test func garbageJSONIsAFailedExchange() async {
        idp.override(FakeIdP.URLs.googleToken, .response(OutboundResponse(status: 200, body: Array("{\"access_token\": ".utf8))))
        let failure = await redeem(provider, signIn().0).refusal
        #expect(failure?.code == "exchange_failed")
        #expect(failure?.logDetail == "google token endpoint: HTTP 200 body is not a JSON object")
    }

    @Test(arguments: [OutboundError.Kind.timeout, .tls, .connect, .protocolError])
    func transportErrorsAreRetryableIdPFailures(kind: OutboundError.Kind) async {
        idp.override(FakeIdP.URLs.googleToken, .error(OutboundError(kind, "no answer")))
        let failure = await redeem(provider, signIn().0).refusal
        #expect(failure?.source == .idp)
        #expect(failure?.code == "idp_unavailable")
        #expect(failure?.retryable == true)
        #expect(failure?.logDetail == "google token endpoint: \(kind.rawValue): no answer")
    }

    @Test func aTokenResponseWithoutIDTokenIsRefused() async {
        let failure = await redeem(provider, signIn(idToken: nil).0).refusal
        #expect(failure?.code == "invalid_id_token")
        #expect(failure?.logDetail == "google token endpoint: token response has no id_token")
    }

    // MARK: Refused at verification

    @Test func anExpiredIDTokenIsRefused() async {
        let token = Mint.rs256(Self.claims(["iat": .number(Mint.now - 4_000), "exp": .number(Mint.now - 301)]))
        let failure = await failure(idToken: token)
        #expect(failure?.code == "invalid_id_token")
        #expect(failure?.logDetail == "google id_token refused: token expired")
        #expect(failure?.retryable == false)
    }

    @Test func anIDTokenForAnotherAudienceIsRefused() async {
        let token = Mint.rs256(Self.claims(["aud": .string("999-web.apps.googleusercontent.com"), "azp": nil]))
        #expect(await failure(idToken: token)?.logDetail == "google id_token refused: aud does not contain our client id")
    }

    @Test func anIDTokenAuthorizedForAnotherPartyIsRefused() async {
        let token = Mint.rs256(Self.claims(["azp": .string("999-web.apps.googleusercontent.com")]))
        #expect(await failure(idToken: token)?.logDetail == "google id_token refused: azp is not our client id")
    }

    @Test func anIDTokenFromAnotherIssuerIsRefused() async {
        let token = Mint.rs256(Self.claims(["iss": .string("https://accounts.google.com.evil.example")]))
        #expect(await failure(idToken: token)?.logDetail == "google id_token refused: iss is not an expected issuer")
    }

    @Test func anIDTokenWithABadSignatureIsRefused() async {
        // Signed with rsa-b's key but naming rsa-a.
        let token = Mint.rs256(Self.claims(), kid: "rsa-a", key: TestKeys.rsaB)
        #expect(await failure(idToken: token)?.logDetail == "google id_token refused: signature does not verify")
    }

    @Test func anUnsignedIDTokenIsRefused() async {
        let token = Mint.token(header: ["alg": .string("none")], claims: Self.claims()) { _ in [0] }
        let failure = await failure(idToken: token)
        #expect(failure?.code == "invalid_id_token")
        #expect(failure?.logDetail == "google id_token refused: alg none is refused")
    }

    @Test func anES256IDTokenIsRefusedBecauseGoogleSignsWithRS256() async {
        idp.publishKeys(FakeIdP.URLs.googleJWKS, [Mint.jwk(TestKeys.rsaA, kid: "rsa-a"), Mint.jwk(TestKeys.ecA, kid: "ec-a")])
        let failure = await failure(idToken: Mint.es256(Self.claims()))
        #expect(failure?.logDetail == "google id_token refused: alg ES256 is not allowed for this provider")
    }

    @Test func aNonceOtherThanTheExpectedOneIsRefused() async {
        let (request, _) = signIn(nonce: "another-nonce")
        #expect(await redeem(provider, request).refusal?.logDetail == "google id_token refused: nonce does not match")
    }

    @Test func anUnknownKidRefetchesGooglesKeysOnceAndThenVerifies() async {
        #expect(await redeem(provider, signIn().0).refusal == nil)
        clock.advance(61)
        idp.publishKeys(FakeIdP.URLs.googleJWKS, [Mint.jwk(TestKeys.rsaA, kid: "rsa-a"), Mint.jwk(TestKeys.ecA, kid: "x"),
                                                  Mint.jwk(TestKeys.rsaB, kid: "rotated-in")])
        let token = Mint.rs256(Self.claims(["iat": .number(clock.now)]), kid: "rotated-in", key: TestKeys.rsaB)
        #expect(await failure(idToken: token) == nil)
        #expect(idp.requests(to: FakeIdP.URLs.googleJWKS).count == 2)
    }

    @Test func unavailableKeysAreARetryableFailure() async {
        idp.override(FakeIdP.URLs.googleJWKS, .response(OutboundResponse(status: 503)))
        let failure = await redeem(provider, signIn().0).refusal
        #expect(failure?.code == "idp_unavailable")
        #expect(failure?.retryable == true)
        #expect(failure?.logDetail == "google JWKS unavailable: \(FakeIdP.URLs.googleJWKS) answered HTTP 503")
    }

    @Test func anUnknownAlgorithmInTheSettingsIsAConfigurationError() {
        var settings = self.settings
        settings.allowedAlgorithms = ["RS256", "HS256"]
        #expect(throws: ProviderConfigurationError.self) { try GoogleProvider(settings, http: idp, clock: clock.function) }
    }
}
