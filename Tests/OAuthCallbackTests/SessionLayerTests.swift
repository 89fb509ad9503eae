import Synchronization
import ProxyCore
import Testing
@testable import OAuthCallback

/// `session` mode off the request path: the web sign-in's callback, sessions in the store, and
/// the refusals — through a real loop and a memory (or failing) store, the provider a double.
@Suite struct SessionLayerTests {
    let loop = TestLoop.shared
    let clock = ManualClock()
    static let secret = "a-session-secret-of-at-least-32-characters"
    static let webRedirect = "https://app.example.com/_oauth/web_callback"

    static func settings(errorURL: String? = nil, secrets: [String] = [secret]) -> OAuthSettings {
        var o = OAuthSettings()
        var s = SessionSettings()
        s.secrets = secrets.map { Secret($0) }
        s.secure = false
        s.errorURL = errorURL
        s.protect = .all
        o.session = s
        var google = ProviderSettings(name: "google", kind: .google)
        google.handoff = .session
        google.appClient = ClientCredentials(clientID: "web-client", clientSecret: Secret("web-secret"), clientAuth: .basic)
        google.endpoints.authorization = "https://idp.example/authorize"
        o.providers["google"] = google
        return o
    }

    func layer(serverSide: Bool, store: (any Store)? = nil, provider: CountingProvider = CountingProvider(),
               errorURL: String? = nil, secrets: [String] = [secret]) throws -> SessionLayer {
        try SessionLayer(oauth: Self.settings(errorURL: errorURL, secrets: secrets), store: store ?? MemoryStore(clock: clock.read),
                         identityProviders: ["google": provider], serverSide: serverSide,
                         log: Logger(level: .error), clock: { 1_800_000_000 })
    }

    // MARK: Helpers

    /// /_oauth/start's state cookie and the authorization URL's parameters (`jar`: the browser's
    /// cookies sent with the start).
    func start(_ layer: SessionLayer, rd: String = "/account", jar: [(name: String, value: String)] = [])
        -> (cookies: [(name: String, value: String)], query: [String: String]) {
        let r = layer.start(query: FormEncoding.encode([("rd", rd)]), host: "app.example.com", cookies: jar)
        let location = r.headers.first { $0.name == "Location" }!.value
        let query = location.split(separator: "?", maxSplits: 1).last.map(String.init) ?? ""
        var params: [String: String] = [:]
        if case .success(let fields) = QueryDecoding.decode(query) { for f in fields { params[f.name] = f.value } }
        return (setCookies(r), params)
    }

    func setCookies(_ r: Response) -> [(name: String, value: String)] {
        r.headers.filter { $0.name == "Set-Cookie" }.map { header in
            let pair = header.value.split(separator: ";", maxSplits: 1)[0]
            let eq = pair.firstIndex(of: "=")!
            return (String(pair[..<eq]), String(pair[pair.index(after: eq)...]))
        }
    }

    func callback(_ layer: SessionLayer, _ query: String, _ cookies: [(name: String, value: String)]) -> Response? {
        loop.ask { loop, done in layer.webCallback(query: query, host: "app.example.com", cookies: cookies, on: loop) { done($0) } }
    }

    func header(_ r: Response?, _ name: String) -> String? { r?.headers.first { $0.name == name }?.value }

    // MARK: The web callback

    @Test func aWebCallbackRedeemsTheCodeWithTheWebClientAndTheStateCookiesVerifierAndNonce() throws {
        let provider = CountingProvider()
        let layer = try layer(serverSide: false, provider: provider)
        let (cookies, q) = start(layer)
        #expect(q["code_challenge_method"] == "S256")
        let r = callback(layer, FormEncoding.encode([("code", "4/web-code"), ("state", q["state"]!), ("scope", "openid")]), cookies)
        #expect(r?.status == 302)
        #expect(header(r, "Location") == "/account")
        let request = try #require(provider.requests.first)
        #expect(provider.count == 1)
        #expect(request.client.clientID == "web-client")
        #expect(request.client.clientSecret?.value == "web-secret")
        #expect(request.client.clientAuth == .basic)
        #expect(request.client.redirectURI == "http://app.example.com/_oauth/web_callback")
        #expect(request.code == "4/web-code")
        #expect(request.expectedNonce == q["nonce"])
        let verifier = try #require(request.codeVerifier)
        #expect(Base64URL.encode(SHA256.hash(verifier)) == q["code_challenge"], "the verifier of the challenge sent")
        let set = setCookies(r!)
        #expect(cookies.count == 1 && cookies[0].name == layer.stateCookieName(for: q["state"]!))
        #expect(set.contains { $0.name == cookies[0].name && $0.value.isEmpty }, "the state cookie is single use")
        #expect(layer.session(set.filter { $0.name == "_oauth_session" })?.email == "jane@example.com")
    }

    @Test func aWebCallbackWithAnotherState_orWithoutTheStateCookie_isRefusedBeforeTheProvider() throws {
        let provider = CountingProvider()
        let layer = try layer(serverSide: false, provider: provider)
        let (cookies, _) = start(layer)
        let (_, other) = start(layer)
        let query = FormEncoding.encode([("code", "c"), ("state", other["state"]!)])
        for jar in [cookies, []] {
            let r = callback(layer, query, jar)
            #expect(r?.status == 400)
            #expect(setCookies(r!).isEmpty, "neither a session nor the victim's state cookie cleared")
        }
        #expect(provider.count == 0)
    }

    @Test func aCodeIsRedeemedOnceEvenWithTheStateCookieReplayed() throws {
        let provider = CountingProvider()
        let layer = try layer(serverSide: false, provider: provider)
        let (cookies, q) = start(layer)
        let query = FormEncoding.encode([("code", "c"), ("state", q["state"]!)])
        #expect(callback(layer, query, cookies)?.status == 302)
        let again = callback(layer, query, cookies)
        #expect(again?.status == 400)
        #expect(provider.count == 1)
    }

    @Test func theProvidersErrorGoesToTheErrorURL_orTheProxysPage() throws {
        let provider = CountingProvider()
        for errorURL in ["/oops?from=web", nil] {
            let layer = try layer(serverSide: false, provider: provider, errorURL: errorURL)
            let (cookies, q) = start(layer)
            let r = callback(layer, FormEncoding.encode([("error", "access_denied"), ("state", q["state"]!)]), cookies)
            if errorURL != nil {
                #expect(r?.status == 302)
                #expect(header(r, "Location") == "/oops?from=web&error=access_denied")
            } else {
                #expect(r?.status == 400)
            }
            #expect(setCookies(r!).contains { $0.name == cookies[0].name && $0.value.isEmpty })
        }
        #expect(provider.count == 0)
    }

    @Test(arguments: [
        ("", false), ("code=a", false), ("state=s", false), ("code=a&code=b&state=s", false),
        ("code=a&state=s&state=t", false), ("code=a&error=e&state=s", false), ("code=a%20b&state=s", false),
        ("code=a&state=s", true), ("code=a&state=s&authuser=0&prompt=none&iss=x", true), ("error=access_denied", true),
    ])
    func webCallbackQueries(query: String, accepted: Bool) {
        if case .success = WebCallbackQuery.parse(query) { #expect(accepted) } else { #expect(!accepted) }
    }

    @Test func aProviderErrorThatIsNotATokenIsNotEchoed() {
        #expect(WebCallbackQuery.parse("error=%3Cscript%3E&state=s") == .success(.error("provider_error", state: "s")))
    }

    // MARK: Server-side sessions

    @Test func aServerSideSessionLivesInTheStoreAndTheCookieCarriesOnlyItsID() throws {
        let store = MemoryStore(clock: clock.read)
        let long = CallbackProvider.identity(name: String(repeating: "n", count: 3000))
        let layer = try layer(serverSide: true, store: store, provider: CountingProvider(answer: .success(long)))
        let (cookies, q) = start(layer)
        let r = try #require(callback(layer, FormEncoding.encode([("code", "c"), ("state", q["state"]!)]), cookies))
        #expect(r.status == 302)
        let session = setCookies(r).filter { layer.cookie.isSessionCookieName($0.name) }
        #expect(session.count == 1 && session[0].value.utf8.count < 200, "only the sealed id, not the 3 kB name")
        let id = try #require(layer.cookie.reference(from: session))
        let found = loop.ask { loop, done in layer.lookup(id, on: loop) { done($0) } }
        #expect(try found?.get()?.name == long.name)
        #expect(layer.session(session) == nil, "never read as a cookie session")
    }

    @Test func signOutEndsTheServerSideSessionEverywhere() throws {
        let layer = try layer(serverSide: true)
        let (cookies, q) = start(layer)
        let r = try #require(callback(layer, FormEncoding.encode([("code", "c"), ("state", q["state"]!)]), cookies))
        let session = setCookies(r).filter { layer.cookie.isSessionCookieName($0.name) }
        let id = try #require(layer.cookie.reference(from: session))
        let out = loop.ask { loop, done in layer.signOut(cookies: session, rd: "/bye", on: loop) { done($0) } }
        #expect(out?.status == 302)
        #expect(setCookies(out!).contains { $0.name == "_oauth_session" && $0.value.isEmpty })
        // The same cookie, kept by someone else: no session any more.
        let found = loop.ask { loop, done in layer.lookup(id, on: loop) { done($0) } }
        #expect(try found?.get() == nil)
    }

    @Test(arguments: [
        ([], true), (["same-origin"], true), (["same-site"], true), (["none"], true), (["Same-Origin"], true),
        (["cross-site"], false), ([""], false), (["cross-site", "same-origin"], false), (["same-origin", "bogus"], false),
    ])
    func signOutIsRefusedFromAnotherSite(fetchSite: [String], allowed: Bool) {
        #expect(SessionLayer.isSameSiteOrUnknown(fetchSite) == allowed)
    }

    @Test func aCookieSessionIsRefusedWhenSessionsAreServerSide() throws {
        let cookieLayer = try layer(serverSide: false)
        let serverLayer = try layer(serverSide: true)
        let (cookies, q) = start(cookieLayer)
        let r = try #require(callback(cookieLayer, FormEncoding.encode([("code", "c"), ("state", q["state"]!)]), cookies))
        let inline = setCookies(r).filter { $0.name == "_oauth_session" }
        #expect(cookieLayer.session(inline) != nil)
        #expect(serverLayer.session(inline) == nil, "a sealed whole session could not be ended at sign-out")
        #expect(serverLayer.cookie.reference(from: inline) == nil)
    }

    @Test func withoutTheStoreSignInAndSignOutFailClosed() throws {
        let failing = FailingStore(.unavailable)
        let layer = try layer(serverSide: true, store: failing)
        let (cookies, q) = start(layer)
        let r = callback(layer, FormEncoding.encode([("code", "c"), ("state", q["state"]!)]), cookies)
        #expect(r?.status == 503, "the replay guard cannot record the code")
        #expect(!setCookies(r!).contains { $0.name == "_oauth_session" })
        let reference = try layer.cookie.setCookies(reference: Array(repeating: 7, count: 32), maxAge: 60)
        let jar = setCookies(Response(status: 200, headers: reference.map { ("Set-Cookie", $0) }))
        let out = loop.ask { loop, done in layer.signOut(cookies: jar, rd: "/", on: loop) { done($0) } }
        #expect(out?.status == 503)
        #expect(setCookies(out!).isEmpty, "the cookie is kept so that signing out again can still end the session")
        let found = loop.ask { loop, done in layer.lookup(Array(repeating: 7, count: 32), on: loop) { done($0) } }
        guard let found else { return }
        #expect(SessionLayer.noSession(found, json: false).status == 503, "not a redirect to sign-in, which would loop")
        #expect(SessionLayer.noSession(found, json: true).status == 503)
        #expect(SessionLayer.noSession(.success(nil), json: true).status == 401)
    }

    @Test func aStoreOutageIsLoggedOnceASecondNotOncePerRequest() throws {
        let capture = try LogCapture()
        let layer = try SessionLayer(oauth: Self.settings(), store: FailingStore(.unavailable), identityProviders: [:],
                                     serverSide: true, log: capture.logger, clock: { 1_800_000_000 })
        for _ in 0..<50 {
            let found = loop.ask { loop, done in layer.lookup(Array(repeating: 7, count: 32), on: loop) { done($0) } }
            #expect(found.map { if case .failure = $0 { true } else { false } } == true, "fails closed every time")
        }
        let lines = capture.text().split(separator: "\n").filter { $0.contains("session lookup failed") }
        // One a second: 50 lookups take milliseconds (a stalled machine could cross a second or two).
        #expect((1...3).contains(lines.count), "\(lines.count) lines for 50 lookups")
        #expect(lines.first?.contains(#""setting":"store""#) == true)
    }

    // MARK: The state cookie

    /// Merges Set-Cookie answers into a jar the way a browser does: a new value replaces one of
    /// the same name, an empty one (`Max-Age=0`) removes it.
    func merge(_ jar: [(name: String, value: String)], _ set: [(name: String, value: String)]) -> [(name: String, value: String)] {
        var out = jar
        for c in set {
            out.removeAll { $0.name == c.name }
            if !c.value.isEmpty { out.append(c) }
        }
        return out
    }

    @Test func twoSignInsInFlightInOneBrowserBothComplete_inEitherOrder() throws {
        for firstStartedFinishesFirst in [true, false] {
            let provider = CountingProvider()
            let layer = try layer(serverSide: false, provider: provider)
            let (one, q1) = start(layer, rd: "/one")
            let (two, q2) = start(layer, rd: "/two", jar: one)
            var jar = merge(one, two)
            #expect(jar.count == 2, "a cookie per sign-in: the second start leaves the first's alone")
            let order = firstStartedFinishesFirst ? [(q1, "/one"), (q2, "/two")] : [(q2, "/two"), (q1, "/one")]
            for (q, rd) in order {
                let r = try #require(callback(layer, FormEncoding.encode([("code", "c" + rd), ("state", q["state"]!)]), jar))
                #expect(r.status == 302 && header(r, "Location") == rd)
                let set = setCookies(r)
                #expect(set.filter { $0.name.hasPrefix("_oauth_state") }.map(\.name) == [layer.stateCookieName(for: q["state"]!)],
                        "only this sign-in's state cookie is cleared")
                jar = merge(jar, set)
            }
            #expect(provider.count == 2)
            #expect(!jar.contains { $0.name.hasPrefix("_oauth_state") })
        }
    }

    @Test func aStateCookieOpensOnlyUnderItsOwnName() throws {
        let layer = try layer(serverSide: false)
        let (mine, q) = start(layer)
        let (other, _) = start(layer)
        // Another sign-in's sealed value renamed to this state's cookie: refused (associated data).
        let renamed = [(name: mine[0].name, value: other[0].value)]
        #expect(layer.stateRecord(renamed, state: q["state"]!) == nil)
        #expect(layer.stateRecord(mine, state: q["state"]!)?.state == q["state"])
        // A cookie of the right name that does not open does not hide the genuine one after it.
        let tossed = [(name: mine[0].name, value: "AAAA")] + mine
        #expect(layer.stateRecord(tossed, state: q["state"]!)?.state == q["state"])
    }

    @Test func aSignInStartedBeforeTheSecretRotatedCompletesAfterIt() throws {
        let old = "the-previous-session-secret-of-32-characters"
        let before = try layer(serverSide: false, secrets: [old])
        let (cookies, q) = start(before)
        // Rotated: the new secret first, the old one kept as previous_secret.
        let provider = CountingProvider()
        let after = try layer(serverSide: false, provider: provider, secrets: [Self.secret, old])
        #expect(after.stateRecord(cookies, state: q["state"]!)?.state == q["state"])
        let r = callback(after, FormEncoding.encode([("code", "4/code"), ("state", q["state"]!)]), cookies)
        #expect(r?.status == 302 && header(r, "Location") == "/account")
        #expect(provider.count == 1)
        // New sign-ins seal with the new secret: once the old one is dropped they still open,
        // and the old sign-in's cookie no longer does.
        let (fresh, q2) = start(after)
        let dropped = try layer(serverSide: false, secrets: [Self.secret])
        #expect(dropped.stateRecord(fresh, state: q2["state"]!)?.state == q2["state"])
        #expect(dropped.stateRecord(cookies, state: q["state"]!) == nil)
    }

    @Test func atMostFiveStateCookiesLive_theOldestClearedFirst() throws {
        let now = ManualClock()
        let layer = try SessionLayer(oauth: Self.settings(), store: MemoryStore(clock: now.read), identityProviders: [:],
                                     serverSide: false, log: Logger(level: .error),
                                     clock: { Int64(now.now / 1_000_000_000) })
        var jar: [(name: String, value: String)] = [("unrelated", "1")]
        var names: [String] = []
        for i in 0..<7 {
            now.advance(seconds: 1)
            let r = layer.start(query: "", host: "app.example.com", cookies: jar)
            let set = setCookies(r)
            let added = set.filter { !$0.value.isEmpty }.map(\.name)
            let cleared = set.filter { $0.value.isEmpty }.map(\.name)
            #expect(added.count == 1)
            names += added
            // The 6th start clears the 1st, the 7th the 2nd.
            #expect(cleared == (i >= SessionLayer.maximumStateCookies ? [names[i - SessionLayer.maximumStateCookies]] : []), "start \(i + 1)")
            jar = merge(jar, set)
            #expect(jar.filter { $0.name.hasPrefix("_oauth_state_") }.count == min(i + 1, SessionLayer.maximumStateCookies))
        }
        #expect(jar.contains { $0.name == "unrelated" })
        // A state cookie that no longer opens (or has expired) is cleared as well, live ones kept.
        let junk = jar + [("_oauth_state_0123456789ab", "AAAA")]
        #expect(layer.stateCookiesToClear(junk) == [names[2], "_oauth_state_0123456789ab"])
        now.advance(seconds: UInt64(SessionLayer.stateLifetime))
        #expect(layer.stateCookiesToClear(jar).count == SessionLayer.maximumStateCookies, "all expired")
    }

    @Test func stateCookieNamesKeepTheHostPrefixWhenSecure() throws {
        var settings = Self.settings()
        settings.session?.secure = true
        let layer = try SessionLayer(oauth: settings, store: MemoryStore(clock: clock.read), identityProviders: [:],
                                     serverSide: false, log: Logger(level: .error), clock: { 1_800_000_000 })
        let name = layer.stateCookieName(for: "some-state")
        #expect(name == "__Host-_oauth_state_" + String(ReplayGuard.hex(SHA256.hash("some-state")).prefix(12)))
        let r = layer.start(query: "", host: "app.example.com", cookies: [])
        let header = try #require(r.headers.first { $0.name == "Set-Cookie" }?.value)
        #expect(header.hasPrefix("__Host-_oauth_state_") && header.contains("; Secure") && header.contains("; Path=/"))
    }

    @Test func withACookieDomainStateCookiesAreSharedAndAPathReturnsToTheHostItStartedOn() throws {
        var settings = Self.settings()
        settings.session?.secure = true
        settings.session?.cookieDomain = "example.com"
        settings.session?.allowedRedirectHosts = [".example.com"]
        let layer = try SessionLayer(oauth: settings, store: MemoryStore(clock: clock.read), identityProviders: [:],
                                     serverSide: false, log: Logger(level: .error), clock: { 1_800_000_000 })
        #expect(layer.cookie.name == "__Secure-_oauth_session" && layer.cookie.domain == "example.com")
        func rd(startedOn host: String, _ rd: String) throws -> String {
            let r = layer.start(query: FormEncoding.encode([("rd", rd)]), host: host, cookies: [])
            let header = try #require(r.headers.first { $0.name == "Set-Cookie" }?.value)
            #expect(header.hasPrefix("__Secure-_oauth_state_") && header.contains("; Path=/; Domain=example.com;")
                    && header.contains("; Secure"))
            let location = try #require(r.headers.first { $0.name == "Location" }?.value)
            guard case .success(let fields) = QueryDecoding.decode(String(location.split(separator: "?", maxSplits: 1)[1])),
                  let state = fields.first(where: { $0.name == "state" })?.value else { throw CryptoError(.invalidInput, "no state") }
            return try #require(layer.stateRecord(setCookies(r), state: state)).rd
        }
        #expect(try rd(startedOn: "app1.example.com", "/orders?id=7") == "https://app1.example.com/orders?id=7")
        #expect(try rd(startedOn: "app2.example.com", "https://app1.example.com/x") == "https://app1.example.com/x")
        // A host outside the allow-list keeps the path; a target outside it is refused as ever.
        #expect(try rd(startedOn: "evil.test", "/orders") == "/orders")
        #expect(try rd(startedOn: "app1.example.com", "https://evil.test/") == "https://app1.example.com/")
        #expect(try rd(startedOn: "app1.example.com", "//evil.test/") == "https://app1.example.com/")
        #expect(layer.clearStateCookie(named: "__Secure-_oauth_state_x").contains("; Domain=example.com; Max-Age=0;"))
    }

    @Test(arguments: [
        ("application/json", true), ("text/html, Application/JSON;q=0.9", true), ("*/*", false),
        ("application/jso", false), ("", false), ("text/html,application/xhtml+xml", false),
    ])
    func anAcceptValueNamingJSONIsFound(accept: String, json: Bool) {
        #expect(SessionLayer.acceptsJSON(accept) == json)
    }

    @Test func anOpenedSessionCookieIsRememberedPerLoopUntilItExpires() throws {
        let now = Atomic<Int64>(1_800_000_000)
        let layer = try SessionLayer(oauth: Self.settings(), store: MemoryStore(clock: clock.read), identityProviders: [:],
                                     serverSide: false, log: Logger(level: .error), clock: { now.load(ordering: .relaxed) })
        let session = ProxySession(provider: "google", subject: "108", email: "a@example.test", emailVerified: true,
                                   issuedAt: 1_800_000_000, expiresAt: 1_800_000_600)
        let jar = try layer.cookie.chunks(of: layer.cookie.seal(session))
        let loop = loop.loop
        #expect(layer.session(jar, on: loop)?.subject == "108")
        #expect(layer.opened.count(on: loop) == 1)
        #expect(layer.session(jar, on: loop)?.subject == "108", "the second request is answered from the table")
        #expect(layer.opened.count(on: loop) == 1)
        // A cookie that does not open is not remembered (junk cannot push sessions out).
        let junk = [(name: jar[0].name, value: "AAAA" + jar[0].value.dropFirst(4))]
        #expect(layer.session(junk, on: loop) == nil)
        #expect(layer.opened.count(on: loop) == 1)
        // The expiry is checked on every use, remembered or not.
        now.store(1_800_000_600, ordering: .relaxed)
        #expect(layer.session(jar, on: loop) == nil)
        #expect(layer.opened.count(on: loop) == 0)
        // A layer with another secret (a new configuration) opens nothing of the old one's.
        let rotated = try SessionLayer(oauth: Self.settings(secrets: ["another-session-secret-of-32-characters!"]),
                                       store: MemoryStore(clock: clock.read), identityProviders: [:], serverSide: false,
                                       log: Logger(level: .error), clock: { 1_800_000_000 })
        #expect(rotated.session(jar, on: loop) == nil)
    }

    /// The table is keyed by name and value: `_oauth_session_0=<a whole single cookie>` does
    /// not open (the seal is bound to its name), cold or after the real name was seen.
    @Test func aValidValueUnderAnotherCookieNameIsRefusedOnAColdAndAWarmLoop() throws {
        let layer = try SessionLayer(oauth: Self.settings(), store: MemoryStore(clock: clock.read), identityProviders: [:],
                                     serverSide: false, log: Logger(level: .error), clock: { 1_800_000_000 })
        let session = ProxySession(provider: "google", subject: "108", issuedAt: 1_800_000_000, expiresAt: 1_800_000_600)
        let jar = try layer.cookie.chunks(of: layer.cookie.seal(session))
        try #require(jar.count == 1 && jar[0].name == "_oauth_session")
        let renamed = [(name: "_oauth_session_0", value: jar[0].value)]
        let loop = loop.loop
        #expect(layer.session(renamed, on: loop) == nil, "cold")
        #expect(layer.session(jar, on: loop)?.subject == "108")
        #expect(layer.session(renamed, on: loop) == nil, "warm: the value was opened under its own name on this loop")
        #expect(layer.session(jar, on: loop)?.subject == "108")
    }

    /// `preferred_username` and `groups` of the id_token reach the session, and from it
    /// `X-Forwarded-Preferred-Username` and `X-Forwarded-Groups`.
    @Test func preferredUsernameAndGroupsComeFromTheVerifiedIdentity() throws {
        let identity = VerifiedIdentity(provider: "google", subject: "1", email: "jane@example.com", emailVerified: true,
                                        preferredUsername: "jane", groups: ["admins", "staff"],
                                        tokens: TokenResponse(accessToken: "t"))
        let layer = try layer(serverSide: false, provider: CountingProvider(answer: .success(identity)))
        let (cookies, q) = start(layer)
        let r = try #require(callback(layer, FormEncoding.encode([("code", "c"), ("state", q["state"]!)]), cookies))
        #expect(r.status == 302)
        let jar = setCookies(r).filter { layer.cookie.isSessionCookieName($0.name) }
        let opened = try #require(layer.session(jar))
        #expect(opened.preferredUsername == "jane" && opened.groups == ["admins", "staff"])
        let headers = layer.identityHeaders(opened, on: loop.loop)
        #expect(headers.contains { $0.name == "X-Forwarded-Preferred-Username" && $0.value == "jane" })
        #expect(headers.contains { $0.name == "X-Forwarded-Groups" && $0.value == "admins,staff" })
    }

    @Test func cookieHeadersSplitIntoNamesAndValues() {
        func pairs(_ headers: [String]) -> [String] { SessionLayer.cookies(headers).map { "\($0.name)|\($0.value)" } }
        #expect(pairs(["a=b; c=d"]) == ["a|b", "c|d"])
        #expect(pairs(["a=b;c=d", "e=f"]) == ["a|b", "c|d", "e|f"])
        #expect(pairs(["  a=b;;  ;x"]) == ["a|b"], "empty parts and parts without = are skipped")
        #expect(pairs(["a==b; c=; =d"]) == ["a|=b", "c|", "|d"], "the first = splits")
        #expect(pairs(["s=v w "]) == ["s|v w "], "only leading spaces are dropped, as before")
        #expect(pairs(["é=ü; k=\u{1F36A}"]) == ["é|ü", "k|\u{1F36A}"])
        #expect(pairs([""]).isEmpty && pairs([]).isEmpty)
    }

    @Test func theStateRecordRoundTripsAndOneWithoutVerifierIsRefused() {
        let r = StateRecord(state: "s", nonce: "n", rd: "/", provider: "google", expiresAt: 5, verifier: "v",
                            redirectURI: Self.webRedirect)
        #expect(StateRecord(json: r.json()) == r)
        #expect(StateRecord(json: Array(#"{"s":"s","n":"n","r":"/","p":"google","e":5}"#.utf8)) == nil)
    }
}

/// Identities for the provider double.
enum CallbackProvider {
    static func identity(name: String) -> VerifiedIdentity {
        VerifiedIdentity(provider: "google", subject: "1", email: "jane@example.com", emailVerified: true, name: name,
                         tokens: TokenResponse(accessToken: "t"))
    }
}
