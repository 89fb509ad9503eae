import Foundation

/// What the WebView should do with a navigation.
public enum NavigationDecision: Sendable, Equatable {
    /// Not a sign-in: let the WebView load it.
    case allow
    /// Cancel the WebView's load and run this request in the system browser.
    case startNativeSignIn(AuthorizationRequest)
    /// A provider's authorization URL that cannot be signed in safely. Cancel the load (the
    /// provider would refuse the WebView anyway) and tell the user; do not sign in.
    case refuse(NativeSignInError)
}

/// The decision core of the wrapper app: recognises the site's authorization URL and builds
/// the native request that replaces it. Pure: no WebView, no browser, no clock — the platform
/// adapter (through `SignInFlow`) only asks. The Android core's `SignInInterceptor` is its Kotlin twin.
public struct SignInInterceptor: Sendable {
    public let providers: [Provider]
    public let platform: Platform
    /// The proxy's `oauth.callback_path`.
    public let callbackPath: String
    /// Makes the PKCE pair of each request. Always `PKCE.generate` in an app; a test injects a
    /// fixed verifier (the contract vectors' RFC 7636 pair) so that the URLs built are exact.
    let pkce: @Sendable () -> PKCE

    /// Parameters of the site's URL carried into the native request. `scope` and `state` are
    /// the sign-in the site asked for; the others are standard hints a site may set and the
    /// provider honours for any client.
    public static let keptParameters = ["scope", "state"]
    public static let allowlistedParameters = ["access_type", "prompt", "login_hint",
                                               "include_granted_scopes", "nonce", "hd"]
    /// RFC 6749 A.5: state is 1*VSCHAR; the proxy takes at most 1024 bytes of it.
    static let stateLengths = 1...1024

    public init(providers: [Provider], platform: Platform, callbackPath: String = "/_oauth_callback") {
        self.init(providers: providers, platform: platform, callbackPath: callbackPath, pkce: { PKCE.generate() })
    }

    /// Internal: a fresh verifier per sign-in is what keeps one intercepted code from being
    /// redeemed by anyone else, so no app gets to choose it.
    init(providers: [Provider], platform: Platform, callbackPath: String = "/_oauth_callback",
         pkce: @escaping @Sendable () -> PKCE) {
        self.providers = providers
        self.platform = platform
        self.callbackPath = callbackPath.hasPrefix("/") ? callbackPath : "/" + callbackPath
        self.pkce = pkce
    }

    /// Everything else in the site's URL is dropped: the outbound URL is only a trigger. The
    /// web client's `client_id`, `redirect_uri` and PKCE challenge mean nothing to the native
    /// client (the site keeps the web verifier; the native exchange needs ours), and any other
    /// parameter passed along would let the site steer the native client — `response_type`,
    /// `response_mode`, `request`/`request_uri`, `redirect_uri` in disguise, `claims` — in
    /// ways its registration never agreed to.
    ///
    /// A provider URL without `state` is refused rather than signed in: `/_oauth_callback`
    /// requires `state`, and the site's callback is the one that checks it against the
    /// browser's session (login-CSRF protection). A sign-in without one would either be
    /// refused at the proxy after the user went through the provider, or — if invented here —
    /// arrive with a state the site never issued. The same holds for a `state` the proxy cannot
    /// carry (longer than 1024 bytes, not visible ASCII) and for a parameter we keep that
    /// appears twice (which copy a provider reads differs between stacks).
    public func decide(_ navigation: Navigation) -> NavigationDecision {
        decide(navigation, query: URLComponents(url: navigation.url, resolvingAgainstBaseURL: false)?.percentEncodedQuery)
    }

    /// Internal: the decision on `query` as written. A WebView hands over a malformed escape
    /// (`state=a%ZZb`) as is, but Foundation on Linux cannot hold one in a `URL` (it re-encodes it
    /// as `%25ZZ`), so the contract vectors reach the decision through here for such cases.
    func decide(_ navigation: Navigation, query raw: String?) -> NavigationDecision {
        guard navigation.target != .subframe,
              let provider = providers.first(where: { $0.endpoint.matches(navigation.url) }) else {
            return .allow
        }
        var carried: [String: String] = [:]
        for field in QueryString.fields(raw)
        where Self.keptParameters.contains(field.name) || Self.allowlistedParameters.contains(field.name) {
            guard carried[field.name] == nil else {
                return .refuse(refusal(field.name, "appears twice in \(provider.name)'s authorization URL"))
            }
            guard let value = field.value else {
                return .refuse(refusal(field.name, "is not valid percent-encoded UTF-8"))
            }
            carried[field.name] = value
        }
        guard let state = carried["state"], !state.isEmpty else {
            return .refuse(refusal("state", "the site's \(provider.name) authorization URL has no state; "
                                   + "a sign-in without one cannot be checked by the site's callback"))
        }
        guard Self.stateLengths.contains(state.utf8.count), state.utf8.allSatisfy({ (0x20...0x7E).contains($0) }) else {
            return .refuse(refusal("state", "is longer than 1024 bytes or not visible ASCII; "
                                   + "/_oauth_callback could not carry it back"))
        }

        let pkce = provider.usesPKCE ? self.pkce() : nil
        var fields = [QueryString.Field(name: "client_id", value: provider.clientID),
                      QueryString.Field(name: "redirect_uri", value: provider.redirectURI),
                      QueryString.Field(name: "response_type", value: "code")]
        for name in Self.keptParameters + Self.allowlistedParameters {
            if let value = carried[name] { fields.append(QueryString.Field(name: name, value: value)) }
        }
        if let pkce {
            fields.append(QueryString.Field(name: "code_challenge", value: pkce.challenge))
            fields.append(QueryString.Field(name: "code_challenge_method", value: PKCE.method))
        }
        var outbound = URLComponents(url: navigation.url, resolvingAgainstBaseURL: false)!
        outbound.fragment = nil
        outbound.percentEncodedQuery = QueryString.encode(fields)
        return .startNativeSignIn(AuthorizationRequest(
            provider: provider.name, platform: platform, clientID: provider.clientID,
            redirectURI: provider.redirectURI, callbackScheme: provider.callbackScheme,
            url: outbound.url!, state: state, codeVerifier: pkce?.verifier, callbackPath: callbackPath))
    }

    private func refusal(_ key: String, _ message: String) -> NativeSignInError {
        NativeSignInError(.navigation, key: key, message)
    }
}
