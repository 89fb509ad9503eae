import Testing
import ProxyCore
@testable import OAuthCallback

@Suite struct OIDCProviderTests {
    static let issuer = FakeIdP.URLs.oidcIssuer
    static let publicClient = NativeClient(clientID: "native-public", redirectURI: "com.example.app:/oidc")

    let clock = TestClock()
    let idp: FakeIdP
    let settings: ProviderSettings

    init() {
        idp = FakeIdP(clock: clock)
        idp.publishKeys(FakeIdP.URLs.oidcJWKS, [Mint.jwk(TestKeys.rsaA, kid: "rsa-a"), Mint.jwk(TestKeys.ecA, kid: "ec-a")])
        idp.registerOIDCClient("native-public", .init(secret: nil))
        var settings = ProviderSettings(name: "corp", kind: .oidc)
        settings.endpoints.issuer = Self.issuer
        settings.native["ios"] = Self.publicClient
        self.settings = settings
    }

    func provider(_ settings: ProviderSettings? = nil) throws -> OIDCProvider {
        try OIDCProvider(settings ?? self.settings, http: idp, clock: clock.function)
    }

    func claims(_ client: NativeClient = publicClient, _ overrides: [String: JSONValue?] = [:]) -> [String: JSONValue] {
        var base: [String: JSONValue?] = ["iss": .string(Self.issuer), "aud": .string(client.clientID)]
        base.merge(overrides) { $1 }
        return Mint.claims(base)
    }

    func signIn(_ client: NativeClient = publicClient, idToken: String? = nil, pkce: Bool = true) -> ExchangeRequest {
        let verifier = PKCE.verifier()
        let code = idp.issueCode(.oidc, .init(clientID: client.clientID, redirectURI: client.redirectURI,
                                              codeChallenge: pkce ? PKCE.challenge(verifier) : nil,
                                              idToken: idToken ?? Mint.rs256(claims(client))))
        return ExchangeRequest(provider: settings, platform: "ios", client: client, code: code,
                               codeVerifier: pkce ? verifier : nil, expectedNonce: "n-0S6_WzA2Mj")
    }

    func tokenRequest(_ index: Int = 0) -> (fields: [String: String], authorization: String?) {
        let sent = idp.requests(to: FakeIdP.URLs.oidcToken)[index]
        return (FakeIdP.decodeForm(String(decoding: sent.body, as: UTF8.self)) ?? [:], FakeIdP.header(sent, "Authorization"))
    }

    // MARK: Discovery

    @Test func discoversTheEndpointsOnceAndRedeemsAPublicClientsCodeWithPKCE() async throws {
        let provider = try provider()
        let identity = try await redeem(provider, signIn()).get()
        #expect(identity.provider == "corp")
        #expect(identity.subject == "110169484474386276334")
        #expect(identity.tokens.expiresIn == 3600)
        #expect(await redeem(provider, signIn()).refusal == nil)
        #expect(idp.requests(to: FakeIdP.URLs.oidcDiscovery).count == 1)
        #expect(idp.requests(to: FakeIdP.URLs.oidcJWKS).count == 1)
        let (fields, authorization) = tokenRequest()
        #expect(Set(fields.keys) == ["grant_type", "code", "client_id", "redirect_uri", "code_verifier"])
        #expect(authorization == nil)
    }

    @Test func aDiscoveredIssuerOtherThanTheConfiguredOneIsRefused() async throws {
        idp.setDiscoveryIssuer(Self.issuer + "/")
        let failure = await redeem(try provider(), signIn()).refusal
        #expect(failure?.code == "idp_unavailable")
        #expect(failure?.retryable == false)
        #expect(failure?.source == .config && failure?.setting == "providers.corp.endpoints.issuer",
                "a permanent mistake of the configuration, not an IdP outage")
        #expect(failure?.logDetail == "corp discovery \(FakeIdP.URLs.oidcDiscovery): document issuer \"\(Self.issuer)/\" does not equal "
                + "endpoints.issuer \"\(Self.issuer)\" (they differ only in a trailing /: write endpoints.issuer exactly as the document has it)")
        #expect(idp.requests(to: FakeIdP.URLs.oidcToken).isEmpty)
    }

    @Test func aFailedDiscoveryFailsFastUntilTheBackoffHasPassed() async throws {
        let provider = try provider()
        idp.override(FakeIdP.URLs.oidcDiscovery, .response(OutboundResponse(status: 503)))
        let first = await redeem(provider, signIn()).refusal
        #expect(first?.code == "idp_unavailable")
        #expect(first?.retryable == true)
        idp.override(FakeIdP.URLs.oidcDiscovery, nil)
        clock.advance(29)
        #expect(await redeem(provider, signIn()).refusal?.code == "idp_unavailable")
        #expect(idp.requests(to: FakeIdP.URLs.oidcDiscovery).count == 1)
        clock.advance(1)
        #expect(await redeem(provider, signIn(idToken: Mint.rs256(claims(Self.publicClient, ["iat": .number(clock.now)])))).refusal == nil)
        #expect(idp.requests(to: FakeIdP.URLs.oidcDiscovery).count == 2)
    }

    @Test func concurrentFirstLoginsShareOneDiscoveryFetch() async throws {
        let provider = try provider()
        idp.hold(FakeIdP.URLs.oidcDiscovery)
        let requests = (0..<4).map { _ in signIn() }
        async let results = withTaskGroup(of: Bool.self) { group in
            for request in requests { group.addTask { await redeem(provider, request).refusal == nil } }
            return await group.reduce(into: [Bool]()) { $0.append($1) }
        }
        await until { provider.discovery.waitingCount == 4 }
        idp.release(FakeIdP.URLs.oidcDiscovery)
        #expect(await results == [true, true, true, true])
        #expect(idp.requests(to: FakeIdP.URLs.oidcDiscovery).count == 1)
    }

    @Test func configuredTokenAndJWKSEndpointsSkipDiscovery() async throws {
        var settings = self.settings
        settings.endpoints.token = FakeIdP.URLs.oidcToken
        settings.endpoints.jwks = FakeIdP.URLs.oidcJWKS
        #expect(await redeem(try provider(settings), signIn()).refusal == nil)
        #expect(idp.requests(to: FakeIdP.URLs.oidcDiscovery).isEmpty)
    }

    @Test func discoveryComesFromTheConfiguredURLWhenSet() async throws {
        var settings = self.settings
        settings.endpoints.discovery = FakeIdP.URLs.oidcDiscovery
        settings.endpoints.issuer = Self.issuer + "/"
        idp.setDiscoveryIssuer(Self.issuer + "/")
        let provider = try provider(settings)
        #expect(provider.discoveryURL == FakeIdP.URLs.oidcDiscovery)
        let request = signIn(idToken: Mint.rs256(claims(Self.publicClient, ["iss": .string(Self.issuer + "/")])))
        #expect(await redeem(provider, request).refusal == nil)
    }

    @Test(arguments: [
        ("https://idp.example.com/token", true),
        ("http://127.0.0.1:8080/token", true),
        ("http://localhost/token", true),
        ("http://[::1]:9000/jwks", true),
        ("http://idp.example.com/token", false),
        ("http://localhost.evil.example/token", false),
        ("http://127.0.0.1.evil.example/token", false),
        ("https://", false),
        ("ftp://idp.example.com/token", false),
    ])
    func discoveredEndpointsMustBeHTTPSExceptOnLoopback(url: String, accepted: Bool) {
        #expect(OIDCProvider.Discovery.isAcceptableEndpoint(url) == accepted)
    }

    // MARK: Client authentication

    @Test func aConfidentialClientSendsItsSecretInTheBodyWithClientSecretPost() async throws {
        let client = NativeClient(clientID: "native-post", redirectURI: "com.example.app:/oidc",
                                  clientSecret: Secret("post secret"), clientAuth: .post)
        idp.registerOIDCClient("native-post", .init(secret: "post secret", method: .post))
        let request = signIn(client, pkce: false)
        #expect(await redeem(try provider(), request).refusal == nil)
        let (fields, authorization) = tokenRequest()
        #expect(fields == ["grant_type": "authorization_code", "code": request.code, "client_id": "native-post",
                           "client_secret": "post secret", "redirect_uri": "com.example.app:/oidc"])
        #expect(authorization == nil)
    }

    @Test func clientSecretBasicFormEncodesIDAndSecretBeforeBase64() {
        #expect(OIDCProvider.basicAuthorization(clientID: "client:one", secret: Secret("sé cret:&="))
                == "Basic Y2xpZW50JTNBb25lOnMlQzMlQTkrY3JldCUzQSUyNiUzRA==")
    }

    @Test func aConfidentialClientWithColonAndNonASCIIInItsSecretAuthenticatesWithClientSecretBasic() async throws {
        let client = NativeClient(clientID: "client:one", redirectURI: "com.example.app:/oidc",
                                  clientSecret: Secret("sé cret:&="), clientAuth: .basic)
        idp.registerOIDCClient("client:one", .init(secret: "sé cret:&=", method: .basic))
        let request = signIn(client)
        #expect(await redeem(try provider(), request).refusal == nil)
        let (fields, authorization) = tokenRequest()
        #expect(authorization == "Basic Y2xpZW50JTNBb25lOnMlQzMlQTkrY3JldCUzQSUyNiUzRA==")
        #expect(Set(fields.keys) == ["grant_type", "code", "redirect_uri", "code_verifier"])
    }

    @Test func aSecretSentTheWrongWayIsRefusedByTheIssuer() async throws {
        // Registered for client_secret_basic, configured (wrongly) for client_secret_post.
        let client = NativeClient(clientID: "native-basic", redirectURI: "com.example.app:/oidc",
                                  clientSecret: Secret("s3cret"), clientAuth: .post)
        idp.registerOIDCClient("native-basic", .init(secret: "s3cret", method: .basic))
        let failure = await redeem(try provider(), signIn(client)).refusal
        #expect(failure?.logDetail == "corp token endpoint: HTTP 401 error=invalid_client error_description=\"refused by the fake IdP\""
                + " (the IdP refuses this client: check providers.corp.native.ios's client_id, secret and client_auth)")
        #expect(failure?.source == .config && failure?.setting == "providers.corp.native.ios")
        expectNothingSecret(in: failure, ["s3cret"])
    }

    @Test func aPublicClientWithoutVerifierIsRefusedBeforeAnyCall() async throws {
        let failure = await redeem(try provider(), signIn(pkce: false)).refusal
        #expect(failure?.code == "invalid_request")
        #expect(idp.allRequests.isEmpty)
    }

    @Test func aWrongVerifierIsRefusedByTheIssuer() async throws {
        var request = signIn()
        request.codeVerifier = PKCE.verifier()
        #expect(await redeem(try provider(), request).refusal?.logDetail == "corp token endpoint: HTTP 400 error=invalid_grant error_description=\"refused by the fake IdP\"")
    }

    @Test func aReplayedCodeIsRefusedByTheIssuer() async throws {
        let provider = try provider()
        let request = signIn()
        #expect(await redeem(provider, request).refusal == nil)
        #expect(await redeem(provider, request).refusal?.logDetail.contains("error=invalid_grant") == true)
    }

    // MARK: Verification

    @Test func acceptsES256ByDefault() async throws {
        #expect(await redeem(try provider(), signIn(idToken: Mint.es256(claims()))).refusal == nil)
    }

    @Test func honoursTheConfiguredAlgorithms() async throws {
        var settings = self.settings
        settings.allowedAlgorithms = ["RS256"]
        let failure = await redeem(try provider(settings), signIn(idToken: Mint.es256(claims()))).refusal
        #expect(failure?.logDetail == "corp id_token refused: alg ES256 is not allowed for this provider")
    }

    @Test func anIDTokenFromAnotherIssuerIsRefused() async throws {
        let token = Mint.rs256(claims(Self.publicClient, ["iss": .string("https://login.example.org/other")]))
        #expect(await redeem(try provider(), signIn(idToken: token)).refusal?.code == "invalid_id_token")
    }

    @Test func anIDTokenForAnotherClientIsRefused() async throws {
        let token = Mint.rs256(claims(Self.publicClient, ["aud": .string("someone-else")]))
        #expect(await redeem(try provider(), signIn(idToken: token)).refusal?.code == "invalid_id_token")
    }

    // MARK: Configuration

    @Test func anOIDCProviderNeedsAnIssuer() {
        var settings = self.settings
        settings.endpoints.issuer = nil
        let error = #expect(throws: ProviderConfigurationError.self) { try ProviderFactory.make(settings, http: idp) }
        #expect(error?.description == "provider corp: kind oidc needs endpoints.issuer")
    }

    @Test func theFactoryMakesTheProviderOfEachKind() throws {
        #expect(try ProviderFactory.make(settings, http: idp) is OIDCProvider)
        var google = ProviderSettings(name: "google", kind: .google)
        google.native["ios"] = Self.publicClient
        #expect(try ProviderFactory.make(google, http: idp) is GoogleProvider)
    }

    @Test func theIdentityCarriesPreferredUsernameAndGroupsFromTheClaims() {
        let claims = VerifiedClaims(claims: ["preferred_username": .string("jane"),
                                             "groups": .array([.string("admins"), .number("7"), .string("staff")])],
                                    issuer: "https://idp.example", subject: "s", audience: ["a"], expiresAt: 2, issuedAt: 1,
                                    algorithm: .rs256, keyID: nil)
        let identity = ProviderSupport.identity(claims, provider: "corp", tokens: TokenResponse(accessToken: "t"))
        #expect(identity.preferredUsername == "jane")
        #expect(identity.groups == ["admins", "staff"], "only strings are group names")
        #expect(ProviderSupport.groups(JSONValue.string("one")) == ["one"])
        #expect(ProviderSupport.groups(Optional<JSONValue>.none) == [] && ProviderSupport.groups(JSONValue.bool(true)) == [])
    }
}
