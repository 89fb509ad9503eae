import Foundation

/// The site's own provider callback (the `redirect_uri` of its authorization URL), where a
/// hand-back sign-in returns. It must be on the origin of the WebView's site: the app claims
/// that domain's links, and the site's session cookie (which checks `state`) is there.
struct SiteCallback: Equatable {
    struct Origin: Equatable {
        let scheme: String
        let host: String
        let port: Int?
    }

    let origin: Origin
    /// Percent-encoded, as the provider will send it back.
    let path: String
    var host: String { origin.host }

    /// Scheme and host lower-cased, the scheme's default port as nil; nil for anything but an
    /// http(s) URL with a host and no user info.
    static func origin(of url: URL) -> Origin? {
        guard let parts = URLComponents(url: url, resolvingAgainstBaseURL: false) else { return nil }
        return origin(of: parts)
    }

    static func origin(of parts: URLComponents) -> Origin? {
        guard let scheme = parts.scheme?.lowercased(), scheme == "https" || scheme == "http",
              let host = parts.percentEncodedHost?.lowercased(), !host.isEmpty,
              parts.percentEncodedUser == nil else { return nil }
        let defaultPort = scheme == "https" ? 443 : 80
        return Origin(scheme: scheme, host: host, port: parts.port == defaultPort ? nil : parts.port)
    }

    /// `linkPaths`: when the result can only come back as a universal link, the callback's
    /// path must be one the app claims, or the sign-in could never return.
    init(siteURL: URL, initialURL: URL, linkPaths: Set<String>?) throws(NativeSignInError) {
        let query = URLComponents(url: siteURL, resolvingAgainstBaseURL: false)?.percentEncodedQuery
        let redirects = QueryString.fields(query).filter { $0.name == "redirect_uri" }
        guard redirects.count == 1, let text = redirects[0].value, let parts = URLComponents(string: text),
              let origin = Self.origin(of: parts), origin == Self.origin(of: initialURL), !parts.percentEncodedPath.isEmpty else {
            throw NativeSignInError(.navigation, key: "redirect_uri",
                                    "a hand-back sign-in needs one redirect_uri on the site's own origin "
                                    + "(\(initialURL.absoluteString)); the provider's answer could not come back")
        }
        if let linkPaths, !linkPaths.contains(parts.percentEncodedPath) {
            throw NativeSignInError(.configuration, key: "linkPaths",
                                    "the site's callback \(parts.percentEncodedPath) is not among the app's link paths; "
                                    + "the universal link / App Link back would not reach the app")
        }
        self.origin = origin
        self.path = parts.percentEncodedPath
    }

    /// Whether a redirect the browser caught is this callback (the session matches on host and
    /// path, but a caller may hand in anything).
    func isRedirect(_ parts: URLComponents) -> Bool {
        Self.origin(of: parts) == origin && parts.percentEncodedPath == path
    }

    /// The callback with the sent state and an error word: the site's own failure path.
    func url(state: String, error: String) -> URL {
        var parts = URLComponents()
        parts.scheme = origin.scheme
        parts.percentEncodedHost = origin.host
        parts.port = origin.port
        parts.percentEncodedPath = path
        parts.percentEncodedQuery = QueryString.encode([QueryString.Field(name: "error", value: error),
                                                        QueryString.Field(name: "state", value: state)])
        return parts.url!
    }

    /// A native client whose redirect is an https URL waits for it with `.https(host:path:)`.
    static func httpsCallback(_ redirectURI: String) -> BrowserCallback? {
        guard let parts = URLComponents(string: redirectURI), parts.scheme?.lowercased() == "https",
              let host = parts.percentEncodedHost, !host.isEmpty else { return nil }
        return .https(host: host.lowercased(), path: parts.percentEncodedPath.isEmpty ? "/" : parts.percentEncodedPath)
    }
}
