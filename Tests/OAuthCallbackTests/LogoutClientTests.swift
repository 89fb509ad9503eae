import Testing
@testable import OAuthCallback

/// RP-initiated logout's `client_id` (`SessionLayer.logoutClient`): the configured client the
/// kept id_token was issued to, so that the provider accepts the `id_token_hint` beside it.
@Suite struct LogoutClientTests {
    static let provider: ProviderSettings = {
        var p = ProviderSettings(name: "corp", kind: .oidc)
        p.appClient = ClientCredentials(clientID: "corp-web", clientSecret: Secret("s"))
        p.native = ["ios": NativeClient(clientID: "corp-ios", redirectURI: "com.example.app:/corp")]
        return p
    }()

    /// An unsigned token with these claims: `logoutClient` only chooses among configured clients.
    static func token(_ claims: String) -> String {
        Base64URL.encode(Array(#"{"alg":"RS256"}"#.utf8)) + "." + Base64URL.encode(Array(claims.utf8)) + ".c2ln"
    }

    @Test func aNativeSignInsTokenNamesTheNativeClient() {
        #expect(SessionLayer.logoutClient(Self.provider, idToken: Self.token(#"{"aud":"corp-ios"}"#)) == "corp-ios")
        #expect(SessionLayer.logoutClient(Self.provider, idToken: Self.token(#"{"aud":["x","corp-ios"]}"#)) == "corp-ios")
        #expect(SessionLayer.logoutClient(Self.provider, idToken: Self.token(#"{"aud":["x","corp-web"],"azp":"corp-ios"}"#)) == "corp-ios")
    }

    @Test func aWebSignInsTokenNamesTheWebClient() {
        #expect(SessionLayer.logoutClient(Self.provider, idToken: Self.token(#"{"aud":"corp-web"}"#)) == "corp-web")
    }

    @Test func withoutAHintOrAConfiguredAudienceTheWebClientIsNamed() {
        #expect(SessionLayer.logoutClient(Self.provider, idToken: nil) == "corp-web")
        #expect(SessionLayer.logoutClient(Self.provider, idToken: Self.token(#"{"aud":"someone-else"}"#)) == "corp-web")
        #expect(SessionLayer.logoutClient(Self.provider, idToken: "not.a.token") == "corp-web")
    }
}
