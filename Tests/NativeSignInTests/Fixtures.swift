import Foundation
@testable import NativeSignIn

/// The native clients the tests sign in with, and helpers to look inside the URLs built.
enum Fixtures {
    static let googleClientID = "123-ios.apps.googleusercontent.com"
    static let googleReversed = "com.googleusercontent.apps.123-ios"
    static let google = try! Provider.google(clientID: googleClientID, reversedClientID: googleReversed)
    static let facebook = try! Provider.facebook(appID: "4242")
    static let corp = try! Provider.oidc(name: "corp", authorizationEndpoint: URL(string: "https://login.example.com:8443/realms/corp/auth")!,
                                         clientID: "corp-ios", redirectURI: "com.example.app:/oauth2redirect")
    static let interceptor = SignInInterceptor(providers: [google, facebook, corp], platform: .ios)

    /// The request `decide` builds for a main-frame navigation to `url`, or nil.
    static func request(_ url: String, _ interceptor: SignInInterceptor = interceptor) -> AuthorizationRequest? {
        if case .startNativeSignIn(let request) = interceptor.decide(Navigation(url: URL(string: url)!, target: .mainFrame)) {
            return request
        }
        return nil
    }

    /// The query of `url` as (name, raw value) pairs, in order, still percent-encoded.
    static func rawFields(_ url: URL) -> [(String, String)] {
        (URLComponents(url: url, resolvingAgainstBaseURL: false)?.percentEncodedQuery ?? "")
            .split(separator: "&").map { pair in
                let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                return (String(parts[0]), parts.count > 1 ? String(parts[1]) : "")
            }
    }

    /// The query of `url` decoded, as a dictionary (tests check for duplicates separately).
    static func fields(_ url: URL) -> [String: String] {
        Dictionary(rawFields(url).map { ($0.0, $0.1.removingPercentEncoding!) }, uniquingKeysWith: { first, _ in first })
    }
}
