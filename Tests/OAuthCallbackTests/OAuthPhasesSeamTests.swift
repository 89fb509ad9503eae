import ProxyCore
import Testing
@testable import OAuthCallback

/// The domain at its seam with the engine: `OAuthPhases` with session mode behind a real
/// exchange that has no client socket (`EmbeddedExchange`) — the same decisions the pytest
/// suites check through a socket (which paths need a session in which spelling, a sign-in
/// versus a 401 or 403, what reaches the app), in milliseconds and without a proxy process.
@Suite struct OAuthPhasesSeamTests {
    static func phases(protect: [String], skip: [String] = [], allowedEmails: [String]? = nil) throws -> OAuthPhases {
        var settings = SessionLayerTests.settings()
        let prefixes = try protect.map { try PathPrefix.parse($0).get() }
        settings.session!.protect = .prefixes(prefixes)
        settings.session!.skip = try skip.map { try PathPrefix.parse($0).get() }
        if let allowedEmails {
            settings.session!.access.emails = allowedEmails
        } else {
            settings.session!.access.anyAuthenticatedUser = true
        }
        let store = MemoryStore(clock: { 1_800_000_000 })
        let layer = try SessionLayer(oauth: settings, store: store, identityProviders: ["google": CountingProvider()],
                                     serverSide: false, log: Logger(level: .error), clock: { 1_800_000_000 })
        return OAuthPhases(pipeline: CallbackPipeline(settings: settings, store: store, providers: [:]),
                           relayCodes: RelayCodes(store: store, ttlSeconds: 60), session: layer,
                           metrics: OAuthMetrics(registry: MetricsRegistry(), settings: settings, storeKind: "memory"),
                           log: Logger(level: .error))
    }

    static func get(_ path: String, _ headers: String = "") -> String {
        "GET \(path) HTTP/1.1\r\nHost: app.example.com\r\nAccept: text/html\r\n\(headers)\r\n"
    }

    static func status(_ response: String) -> Int {
        Int(response.split(separator: " ", maxSplits: 2).dropFirst().first ?? "") ?? 0
    }

    static func header(_ response: String, _ name: String) -> String? {
        for line in response.split(separator: "\r\n") where line.lowercased().hasPrefix(name.lowercased() + ": ") {
            return String(line.dropFirst(name.count + 2))
        }
        return nil
    }

    /// Signs in through the web flow, as a browser would, on one exchange: returns the
    /// session cookie (`name=value`).
    static func signIn(_ x: EmbeddedExchange) throws -> String {
        x.send(get("/_oauth/start?rd=%2Fadmin"))
        let start = x.receive()
        #expect(status(start) == 302)
        let location = try #require(header(start, "Location"))
        let state = try #require(location.split(separator: "?").last?.split(separator: "&")
            .first { $0.hasPrefix("state=") }?.dropFirst(6))
        let stateCookie = try #require(header(start, "Set-Cookie")).split(separator: ";")[0]
        x.send(get("/_oauth/web_callback?code=4%2Fweb-code&state=\(state)", "Cookie: \(stateCookie)\r\n"))
        #expect(x.run(until: { !x.deciding }))
        let callback = x.receive()
        #expect(status(callback) == 302)
        #expect(header(callback, "Location") == "/admin")
        let cookies = callback.split(separator: "\r\n").filter { $0.lowercased().hasPrefix("set-cookie: ") }
            .map { $0.dropFirst("set-cookie: ".count).split(separator: ";")[0] }
            .filter { !$0.hasSuffix("=") }
        return cookies.joined(separator: "; ")
    }

    // MARK: Which paths need a session

    /// Every spelling of a protected path is protected: case, Rails' format suffix, dot
    /// segments, encoded letters, a trailing slash, doubled slashes.
    @Test(arguments: ["/admin", "/ADMIN", "/Admin/users", "/admin.json", "/x/../admin", "/%61dmin", "/admin/", "//admin",
                      "/admin;jsessionid=1"])
    func aProtectedPathInAnySpellingAsksABrowserToSignIn(path: String) throws {
        let x = try EmbeddedExchange(phases: Self.phases(protect: ["/admin"]))
        x.send(Self.get(path))
        let response = x.receive()
        #expect(!x.proxied, "\(path) reached the app")
        #expect(Self.status(response) == 302, "\(path): \(response.prefix(60))")
        #expect(Self.header(response, "Location")?.hasPrefix("/_oauth/start?") == true)
    }

    @Test(arguments: ["/", "/public", "/administrator", "/admin-panel"])
    func aPathOutsideTheRulesReachesTheAppWithoutIdentity(path: String) throws {
        let x = try EmbeddedExchange(phases: Self.phases(protect: ["/admin"]))
        // A client cannot speak for the proxy: identity headers it sends are dropped.
        x.send(Self.get(path, "X-Forwarded-Email: admin@example.com\r\nX-Auth-Request-User: admin\r\n"))
        #expect(x.proxied)
        let request = try #require(x.upstreamRequest())
        #expect(!request.lowercased().contains("x-forwarded-email"))
        #expect(!request.lowercased().contains("x-auth-request-user"))
    }

    @Test func aSkippedPathUnderAProtectedOneIsOpenOnlyAsWritten() throws {
        let open = try EmbeddedExchange(phases: Self.phases(protect: ["/admin"], skip: ["/admin/health"]))
        open.send(Self.get("/admin/health"))
        #expect(open.proxied)
        let other = try EmbeddedExchange(phases: Self.phases(protect: ["/admin"], skip: ["/admin/health"]))
        other.send(Self.get("/ADMIN/health"))
        #expect(!other.proxied)
        #expect(Self.status(other.receive()) == 302)
    }

    @Test func anAPIClientWithoutASessionGetsA401NotASignInPage() throws {
        let x = try EmbeddedExchange(phases: Self.phases(protect: ["/admin"]))
        x.send("GET /admin HTTP/1.1\r\nHost: app.example.com\r\nAccept: application/json\r\n\r\n")
        #expect(Self.status(x.receive()) == 401)
    }

    // MARK: With a session

    @Test func aSignedInUserReachesTheAppWithTheProxysIdentityHeaders() throws {
        let x = try EmbeddedExchange(phases: Self.phases(protect: ["/admin"]))
        let cookie = try Self.signIn(x)
        x.send(Self.get("/admin/users", "Cookie: \(cookie)\r\nX-Forwarded-Email: mallory@example.com\r\n"))
        #expect(x.run(until: { x.proxied }))
        let request = try #require(x.upstreamRequest())
        #expect(request.contains("\r\nX-Forwarded-User: \(CountingProvider.identity.subject)\r\n"))
        // The client's own X-Forwarded-Email is gone, whatever the mapping sends.
        #expect(!request.contains("mallory"))
    }

    @Test func aUserTheRulesDoNotAllowIsRefusedAtSignInAndTheAppNeverSeesThem() throws {
        let x = try EmbeddedExchange(phases: Self.phases(protect: ["/admin"], allowedEmails: ["kim@example.com"]))
        x.send(Self.get("/_oauth/start?rd=%2Fadmin"))
        let start = x.receive()
        let location = try #require(Self.header(start, "Location"))
        let state = try #require(location.split(separator: "?").last?.split(separator: "&")
            .first { $0.hasPrefix("state=") }?.dropFirst(6))
        let stateCookie = try #require(Self.header(start, "Set-Cookie")).split(separator: ";")[0]
        // Jane signs in (the provider vouches for her) but is not on the list.
        x.send(Self.get("/_oauth/web_callback?code=4%2Fweb-code&state=\(state)", "Cookie: \(stateCookie)\r\n"))
        #expect(x.run(until: { !x.deciding }))
        let response = x.receive()
        #expect(Self.status(response) == 403)
        #expect(Self.header(response, "Set-Cookie")?.contains("Max-Age=0") ?? true)
        #expect(!x.proxied)
    }

    // MARK: Early data (0-RTT)

    @Test(arguments: ["/_oauth_callback?provider=google&platform=ios&code=c&state=s&code_verifier=v",
                      "/_oauth/start?rd=%2Fadmin", "/_oauth/web_callback?code=c&state=s", "/_oauth/userinfo"])
    func noEndpointOfOursIsServedFromEarlyData(path: String) throws {
        let x = try EmbeddedExchange(phases: Self.phases(protect: ["/admin"]))
        x.earlyData = true
        x.send(Self.get(path))
        let response = x.receive()
        #expect(Self.status(response) == 425, "\(response)")
        #expect(x.upstreamRequest(seconds: 0.2) == nil)
    }

    @Test func aPageOutsideOurEndpointsIsServedFromEarlyData() throws {
        let x = try EmbeddedExchange(phases: Self.phases(protect: ["/admin"]))
        x.earlyData = true
        x.send(Self.get("/public"))
        #expect(x.upstreamRequest()?.hasPrefix("GET /public HTTP/1.1\r\n") == true)
    }
}
