import Testing
import ProxyCore
@testable import OAuthCallback

/// A session's refresh at the provider (`SessionRefreshing`, Google here; OIDC shares the tail):
/// what is sent for each kind of client, and how each answer is read.
@Suite struct TokenRefreshTests {
    static let ios = "123-ios.apps.googleusercontent.com"
    static let web = "123-web.apps.googleusercontent.com"
    static let subject = "110169484474386276334"   // Mint.claims()'s
    static let refreshToken = "1//0gRefreshTokenOfTheSession-abcdefghijklmnop"

    let idp: FakeIdP
    let settings: ProviderSettings
    let provider: GoogleProvider

    init() throws {
        let clock = TestClock()
        idp = FakeIdP(clock: clock)
        idp.publishKeys(FakeIdP.URLs.googleJWKS, [Mint.jwk(TestKeys.rsaA, kid: "rsa-a")])
        var settings = ProviderSettings(name: "google", kind: .google)
        settings.native["ios"] = NativeClient(clientID: Self.ios, redirectURI: "com.googleusercontent.apps.123-ios:/oauth2redirect")
        settings.appClient = ClientCredentials(clientID: Self.web, clientSecret: Secret("web-secret-0123"), clientAuth: .basic)
        self.settings = settings
        provider = try GoogleProvider(settings, http: idp, clock: clock.function)
    }

    func request(_ platform: String) throws -> RefreshRequest {
        let client = try #require(SessionLayer.refreshClient(settings, platform: platform))
        return RefreshRequest(provider: settings, platform: platform, client: client, refreshToken: Self.refreshToken,
                              subject: Self.subject)
    }

    func answer(_ response: OutboundResponse) { idp.override(FakeIdP.URLs.googleToken, .response(response)) }

    func refresh(_ platform: String = "ios") async throws -> RefreshResult {
        let request = try request(platform)
        let provider = self.provider
        let delivered = await onLoop { loop, done in provider.refresh(request, on: loop, done) }
        #expect(delivered.onLoop, "completion ran off its event loop")
        return delivered.result
    }

    static func claims(_ overrides: [String: JSONValue?] = [:], audience: String = ios) -> [String: JSONValue] {
        var base: [String: JSONValue?] = ["iss": .string("https://accounts.google.com"), "aud": .string(audience),
                                          "azp": .string(audience), "nonce": nil, "groups": .array([.string("admins")])]
        base.merge(overrides) { $1 }
        return Mint.claims(base)
    }

    func sentFields() throws -> [String: String] {
        let sent = try #require(idp.requests(to: FakeIdP.URLs.googleToken).last)
        return try #require(FakeIdP.decodeForm(String(decoding: sent.body, as: UTF8.self)))
    }

    @Test func aPublicNativeClientSendsOnlyItsIDAndTheToken() async throws {
        answer(FakeIdP.json(200, ["access_token": .string("ya29.new"), "token_type": .string("Bearer"),
                                  "id_token": .string(Mint.rs256(Self.claims()))]))
        guard case .renewed(let identity) = try await refresh("ios") else { Issue.record("not renewed"); return }
        #expect(try sentFields() == ["grant_type": "refresh_token", "refresh_token": Self.refreshToken, "client_id": Self.ios])
        #expect(FakeIdP.header(try #require(idp.requests(to: FakeIdP.URLs.googleToken).last), "Authorization") == nil)
        #expect(identity.tokens.accessToken == "ya29.new" && identity.tokens.refreshToken == nil)
        #expect(identity.claims?["groups"] == .array([.string("admins")]))
    }

    @Test func theWebClientAuthenticatesWithItsSecretAndItsIDTokenIsForIt() async throws {
        answer(FakeIdP.json(200, ["access_token": .string("ya29.new"), "refresh_token": .string("1//rotated"),
                                  "id_token": .string(Mint.rs256(Self.claims(audience: Self.web)))]))
        guard case .renewed(let identity) = try await refresh("web") else { Issue.record("not renewed"); return }
        let sent = try #require(idp.requests(to: FakeIdP.URLs.googleToken).last)
        #expect(FakeIdP.header(sent, "Authorization")?.hasPrefix("Basic ") == true)
        #expect(try sentFields() == ["grant_type": "refresh_token", "refresh_token": Self.refreshToken])
        #expect(identity.tokens.refreshToken == "1//rotated")
    }

    @Test func anIDTokenForAnotherClientOrUserOrExpiredIsNotARenewal() async throws {
        for claims in [Self.claims(audience: Self.web), Self.claims(["sub": .string("someone-else")]),
                       Self.claims(["exp": .number(1), "iat": .number(0)])] {
            answer(FakeIdP.json(200, ["access_token": .string("ya29.new"), "id_token": .string(Mint.rs256(claims))]))
            guard case .failed(let failure) = try await refresh("ios") else { Issue.record("accepted \(claims)"); continue }
            #expect(!failure.logDetail.contains(Self.refreshToken))
        }
    }

    @Test func invalidGrantIsTheSessionsEnd() async throws {
        answer(FakeIdP.oauthError(400, "invalid_grant"))
        guard case .invalidGrant = try await refresh() else { Issue.record("not invalid_grant"); return }
    }

    @Test func anUnavailableIdPIsNotTheSessionsEnd() async throws {
        for response in [FakeIdP.status(503), FakeIdP.oauthError(429, "rate_limited"), FakeIdP.oauthError(500, "server_error")] {
            answer(response)
            guard case .unavailable = try await refresh() else { Issue.record("\(response.status) not unavailable"); continue }
        }
        idp.override(FakeIdP.URLs.googleToken, .error(OutboundError(.timeout, "no answer in 10 s")))
        guard case .unavailable = try await refresh() else { Issue.record("timeout not unavailable"); return }
    }

    @Test func aRefusedClientOrAMalformedAnswerEndsItNamingTheSetting() async throws {
        answer(FakeIdP.oauthError(401, "invalid_client"))
        guard case .failed(let failure) = try await refresh("web") else { Issue.record("not failed"); return }
        #expect(failure.source == .config && failure.setting == "providers.google.app_client")
        answer(OutboundResponse(status: 200, body: Array("<html>".utf8)))
        guard case .failed = try await refresh() else { Issue.record("garbage accepted"); return }
    }

    @Test func withoutAnIDTokenOrAUserinfoEndpointTheClaimsAreKept() async throws {
        // A token endpoint that is not Google's: Google's userinfo must not get its access token.
        var settings = self.settings
        settings.endpoints.token = "https://idp.example.test/token"
        let provider = try GoogleProvider(settings, http: idp, clock: TestClock().function)
        #expect(provider.userinfoEndpoint == nil && self.provider.userinfoEndpoint == GoogleProvider.defaultUserinfo)
        idp.override("https://idp.example.test/token", .response(FakeIdP.json(200, ["access_token": .string("ya29.new")])))
        let request = try request("ios")
        let delivered = await onLoop { loop, done in provider.refresh(request, on: loop, done) }
        guard case .renewed(let identity) = delivered.result else { Issue.record("not renewed"); return }
        #expect(identity.claims == nil)
    }

    @Test func aClientNoLongerConfiguredHasNoRefreshClient() {
        #expect(SessionLayer.refreshClient(settings, platform: "android") == nil)
        #expect(SessionLayer.refreshClient(settings, platform: "web")?.clientSecret?.value == "web-secret-0123")
    }
}
