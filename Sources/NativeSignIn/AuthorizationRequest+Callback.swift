import Foundation

/// Building the `/_oauth_callback` URL the WebView loads when the browser returns
/// (the contract: docs/reference.md, endpoint `/_oauth_callback`).
extension AuthorizationRequest {
    /// The `error=` values this library produces itself. The proxy passes the OAuth ones
    /// (`access_denied`) to the site's callback as they are and every other word as
    /// `sign_in_failed`; ours are distinct so that the proxy's log tells the causes apart
    /// (it names them: `CallbackParameters.ProviderError.wrapperCodes`).
    public enum CallbackError {
        /// The user closed the browser (RFC 6749's word for "the user said no").
        public static let cancelled = "access_denied"
        /// The redirect's state is not the one sent: the response belongs to another request.
        public static let stateMismatch = "state_mismatch"
        /// A redirect with neither code nor error, a parameter twice, a foreign redirect.
        public static let invalidResponse = "invalid_response"
        /// The browser session failed, or the provider's error was not a plain OAuth word.
        public static let signInFailed = "sign_in_failed"
    }

    /// `<origin of initialURL><callbackPath>?provider=…&platform=…&client_id=…&redirect_uri=…`
    /// then `&code=…&state=…[&code_verifier=…]` on success or `&state=…&error=…` (no code).
    ///
    /// Only the origin of `initialURL` is used: the proxy serves `oauth.callback_path` at the
    /// root of the site's host, so `https://example.com/app/?utm=x` gives
    /// `https://example.com/_oauth_callback?…` — appending to the path or query would produce
    /// a URL the proxy does not own.
    ///
    /// Every value is percent-encoded, leaving only RFC 3986's unreserved characters as they
    /// are. A code is handed back only when the redirect's `state` equals the one sent; a
    /// provider error without a state is passed on (an error signs nobody in, and providers
    /// differ in echoing state on errors), one with a different state is `state_mismatch`.
    public func callbackURL(initialURL: URL, result: BrowserResult) throws -> URL {
        try callbackURL(initialURL: initialURL, outcome: outcome(of: result))
    }

    func callbackURL(initialURL: URL, outcome: Outcome) throws -> URL {
        guard let initial = URLComponents(url: initialURL, resolvingAgainstBaseURL: false),
              let scheme = initial.scheme?.lowercased(), scheme == "https" || scheme == "http",
              let host = initial.percentEncodedHost, !host.isEmpty else {
            throw NativeSignInError(.initialURL, key: "initialURL",
                                    "the callback needs an http(s) URL with a host: \(initialURL.absoluteString)")
        }
        var fields = [QueryString.Field(name: "provider", value: provider),
                      QueryString.Field(name: "platform", value: platform.rawValue),
                      QueryString.Field(name: "client_id", value: clientID),
                      QueryString.Field(name: "redirect_uri", value: redirectURI)]
        switch outcome {
        case .code(let code):
            fields.append(QueryString.Field(name: "code", value: code))
            fields.append(QueryString.Field(name: "state", value: state))
            if let codeVerifier { fields.append(QueryString.Field(name: "code_verifier", value: codeVerifier)) }
        case let failure:
            fields.append(QueryString.Field(name: "state", value: state))
            fields.append(QueryString.Field(name: "error", value: failure.errorWord!))
        }
        var callback = URLComponents()
        callback.scheme = scheme
        callback.percentEncodedHost = host
        callback.port = initial.port
        callback.path = callbackPath
        callback.percentEncodedQuery = QueryString.encode(fields)
        return callback.url!
    }

    /// What a browser result means for this request, before it is written into a callback.
    enum Outcome: Equatable {
        case code(String)
        /// The browser reported that the user closed it.
        case cancelled
        /// The browser session failed.
        case browserFailed
        /// Not our redirect, neither code nor error, a parameter twice.
        case invalidResponse
        case stateMismatch
        /// The provider's `error=`, already reduced to a plain OAuth word or `sign_in_failed`.
        case providerError(String)

        /// The `error=` value of the callback; nil for a code.
        var errorWord: String? {
            switch self {
            case .code: return nil
            case .cancelled: return CallbackError.cancelled
            case .browserFailed: return CallbackError.signInFailed
            case .invalidResponse: return CallbackError.invalidResponse
            case .stateMismatch: return CallbackError.stateMismatch
            case .providerError(let word): return word
            }
        }
    }

    func outcome(of result: BrowserResult) -> Outcome {
        switch result {
        case .cancelled: return .cancelled
        case .failed: return .browserFailed
        case .redirect(let url):
            guard let parts = URLComponents(url: url, resolvingAgainstBaseURL: false), isOurRedirect(parts) else {
                return .invalidResponse
            }
            return Self.outcome(ofRedirectQuery: parts.percentEncodedQuery, state: state)
        }
    }

    /// The redirect's query read against the state sent. Any parameter given twice — even one
    /// this library ignores (`authuser=0&authuser=1`) — makes the whole response invalid: which
    /// copy a reader takes differs between stacks, and a response that parses two ways is not
    /// one to hand a code from.
    static func outcome(ofRedirectQuery query: String?, state: String) -> Outcome {
        var values: [String: String] = [:]
        var names: Set<String> = []
        for field in QueryString.fields(query) {
            guard names.insert(field.name).inserted else { return .invalidResponse }
            guard ["code", "state", "error"].contains(field.name) else { continue }
            guard let value = field.value else { return .invalidResponse }
            values[field.name] = value
        }
        if let error = values["error"] {
            if let returned = values["state"], returned != state { return .stateMismatch }
            return .providerError(isPlainOAuthWord(error) ? error : CallbackError.signInFailed)
        }
        guard let code = values["code"], !code.isEmpty else { return .invalidResponse }
        guard values["state"] == state else { return .stateMismatch }
        return .code(code)
    }

    /// Scheme, host and path of the redirect are those of `redirectURI` (the browser session
    /// matches on the scheme only).
    private func isOurRedirect(_ parts: URLComponents) -> Bool {
        guard let sent = URLComponents(string: redirectURI) else { return false }
        return parts.scheme?.lowercased() == sent.scheme?.lowercased()
            && parts.percentEncodedHost?.lowercased() == sent.percentEncodedHost?.lowercased()
            && parts.percentEncodedPath == sent.percentEncodedPath
    }

    /// RFC 6749's error codes are lower-case words joined by `_`. Anything else (free text, a
    /// script, a URL) is not passed to the site, whose failure page may show it.
    static func isPlainOAuthWord(_ error: String) -> Bool {
        (1...64).contains(error.utf8.count) && error.utf8.allSatisfy {
            (UInt8(ascii: "a")...UInt8(ascii: "z")).contains($0) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0)
                || $0 == UInt8(ascii: "_")
        }
    }
}
