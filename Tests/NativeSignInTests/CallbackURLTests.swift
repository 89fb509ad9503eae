import Foundation
import Testing
@testable import NativeSignIn

@Suite struct CallbackURLTests {
    static let initial = URL(string: "https://site.example")!

    static func google(state: String) throws -> AuthorizationRequest {
        try #require(Fixtures.request("https://accounts.google.com/o/oauth2/v2/auth?state=" + QueryString.escape(state)))
    }

    static func redirect(_ query: String) -> BrowserResult {
        .redirect(URL(string: "com.googleusercontent.apps.123-ios:/oauth2redirect?" + query)!)
    }

    @Test func aCodeIsHandedBackWithStateAndVerifierInTheContractsOrder() throws {
        let request = try Self.google(state: "s1")
        let url = try request.callbackURL(initialURL: Self.initial, result: Self.redirect("state=s1&code=4%2F0Ab-c&scope=email"))
        #expect(url.absoluteString.hasPrefix("https://site.example/_oauth_callback?"))
        let raw = Fixtures.rawFields(url)
        #expect(raw.map(\.0) == ["provider", "platform", "client_id", "redirect_uri", "code", "state", "code_verifier"])
        let fields = Fixtures.fields(url)
        #expect(fields["provider"] == "google")
        #expect(fields["platform"] == "ios")
        #expect(fields["client_id"] == Fixtures.googleClientID)
        #expect(fields["redirect_uri"] == "com.googleusercontent.apps.123-ios:/oauth2redirect")
        #expect(fields["code"] == "4/0Ab-c")
        #expect(fields["state"] == "s1")
        #expect(fields["code_verifier"] == request.codeVerifier)
    }

    @Test func everyValueIsPercentEncodedLeavingOnlyUnreservedCharacters() throws {
        let request = try Self.google(state: "a b&c=d/e?f+g%h#i~j")
        let url = try request.callbackURL(initialURL: Self.initial,
                                          result: Self.redirect("state=a%20b%26c%3Dd%2Fe%3Ff%2Bg%25h%23i~j&code=x%2By%2Fz%3D%3D"))
        let raw = Dictionary(uniqueKeysWithValues: Fixtures.rawFields(url))
        #expect(raw["redirect_uri"] == "com.googleusercontent.apps.123-ios%3A%2Foauth2redirect")
        #expect(raw["state"] == "a%20b%26c%3Dd%2Fe%3Ff%2Bg%25h%23i~j")
        #expect(raw["code"] == "x%2By%2Fz%3D%3D")
        let unreservedOrEscape = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~%")
        for (name, value) in raw { #expect(value.allSatisfy(unreservedOrEscape.contains), "\(name)=\(value)") }
    }

    @Test func aProviderWithoutPKCESendsNoVerifier() throws {
        let request = try #require(Fixtures.request("https://www.facebook.com/dialog/oauth?state=s"))
        let url = try request.callbackURL(initialURL: Self.initial,
                                          result: .redirect(URL(string: "fb4242://authorize?code=c&state=s#_=_")!))
        #expect(Fixtures.rawFields(url).map(\.0) == ["provider", "platform", "client_id", "redirect_uri", "code", "state"])
        #expect(Fixtures.fields(url)["redirect_uri"] == "fb4242://authorize")
    }

    struct Failure: CustomTestStringConvertible, Sendable {
        let result: BrowserResult
        let error: String
        var testDescription: String { "\(result) → \(error)" }
    }

    @Test(arguments: [
        Failure(result: .cancelled, error: "access_denied"),
        Failure(result: .failed, error: "sign_in_failed"),
        Failure(result: redirect("error=access_denied&state=s1"), error: "access_denied"),
        Failure(result: redirect("error=temporarily_unavailable"), error: "temporarily_unavailable"),
        Failure(result: redirect("error=access_denied&state=other"), error: "state_mismatch"),
        Failure(result: redirect("error=%3Cscript%3E&state=s1"), error: "sign_in_failed"),
        Failure(result: redirect("error=Access+Denied&state=s1"), error: "sign_in_failed"),
        Failure(result: redirect("error=" + String(repeating: "a", count: 65)), error: "sign_in_failed"),
        Failure(result: redirect("error=access_denied&code=c&state=s1"), error: "access_denied"),
        Failure(result: redirect("code=c&state=other"), error: "state_mismatch"),
        Failure(result: redirect("code=c"), error: "state_mismatch"),
        Failure(result: redirect("code=c&state=s1&state=s1"), error: "invalid_response"),
        Failure(result: redirect("code=c&code=d&state=s1"), error: "invalid_response"),
        Failure(result: redirect("state=s1"), error: "invalid_response"),
        // any parameter twice, even one the library does not read
        Failure(result: redirect("code=c&state=s1&authuser=0&authuser=1"), error: "invalid_response"),
        Failure(result: redirect("authuser=0&code=c&authuser=0&state=s1"), error: "invalid_response"),
        Failure(result: redirect("code=&state=s1"), error: "invalid_response"),
        Failure(result: .redirect(URL(string: "com.googleusercontent.apps.123-ios:/elsewhere?code=c&state=s1")!), error: "invalid_response"),
        Failure(result: .redirect(URL(string: "com.other.app:/oauth2redirect?code=c&state=s1")!), error: "invalid_response"),
    ])
    func aFailureCarriesStateAndErrorButNeverACode(_ c: Failure) throws {
        let request = try Self.google(state: "s1")
        let url = try request.callbackURL(initialURL: Self.initial, result: c.result)
        #expect(Fixtures.rawFields(url).map(\.0) == ["provider", "platform", "client_id", "redirect_uri", "state", "error"])
        let fields = Fixtures.fields(url)
        #expect(fields["error"] == c.error)
        #expect(fields["state"] == "s1")        // the state sent, never the one returned
        #expect(fields["code"] == nil && fields["code_verifier"] == nil)
    }

    @Test(arguments: [
        ("https://site.example/app/?utm=x#top", "https://site.example/_oauth_callback?"),
        ("https://site.example/", "https://site.example/_oauth_callback?"),
        ("http://127.0.0.1:8080", "http://127.0.0.1:8080/_oauth_callback?"),
        ("HTTPS://Site.Example:8443/a/b", "https://Site.Example:8443/_oauth_callback?"),
        ("https://user:pw@site.example/", "https://site.example/_oauth_callback?"),
    ])
    func theCallbackGoesToTheOriginsCallbackPath(_ initial: String, _ prefix: String) throws {
        let request = try Self.google(state: "s1")
        let url = try request.callbackURL(initialURL: URL(string: initial)!, result: .cancelled)
        #expect(url.absoluteString.hasPrefix(prefix), "\(url.absoluteString)")
    }

    @Test func theConfiguredCallbackPathIsUsed() throws {
        let interceptor = SignInInterceptor(providers: [Fixtures.google], platform: .android, callbackPath: "/native/cb")
        let request = try #require(Fixtures.request("https://accounts.google.com/o/oauth2/auth?state=s", interceptor))
        let url = try request.callbackURL(initialURL: Self.initial, result: .cancelled)
        #expect(url.absoluteString.hasPrefix("https://site.example/native/cb?provider=google&platform=android&"))
    }

    @Test(arguments: ["file:///index.html", "about:blank", "com.example.app:/x"])
    func anInitialURLThatIsNotAnHTTPOriginIsAnError(_ initial: String) throws {
        let request = try Self.google(state: "s1")
        #expect(throws: NativeSignInError.self) {
            try request.callbackURL(initialURL: URL(string: initial)!, result: .cancelled)
        }
    }
}
