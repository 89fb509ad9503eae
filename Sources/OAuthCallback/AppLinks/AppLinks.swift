import ProxyCore

/// The two files an app needs on the site's domain so that a universal link (iOS) or an
/// Android App Link opens the app instead of the browser — served by the proxy from
/// `oauth.app_links`, so an unchanged site needs no file deployed on it (seed 000's approach:
/// the system browser hands the sign-in back through an `https://` link the app claims).
///
/// - `/.well-known/apple-app-site-association`: Apple's CDN fetches it from the domain with no
///   redirect allowed, as `application/json`, and caches it; both the iOS 13+ form (`appIDs`,
///   `components`) and the older one (`appID`, `paths`) are written, as Apple's documentation
///   does. The same apps are listed under `webcredentials`: from iOS 17.4 a hand-back sign-in's
///   browser session waits for the site's https callback itself
///   (`ASWebAuthenticationSession.Callback.https`), which requires that service for the host.
/// - `/.well-known/assetlinks.json`: the Digital Asset Links statement Android verifies
///   (`handle_all_urls` for the package, signed with one of the certificate fingerprints).
///
/// Unset, both paths go to the site as any other request (it may serve its own).
public struct AppLinks: Sendable, Equatable {
    public struct Apple: Sendable, Equatable {
        /// `<TEAMID>.<bundle id>` for each app that may open the links.
        public var appIDs: [String]
        /// The paths the apps claim (`*` and `?` wildcards, as Apple's `paths`). The loader's
        /// default: every provider's `app_callback` and the callback path (`defaultPaths`).
        public var paths: [String]
        public init(appIDs: [String], paths: [String]) {
            self.appIDs = appIDs
            self.paths = paths
        }
    }

    public struct Android: Sendable, Equatable {
        public var package: String
        /// SHA-256 fingerprints of the signing certificates, `AB:CD:…` (32 bytes).
        public var fingerprints: [String]
        public init(package: String, fingerprints: [String]) {
            self.package = package
            self.fingerprints = fingerprints
        }
    }

    public var apple: Apple?
    public var android: [Android] = []

    public init(apple: Apple? = nil, android: [Android] = []) {
        self.apple = apple
        self.android = android
    }

    public static let applePath = "/.well-known/apple-app-site-association"
    public static let androidPath = "/.well-known/assetlinks.json"

    public var appleDocument: [UInt8]? {
        guard let apple else { return nil }
        let components: [JSONValue] = apple.paths.map { .object(["/": .string($0)]) }
        let ids: [JSONValue] = apple.appIDs.map { .string($0) }
        var details: [JSONValue] = [.object(["appIDs": .array(ids), "components": .array(components)])]
        for id in apple.appIDs {
            details.append(.object(["appID": .string(id), "paths": .array(apple.paths.map { .string($0) })]))
        }
        return JSONValue.object([
            "applinks": .object(["apps": .array([]), "details": .array(details)]),
            "webcredentials": .object(["apps": .array(ids)]),
        ]).serialized()
    }

    /// The universal-link paths when none are configured: the site's own callbacks (where a
    /// hand-back sign-in returns) and the proxy's callback path with anything after it.
    public static func defaultPaths(appCallbacks: [String], callbackPath: String) -> [String] {
        var paths: [String] = []
        for path in appCallbacks.sorted() + [callbackPath + "*"] where !paths.contains(path) { paths.append(path) }
        return paths
    }

    /// The site callbacks (`provider` → `app_callback`) that none of the claimed paths covers:
    /// a hand-back sign-in returning there would open in Safari instead of the app.
    public func uncoveredCallbacks(_ appCallbacks: [(provider: String, path: String)]) -> [(provider: String, path: String)] {
        guard let apple else { return [] }
        return appCallbacks.filter { callback in !apple.paths.contains { Self.path(callback.path, matches: $0) } }
    }

    /// Apple's path patterns: `*` is any run of characters (none too), `?` exactly one.
    public static func path(_ path: String, matches pattern: String) -> Bool {
        let text = Array(path.utf8), glob = Array(pattern.utf8)
        var t = 0, g = 0
        var star: Int? = nil, resume = 0
        while t < text.count {
            if g < glob.count, glob[g] == UInt8(ascii: "?") || glob[g] == text[t] {
                t += 1; g += 1
            } else if g < glob.count, glob[g] == UInt8(ascii: "*") {
                star = g; resume = t; g += 1
            } else if let s = star {
                g = s + 1; resume += 1; t = resume
            } else {
                return false
            }
        }
        while g < glob.count, glob[g] == UInt8(ascii: "*") { g += 1 }
        return g == glob.count
    }

    public var androidDocument: [UInt8]? {
        guard !android.isEmpty else { return nil }
        return JSONValue.array(android.map { app in
            .object([
                "relation": .array([.string("delegate_permission/common.handle_all_urls")]),
                "target": .object([
                    "namespace": .string("android_app"), "package_name": .string(app.package),
                    "sha256_cert_fingerprints": .array(app.fingerprints.map { .string($0) }),
                ]),
            ])
        }).serialized()
    }

    // MARK: Validation (the loader reports each problem under its key)

    /// Apple's Team ID: ten upper-case letters and digits.
    public static func isTeamID(_ s: Substring) -> Bool {
        s.utf8.count == 10 && s.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x41...0x5A).contains($0) }
    }

    /// A reverse-DNS identifier (bundle id, Android package): dot-separated parts of letters,
    /// digits, `-` and `_`, at least two parts.
    public static func isReverseDNS(_ s: some StringProtocol) -> Bool {
        let parts = s.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count >= 2 && parts.allSatisfy { part in
            !part.isEmpty && part.utf8.allSatisfy {
                (0x30...0x39).contains($0) || (0x41...0x5A).contains($0) || (0x61...0x7A).contains($0) || $0 == 0x2D || $0 == 0x5F
            }
        }
    }

    /// `TEAMID.bundle.id`.
    public static func isAppID(_ s: String) -> Bool {
        guard let dot = s.firstIndex(of: ".") else { return false }
        return isTeamID(s[..<dot]) && isReverseDNS(s[s.index(after: dot)...])
    }

    /// 32 bytes as upper-case hex pairs joined by `:` (what `keytool -list -v` prints).
    public static func isFingerprint(_ s: String) -> Bool {
        let pairs = s.split(separator: ":", omittingEmptySubsequences: false)
        return pairs.count == 32 && pairs.allSatisfy { p in
            p.utf8.count == 2 && p.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x41...0x46).contains($0) }
        }
    }
}

/// The served form: the documents serialized once, at configuration time.
struct AppLinkFiles: Sendable {
    private let apple: [UInt8]?
    private let android: [UInt8]?

    init?(_ links: AppLinks?) {
        guard let links, links.apple != nil || !links.android.isEmpty else { return nil }
        apple = links.appleDocument
        android = links.androidDocument
    }

    /// GET/HEAD of a configured file: 200, `application/json`, cacheable for an hour (Apple's
    /// CDN and Android's verifier fetch it rarely; a changed file is seen within the hour).
    /// Other methods: 405. nil: not one of ours (the request goes on to the site).
    func response(_ request: borrowing RequestView) -> RequestDecision? {
        let body: [UInt8]
        if let apple, request.pathEquals("/.well-known/apple-app-site-association") {
            body = apple
        } else if let android, request.pathEquals("/.well-known/assetlinks.json") {
            body = android
        } else {
            return nil
        }
        let method = request.method
        guard method == .get || method == .head else {
            return .respond(Response(status: 405, text: "405 Method Not Allowed\n", headers: [("Allow", "GET, HEAD")]))
        }
        return .respond(Response(status: 200, headers: [
            ("Content-Type", "application/json"), ("Cache-Control", "public, max-age=3600"),
        ], body: body))
    }
}
