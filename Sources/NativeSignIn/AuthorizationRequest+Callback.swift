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
        switch outcome(of: result) {
        case .code(let code):
            fields.append(QueryString.Field(name: "code", value: code))
            fields.append(QueryString.Field(name: "state", value: state))
            if let codeVerifier { fields.append(QueryString.Field(name: "code_verifier", value: codeVerifier)) }
        case .error(let error):
            fields.append(QueryString.Field(name: "state", value: state))
            fields.append(QueryString.Field(name: "error", value: error))
        }
        var callback = URLComponents()
        callback.scheme = scheme
        callback.percentEncodedHost = host
        callback.port = initial.port
        callback.path = callbackPath
        callback.percentEncodedQuery = QueryString.encode(fields)
        return callback.url!
    }

    enum Outcome: Equatable {
        case code(String)
        case error(String)
    }

    func outcome(of result: BrowserResult) -> Outcome {
        let redirect: URL
        switch result {
        case .cancelled: return .error(CallbackError.cancelled)
        case .failed: return .error(CallbackError.signInFailed)
        case .redirect(let url): redirect = url
        }
        guard let parts = URLComponents(url: redirect, resolvingAgainstBaseURL: false), isOurRedirect(parts) else {
            return .error(CallbackError.invalidResponse)
        }
        var values: [String: String] = [:]
        for field in QueryString.fields(parts.percentEncodedQuery) where ["code", "state", "error"].contains(field.name) {
            guard values[field.name] == nil, let value = field.value else { return .error(CallbackError.invalidResponse) }
            values[field.name] = value
        }
        if let error = values["error"] {
            if let returned = values["state"], returned != state { return .error(CallbackError.stateMismatch) }
            return .error(Self.isPlainOAuthWord(error) ? error : CallbackError.signInFailed)
        }
        guard let code = values["code"], !code.isEmpty else { return .error(CallbackError.invalidResponse) }
        guard values["state"] == state else { return .error(CallbackError.stateMismatch) }
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
