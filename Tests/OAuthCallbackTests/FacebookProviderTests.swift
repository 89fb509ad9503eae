import Testing
import ProxyCore
@testable import OAuthCallback

@Suite struct FacebookProviderTests {
    let clock = TestClock()
    let idp: FakeIdP
    let settings: ProviderSettings
    let client: NativeClient
    let provider: FacebookProvider
    var appID: String { idp.facebook.appID }
    var secret: String { idp.facebook.secret }
    var redirect: String { "fb\(appID)://authorize" }

    init() throws {
        idp = FakeIdP(clock: clock)
        idp.publishKeys(FakeIdP.URLs.facebookJWKS, [Mint.jwk(TestKeys.rsaA, kid: "rsa-a")])
        client = NativeClient(clientID: idp.facebook.appID, redirectURI: "fb\(idp.facebook.appID)://authorize")
        var settings = ProviderSettings(name: "facebook", kind: .facebook)
        settings.native["ios"] = client
        settings.facebook = FacebookSettings(appID: idp.facebook.appID, appSecret: Secret(idp.facebook.secret))
        self.settings = settings
        provider = try FacebookProvider(settings, http: idp, clock: clock.function)
    }

    /// A Limited Login id_token for our app.
    func idTokenClaims(_ overrides: [String: JSONValue?] = [:]) -> [String: JSONValue] {
        var base: [String: JSONValue?] = ["iss": .string("https://www.facebook.com"), "aud": .string(appID),
                                          "sub": .string("10158000000000001")]
        base.merge(overrides) { $1 }
        return Mint.claims(base)
    }

    func signIn(user: FakeIdP.FacebookUser? = nil, idToken: String? = nil, pkce: Bool = false) -> ExchangeRequest {
        let verifier = PKCE.verifier()
        let code = idp.issueCode(.facebook, .init(clientID: appID, redirectURI: redirect,
                                                  codeChallenge: pkce ? PKCE.challenge(verifier) : nil, idToken: idToken,
                                                  facebookUser: user))
        return ExchangeRequest(provider: settings, platform: "android", client: client, code: code,
                               codeVerifier: pkce ? verifier : nil, expectedNonce: idToken == nil ? nil : "n-0S6_WzA2Mj")
    }

    // MARK: Accepted

    @Test func redeemsTheCodeWithTheAppSecretAndChecksTheTokenWithTheGraphAPI() async throws {
        let identity = try await redeem(provider, signIn()).get()
        #expect(identity.provider == "facebook")
        #expect(identity.subject == "10158000000000001")
        #expect(identity.name == "Jane Doe")
        #expect(identity.email == "jane@example.com")
        #expect(identity.emailVerified == nil)
        #expect(identity.tokens.tokenType == "bearer")
        #expect(idp.allRequests.map { FakeIdP.withoutQuery($0.url) } == [
            FakeIdP.URLs.graph + "/oauth/access_token", FakeIdP.URLs.graph + "/debug_token", FakeIdP.URLs.graph + "/me",
        ])
    }

    @Test func exchangesWithExactlyTheConfidentialClientFieldsInABody() async throws {
        let request = signIn()
        _ = try await redeem(provider, request).get()
        let sent = idp.requests(to: FakeIdP.URLs.graph + "/oauth/access_token")[0]
        #expect(sent.method == "POST")
        #expect(sent.url == FakeIdP.URLs.graph + "/oauth/access_token")
        #expect(FakeIdP.decodeForm(String(decoding: sent.body, as: UTF8.self)) == [
            "client_id": appID, "client_secret": secret, "redirect_uri": redirect, "code": request.code,
        ])
    }

    @Test func sendsTheVerifierWhenTheAppUsedPKCE() async throws {
        let request = signIn(pkce: true)
        _ = try await redeem(provider, request).get()
        let sent = idp.requests(to: FakeIdP.URLs.graph + "/oauth/access_token")[0]
        #expect(FakeIdP.decodeForm(String(decoding: sent.body, as: UTF8.self))?["code_verifier"] == request.codeVerifier)
    }

    @Test func provesTheAppSecretOnTheMeCall() async throws {
        let identity = try await redeem(provider, signIn()).get()
        let me = try #require(idp.requests(to: FakeIdP.URLs.graph + "/me").first)
        let query = try #require(FakeIdP.query(me.url))
        #expect(query["fields"] == "id,name,email")
        #expect(query["appsecret_proof"] == hexString(HMACSHA256.authenticationCode(
            for: Array(identity.tokens.accessToken.utf8), key: Array(secret.utf8))))
    }

    @Test func appSecretProofIsHexHMACSHA256OfTheTokenKeyedWithTheSecret() {
        // RFC 4231 test case 2.
        #expect(FacebookProvider.appSecretProof(accessToken: "what do ya want for nothing?", appSecret: Secret("Jefe"))
                == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
    }

    @Test func verifiesALimitedLoginIDTokenWhenOneIsReturned() async throws {
        let identity = try await redeem(provider, signIn(idToken: Mint.rs256(idTokenClaims()))).get()
        #expect(identity.subject == "10158000000000001")
        #expect(idp.requests(to: FakeIdP.URLs.facebookJWKS).count == 1)
    }

    // MARK: Refused

    @Test func aTokenTheGraphAPICallsInvalidIsRefused() async {
        let failure = await redeem(provider, signIn(user: .init(appID: appID, isValid: false))).refusal
        #expect(failure?.code == "invalid_token")
        #expect(failure?.source == .idp)
        #expect(failure?.logDetail == "facebook /debug_token: token is not valid")
        #expect(idp.requests(to: FakeIdP.URLs.graph + "/me").isEmpty)
    }

    @Test func aTokenIssuedToAnotherAppIsRefused() async {
        let failure = await redeem(provider, signIn(user: .init(appID: "999999999"))).refusal
        #expect(failure?.code == "invalid_token")
        #expect(failure?.logDetail == "facebook /debug_token: token was issued to another app")
        #expect(idp.requests(to: FakeIdP.URLs.graph + "/me").isEmpty)
    }

    @Test func theGraphAPIRefusesAWrongAppSecretProof() async {
        let request = signIn()
        #expect(await redeem(provider, request).refusal == nil)
        let token = idp.requests(to: FakeIdP.URLs.graph + "/debug_token").first.flatMap { FakeIdP.query($0.url)?["input_token"] } ?? ""
        let forged = OutboundRequest(url: FakeIdP.URLs.graph + "/me?" + FormEncoding.encode([
            ("fields", "id,name,email"), ("access_token", token),
            ("appsecret_proof", FacebookProvider.appSecretProof(accessToken: token, appSecret: Secret("not the secret"))),
        ]))
        let answer = await onLoop { loop, done in idp.fetch(forged, on: loop, done) }
        guard case .success(let response) = answer.result else { Issue.record("fetch failed"); return }
        #expect(response.status == 400)
        #expect(String(decoding: response.body, as: UTF8.self).contains("GraphMethodException"))
    }

    @Test func aReplayedCodeIsRefusedByFacebook() async {
        let request = signIn()
        #expect(await redeem(provider, request).refusal == nil)
        let failure = await redeem(provider, request).refusal
        #expect(failure?.code == "exchange_failed")
        #expect(failure?.logDetail == "facebook /oauth/access_token: HTTP 400 error=OAuthException code=100 subcode=36009")
    }

    @Test func aWrongVerifierIsRefusedByFacebook() async {
        var request = signIn(pkce: true)
        request.codeVerifier = PKCE.verifier()
        #expect(await redeem(provider, request).refusal?.code == "exchange_failed")
    }

    @Test func anIDTokenForAnotherAppIsRefused() async {
        let failure = await redeem(provider, signIn(idToken: Mint.rs256(idTokenClaims(["aud": .string("999999999")])))).refusal
        #expect(failure?.code == "invalid_id_token")
        #expect(idp.requests(to: FakeIdP.URLs.graph + "/debug_token").isEmpty)
    }

    @Test func anIDTokenForAnotherUserThanTheAccessTokenIsRefused() async {
        let failure = await redeem(provider, signIn(idToken: Mint.rs256(idTokenClaims(["sub": .string("10158000000000002")])))).refusal
        #expect(failure?.code == "invalid_token")
        #expect(failure?.logDetail == "facebook /debug_token: id_token sub and token user_id differ")
    }

    @Test func aGraphServerErrorIsRetryable() async {
        idp.override(FakeIdP.URLs.graph + "/me", .response(FakeIdP.graphError(500, "OAuthException", code: 2)))
        let failure = await redeem(provider, signIn()).refusal
        #expect(failure?.code == "idp_unavailable")
        #expect(failure?.retryable == true)
        #expect(failure?.logDetail == "facebook /me: HTTP 500 error=OAuthException code=2")
    }

    @Test func secretsInAFetcherDetailNeverReachTheLog() async {
        // A careless fetcher that echoes the URL it called, query and all.
        let request = signIn()
        let leaky = "GET \(FakeIdP.URLs.graph)/debug_token?access_token=\(appID)|\(secret) failed; secret=\(secret)"
        idp.override(FakeIdP.URLs.graph + "/debug_token", .error(OutboundError(.timeout, leaky)))
        let failure = await redeem(provider, request).refusal
        #expect(failure?.code == "idp_unavailable")
        #expect(failure?.retryable == true)
        #expect(failure?.logDetail.hasPrefix("facebook /debug_token: timeout: ") == true)
        expectNothingSecret(in: failure, [secret, request.code, "access_token="])
    }

    @Test func failureDetailsNameOnlyThePathOfCallsThatCarrySecrets() async {
        for path in ["/debug_token", "/me"] {
            idp.override(FakeIdP.URLs.graph + path, .response(OutboundResponse(status: 200, body: Array("nope".utf8))))
            let request = signIn()
            let failure = await redeem(provider, request).refusal
            #expect(failure?.logDetail == "facebook \(path): HTTP 200 body is not a JSON object")
            expectNothingSecret(in: failure, [secret, request.code])
            idp.override(FakeIdP.URLs.graph + path, nil)
        }
    }

    @Test func aProviderWithoutFacebookSettingsCannotBeMade() {
        var settings = self.settings
        settings.facebook = nil
        let error = #expect(throws: ProviderConfigurationError.self) { try ProviderFactory.make(settings, http: idp) }
        #expect(error?.description == "provider facebook: kind facebook needs app_id and app_secret")
    }

    @Test func theDefaultGraphVersionIsTheNewestAndRetiredOnesAreNamed() {
        #expect(FacebookProvider.defaultGraph == "https://graph.facebook.com/" + GraphAPIVersions.newest)
        #expect(GraphAPIVersions.retirement(of: GraphAPIVersions.newest, today: 2026_12_01) == nil)
        #expect(GraphAPIVersions.version(in: "https://graph.facebook.com/v19.0") == "v19.0")
        #expect(GraphAPIVersions.version(in: "https://graph.facebook.com/v19.0/") == "v19.0")
        #expect(GraphAPIVersions.version(in: "http://127.0.0.1:9000") == nil)
        #expect(GraphAPIVersions.retirement(of: "v19.0", today: 2026_12_01) == "available until 2026-05-21")
        #expect(GraphAPIVersions.retirement(of: "v19.0", today: 2026_05_21) == nil, "its last day still answers")
        #expect(GraphAPIVersions.retirement(of: "v12.0", today: 2026_12_01) == "retired before 2025-05-14")
        #expect(GraphAPIVersions.retirement(of: "v21.0", today: 2026_12_01) == nil)
        #expect(GraphAPIVersions.retirement(of: "v99.0", today: 2026_12_01) == nil, "unknown newer versions are not judged")
    }
}
