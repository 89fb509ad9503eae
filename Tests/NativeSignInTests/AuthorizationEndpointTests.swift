import Foundation
import Testing
@testable import NativeSignIn

@Suite struct AuthorizationEndpointTests {
    struct Case: CustomTestStringConvertible, Sendable {
        let url: String
        let provider: String?
        var testDescription: String { url }
    }

    static let recognised: [Case] = [
        Case(url: "https://accounts.google.com/o/oauth2/v2/auth?client_id=web&state=s", provider: "google"),
        Case(url: "https://accounts.google.com/o/oauth2/auth?state=s", provider: "google"),
        Case(url: "https://ACCOUNTS.google.com/o/oauth2/v2/auth?state=s", provider: "google"),
        Case(url: "https://accounts.google.com:443/o/oauth2/v2/auth?state=s", provider: "google"),
        Case(url: "https://www.facebook.com/v26.0/dialog/oauth?state=s", provider: "facebook"),
        Case(url: "https://www.facebook.com/dialog/oauth?state=s", provider: "facebook"),
        Case(url: "https://m.facebook.com/v19.0/dialog/oauth?state=s", provider: "facebook"),
        Case(url: "https://login.example.com:8443/realms/corp/auth?state=s", provider: "corp"),
    ]

    static let notRecognised: [Case] = [
        // look-alike hosts and userinfo tricks
        Case(url: "https://accounts.google.com.evil.test/o/oauth2/v2/auth?state=s", provider: nil),
        Case(url: "https://evil.test/accounts.google.com/o/oauth2/v2/auth?state=s", provider: nil),
        Case(url: "https://accounts.google.com@evil.test/o/oauth2/v2/auth?state=s", provider: nil),
        Case(url: "https://user:pw@accounts.google.com/o/oauth2/v2/auth?state=s", provider: nil),
        Case(url: "https://evil.test/?next=https://accounts.google.com/o/oauth2/v2/auth", provider: nil),
        Case(url: "https://xaccounts.google.com/o/oauth2/v2/auth?state=s", provider: nil),
        Case(url: "https://www.facebook.com.evil.test/dialog/oauth?state=s", provider: nil),
        // wrong scheme, port, path
        Case(url: "http://accounts.google.com/o/oauth2/v2/auth?state=s", provider: nil),
        Case(url: "https://accounts.google.com:8443/o/oauth2/v2/auth?state=s", provider: nil),
        Case(url: "https://accounts.google.com/o/oauth2/v2/auth/extra?state=s", provider: nil),
        Case(url: "https://accounts.google.com/o/oauth2/v2/authx?state=s", provider: nil),
        Case(url: "https://accounts.google.com/signin?state=s", provider: nil),
        Case(url: "https://accounts.google.com/gsi/iframe/select", provider: nil),
        Case(url: "https://www.facebook.com/vX.0/dialog/oauth?state=s", provider: nil),
        Case(url: "https://www.facebook.com/v26/dialog/oauth?state=s", provider: nil),
        Case(url: "https://www.facebook.com/v26.0/extra/dialog/oauth?state=s", provider: nil),
        Case(url: "https://facebook.com/dialog/oauth?state=s", provider: nil),
        Case(url: "https://login.example.com/realms/corp/auth?state=s", provider: nil),
        Case(url: "https://appleid.apple.com/auth/authorize/?state=s", provider: nil),
        // Apple is never intercepted: its web sign-in runs in the WebView
        Case(url: "https://appleid.apple.com/auth/authorize?state=s", provider: nil),
    ]

    @Test(arguments: recognised + notRecognised)
    func mainFrameNavigationIsInterceptedOnlyForTheProvidersOwnEndpoint(_ c: Case) {
        #expect(Fixtures.request(c.url)?.provider == c.provider)
    }

    @Test func aPopupToTheEndpointIsInterceptedLikeTheMainFrame() {
        let url = URL(string: "https://accounts.google.com/o/oauth2/v2/auth?state=s")!
        guard case .startNativeSignIn(let request) = Fixtures.interceptor.decide(Navigation(url: url, target: .popup)) else {
            Issue.record("a window.open / target=_blank popup to Google was not intercepted")
            return
        }
        #expect(request.provider == "google")
    }

    @Test(arguments: recognised)
    func aSubframeLoadIsNeverIntercepted(_ c: Case) {
        let navigation = Navigation(url: URL(string: c.url)!, target: .subframe)
        #expect(Fixtures.interceptor.decide(navigation) == .allow)
    }

    @Test func anInterceptorWithoutTheProviderLetsItsURLThrough() {
        let onlyFacebook = SignInInterceptor(providers: [Fixtures.facebook], platform: .ios)
        #expect(Fixtures.request("https://accounts.google.com/o/oauth2/v2/auth?state=s", onlyFacebook) == nil)
    }

    @Test(arguments: ["http://login.example.com/auth", "ftp://login.example.com/auth", "https://u@login.example.com/auth"])
    func anOIDCEndpointMustBeAnHTTPSURLWithAHost(_ url: String) {
        #expect(throws: NativeSignInError.self) {
            try AuthorizationEndpoint(URL(string: url)!)
        }
    }

    @Test func anOIDCEndpointOnTheDefaultPortMatchesWithOrWithoutThePort() throws {
        let endpoint = try AuthorizationEndpoint(URL(string: "https://login.example.com:443/auth")!)
        #expect(endpoint.matches(URL(string: "https://login.example.com/auth")!))
        #expect(endpoint.matches(URL(string: "https://login.example.com:443/auth?x=1")!))
    }
}
