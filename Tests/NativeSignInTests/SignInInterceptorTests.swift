import Foundation
import Testing
@testable import NativeSignIn

@Suite struct SignInInterceptorTests {
    /// A site's Google URL with every parameter a site might set, plus some that must not pass.
    static let siteURL = "https://accounts.google.com/o/oauth2/v2/auth"
        + "?client_id=web-client.apps.googleusercontent.com"
        + "&redirect_uri=https%3A%2F%2Fsite.example%2Fusers%2Fauth%2Fgoogle_oauth2%2Fcallback"
        + "&response_type=token&scope=openid+email%20profile&state=st%26te%3D1"
        + "&access_type=offline&prompt=consent&login_hint=a%2Bb%40example.test"
        + "&include_granted_scopes=true&nonce=n-1&hd=example.test"
        + "&code_challenge=web-challenge&code_challenge_method=plain"
        + "&response_mode=form_post&request_uri=https%3A%2F%2Fevil.test%2Fr&claims=%7B%7D&client_secret=x"
        + "#fragment"

    static let dropped = ["response_mode", "request_uri", "claims", "client_secret"]

    @Test func theNativeClientReplacesTheWebClient() throws {
        let request = try #require(Fixtures.request(Self.siteURL))
        let fields = Fixtures.fields(request.url)
        #expect(fields["client_id"] == Fixtures.googleClientID)
        #expect(fields["redirect_uri"] == "com.googleusercontent.apps.123-ios:/oauth2redirect")
        #expect(fields["response_type"] == "code")
        #expect(request.clientID == Fixtures.googleClientID)
        #expect(request.redirectURI == "com.googleusercontent.apps.123-ios:/oauth2redirect")
        #expect(request.callbackScheme == "com.googleusercontent.apps.123-ios")
        #expect(request.platform == .ios)
    }

    @Test func scopeStateAndEveryAllowlistedParameterAreKeptDecoded() throws {
        let fields = Fixtures.fields(try #require(Fixtures.request(Self.siteURL)).url)
        #expect(fields["scope"] == "openid email profile")      // `+` is a space in a form-encoded query
        #expect(fields["state"] == "st&te=1")
        #expect(fields["access_type"] == "offline")
        #expect(fields["prompt"] == "consent")
        #expect(fields["login_hint"] == "a+b@example.test")
        #expect(fields["include_granted_scopes"] == "true")
        #expect(fields["nonce"] == "n-1")
        #expect(fields["hd"] == "example.test")
    }

    @Test func everyOtherParameterIsDropped() throws {
        let request = try #require(Fixtures.request(Self.siteURL))
        let names = Fixtures.rawFields(request.url).map(\.0)
        #expect(names == ["client_id", "redirect_uri", "response_type", "scope", "state", "access_type", "prompt",
                          "login_hint", "include_granted_scopes", "nonce", "hd", "code_challenge", "code_challenge_method"])
        for name in Self.dropped { #expect(!names.contains(name), "\(name) reached the native request") }
        let fields = Fixtures.fields(request.url)
        #expect(fields["code_challenge"] != "web-challenge")
        #expect(fields["code_challenge_method"] == "S256")
        #expect(request.url.fragment == nil)
        #expect(request.url.host == "accounts.google.com" && request.url.path == "/o/oauth2/v2/auth")
    }

    @Test func theChallengeSentIsTheS256OfTheVerifierKept() throws {
        let request = try #require(Fixtures.request(Self.siteURL))
        let verifier = try #require(request.codeVerifier)
        #expect(Fixtures.fields(request.url)["code_challenge"] == (try PKCE(verifier: verifier)).challenge)
        #expect(request.state == "st&te=1")
    }

    @Test func eachSignInGetsItsOwnVerifier() throws {
        let first = try #require(Fixtures.request(Self.siteURL)).codeVerifier
        let second = try #require(Fixtures.request(Self.siteURL)).codeVerifier
        #expect(first != second)
    }

    @Test func aProviderWithoutPKCEGetsNoChallengeAndKeepsNoVerifier() throws {
        let request = try #require(Fixtures.request("https://www.facebook.com/v26.0/dialog/oauth?client_id=1&state=s&scope=email"
                                                    + "&code_challenge=web&code_challenge_method=S256"))
        let fields = Fixtures.fields(request.url)
        #expect(request.codeVerifier == nil)
        #expect(fields["code_challenge"] == nil && fields["code_challenge_method"] == nil)
        #expect(fields["client_id"] == "4242")
        #expect(fields["redirect_uri"] == "fb4242://authorize")
        #expect(request.url.path == "/v26.0/dialog/oauth")
    }

    @Test func theOIDCEndpointKeepsItsPortAndPath() throws {
        let request = try #require(Fixtures.request("https://login.example.com:8443/realms/corp/auth?state=s"))
        #expect(request.url.port == 8443 && request.url.path == "/realms/corp/auth")
        #expect(Fixtures.fields(request.url)["client_id"] == "corp-ios")
    }

    @Test func theInterceptorsPlatformIsTheRequests() throws {
        let android = SignInInterceptor(providers: [Fixtures.google], platform: .android)
        #expect(try #require(Fixtures.request(Self.siteURL, android)).platform == .android)
    }

    struct Refusal: CustomTestStringConvertible, Sendable {
        let query: String
        let key: String
        var testDescription: String { query }
    }

    @Test(arguments: [
        Refusal(query: "client_id=web&scope=openid", key: "state"),
        Refusal(query: "state=&scope=openid", key: "state"),
        Refusal(query: "state", key: "state"),
        Refusal(query: "state=a&state=b", key: "state"),
        Refusal(query: "state=s&scope=a&scope=b", key: "scope"),
        Refusal(query: "state=" + String(repeating: "x", count: 1025), key: "state"),
        Refusal(query: "state=tab%09inside", key: "state"),
        Refusal(query: "state=caf%C3%A9", key: "state"),
        Refusal(query: "state=s&nonce=%FF", key: "nonce"),
    ])
    func anAuthorizationURLThatCannotBeSignedInSafelyIsRefused(_ c: Refusal) {
        let url = URL(string: "https://accounts.google.com/o/oauth2/v2/auth?" + c.query)!
        guard case .refuse(let error) = Fixtures.interceptor.decide(Navigation(url: url, target: .mainFrame)) else {
            Issue.record("not refused: \(c.query)")
            return
        }
        #expect(error.kind == .navigation)
        #expect(error.key == c.key)
    }

    @Test func aDroppedParameterTwiceOrMalformedDoesNotMatter() throws {
        let request = try #require(Fixtures.request(
            "https://accounts.google.com/o/oauth2/v2/auth?state=s&client_id=a&client_id=b&foo=%FF"))
        #expect(request.state == "s")
    }

    @Test func theCallbackPathIsAlwaysAbsolute() {
        #expect(SignInInterceptor(providers: [], platform: .ios, callbackPath: "cb").callbackPath == "/cb")
    }
}
