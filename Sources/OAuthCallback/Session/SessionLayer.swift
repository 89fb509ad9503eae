import ProxyCore

/// `session` hand-off mode on the request path: the proxy's own endpoints (`/_oauth/start`,
/// `/_oauth/sign_out`, `/_oauth/userinfo`, `/_oauth/auth`), protected paths, and identity
/// headers upstream — client-sent variants of those headers are always removed first.
///
/// Sign-in goes through `/_oauth/start`: it sets a sealed state cookie (state, nonce, PKCE
/// verifier, redirect URI, `rd`, provider) and redirects to the provider's authorization URL
/// with the app's web client. Each sign-in has its own state cookie, named after its state
/// (`SessionLayer+StateCookies.swift`), so two in flight in one browser do not undo each
/// other. Two ways back, both checked against the cookie for the state they carry (login
/// CSRF) and both requiring the id_token to carry its nonce:
/// - a wrapper app intercepts that navigation, signs in natively and loads `/_oauth_callback`
///   with the same `state` (the callback pipeline; hand-off in `signIn`);
/// - a plain browser follows it and comes back to `/_oauth/web_callback`, whose code the proxy
///   redeems with the web client (`SessionLayer+WebCallback.swift`).
/// Then the session is created and the browser goes to `rd`.
///
/// Sessions live in the sealed cookie itself, or — `serverSide` — in the store, the cookie
/// carrying only a sealed random id (`SessionLayer+Store.swift`): sign-out then ends the
/// session everywhere, and a store outage fails protected paths closed (503).
public final class SessionLayer: Sendable {
    public static let startPath = "/_oauth/start"
    public static let signOutPath = "/_oauth/sign_out"
    public static let userInfoPath = "/_oauth/userinfo"
    public static let authPath = "/_oauth/auth"
    public static let webCallbackPath = "/_oauth/web_callback"
    static let stateLifetime: Int64 = 600
    /// Most state cookies one browser holds at once (see `SessionLayer+StateCookies.swift`).
    static let maximumStateCookies = 5

    let settings: SessionSettings
    let providers: [String: ProviderSettings]
    /// The session providers in the order the chooser lists them.
    let providerOrder: [String]
    let identityProviders: [String: any IdentityProvider]
    let store: any Store
    let replayGuard: ReplayGuard
    /// Sessions in the store rather than in the cookie.
    public let serverSide: Bool
    let log: Logger
    /// The web callback's `config` failure lines, once a minute per provider and setting.
    let configFailures = ConfigFailureLog()
    /// Session refresh failure lines, once a minute per provider and reason.
    let refreshFailureLog = ConfigFailureLog()
    /// A store outage fails every request's session lookup the same way: one line a second per
    /// kind of failure, not one per request (`callback_proxy_store_errors_total` counts them all).
    let storeFailureLog = ConfigFailureLog(interval: 1_000_000_000)
    /// Access-rule refusal lines, once a second per provider, rule and place.
    let refusalLog = ConfigFailureLog(interval: 1_000_000_000)
    /// `allowed_emails_file`, read and watched (nil without one).
    let emailsFile: AllowedEmailsFile?
    let metrics: OAuthMetrics?
    /// `bearer_tokens`: whose id_tokens API calls may carry instead of a session cookie.
    let bearerIssuers: [BearerIssuer]
    let cookie: SessionCookie
    /// Signs `jwt_assertion` tokens (nil without that setting).
    let assertions: JWTAssertions?
    /// Revocation markers, read for every request with a session (nil without `revocation`).
    public let revocation: SessionRevocation?
    /// Cookie sessions already opened, per loop, by the exact cookie text (names and values: a
    /// value opens only under the name it was sealed for). In session mode every request of a
    /// signed-in user carries the same cookie, and opening it (Base64, AES-256-GCM, JSON) was
    /// most of what session mode cost a request (bench/session). Nothing a request can observe
    /// changes: a cookie's content is sealed and never changes (a new session is a new cookie),
    /// the expiry is checked on every use, and a new configuration builds a new layer.
    let opened = PerLoopCache<ProxySession>(capacity: 4_096)
    /// One per session secret, the current one first: state cookies are sealed with it and
    /// open with any, so rotating the secret does not fail the sign-ins in flight.
    let stateSealers: [AES256GCM]
    /// `_oauth_state_` (`__Host-_oauth_state_` when secure, `__Secure-…` with a cookie domain):
    /// each sign-in's state cookie is this followed by a digest of its state.
    let stateCookiePrefix: String
    /// `; Path=/`, and the cookie domain's `Domain` when there is one.
    let stateCookieAttributes: String
    private let redirects: RedirectValidator
    let clock: @Sendable () -> Int64
    /// Every spelling of every identity header a client might send (case is compared
    /// insensitively by the engine; `_`/`-` variants are listed).
    /// Matches every client-sent spelling of the identity headers (raw name bytes).
    private let strip: @Sendable (UnsafeRawBufferPointer) -> Bool

    /// - Parameters:
    ///   - store: where server-side sessions and the web sign-in's replay guard live.
    ///   - identityProviders: the implementations that redeem a web sign-in's code, by name.
    ///   - serverSide: `settings.serverSide` resolved against the configured store.
    ///   - emailsFile: `allowed_emails_file`, already read (so a bad file stops the start).
    ///   - extraIssuers: `extra_jwt_issuers`' verifiers, in configuration order.
    public init(oauth: OAuthSettings, store: any Store, identityProviders: [String: any IdentityProvider],
                serverSide: Bool, log: Logger, clock: @escaping @Sendable () -> Int64,
                emailsFile: AllowedEmailsFile? = nil, metrics: OAuthMetrics? = nil,
                extraIssuers: [ExtraJWTIssuer] = []) throws(CryptoError) {
        let settings = oauth.session ?? SessionSettings()
        self.settings = settings
        self.emailsFile = emailsFile
        self.metrics = metrics
        bearerIssuers = Self.bearerIssuers(oauth, identityProviders, extra: extraIssuers)
        providers = oauth.providers.filter { $0.value.handoff == .session }
        // Configuration order; names the loader did not record (a settings value built in code) last, by name.
        let listed = oauth.providerOrder.filter { oauth.providers[$0]?.handoff == .session }
        providerOrder = listed + providers.keys.filter { !listed.contains($0) }.sorted()
        self.identityProviders = identityProviders
        self.store = store
        replayGuard = ReplayGuard(store: store, windowSeconds: oauth.replayWindowSeconds)
        self.serverSide = serverSide
        self.log = log
        let keys = settings.secrets.map { SHA256.hash("session:" + $0.value) }
        cookie = try SessionCookie(name: settings.cookieName, keys: keys.isEmpty ? [SHA256.hash("unset")] : keys,
                                   secure: settings.secure, domain: settings.cookieDomain)
        assertions = try settings.jwtAssertion.map { a throws(CryptoError) in try JWTAssertions(a) }
        revocation = settings.revocation ? SessionRevocation(store: store, lifetimeSeconds: settings.lifetimeSeconds, clock: clock) : nil
        let stateKeys = settings.secrets.map { SHA256.hash("state:" + $0.value) }
        stateSealers = try (stateKeys.isEmpty ? [SHA256.hash("state:unset")] : stateKeys).map { k throws(CryptoError) in
            try AES256GCM(key: k)
        }
        stateCookiePrefix = settings.cookiePrefix + "_oauth_state_"
        // With a cookie domain the state cookie is shared too: the sign-in may start on one host
        // and come back to `web_redirect_uri` on another.
        stateCookieAttributes = "; Path=/" + (settings.cookieDomain.map { "; Domain=" + $0 } ?? "")
        redirects = RedirectValidator(allowedHosts: settings.allowedRedirectHosts)
        self.clock = clock
        let withAuthorization = settings.passAccessToken
        strip = IdentityHeaders.matcher(settings.headers, includingAuthorization: withAuthorization)
    }

    // MARK: Requests

    /// The proxy's own answer for `request`, or nil to continue upstream.
    public func decision(_ request: borrowing RequestView) -> RequestDecision? {
        let path = request.path
        let cookies = Self.cookies(request.headers(named: "Cookie"))
        let loop = request.eventLoop
        switch path {
        case Self.startPath:
            // Only a page navigation starts a sign-in: images or scripts that followed a
            // redirect here would add state cookies until the real sign-in's was pushed out.
            guard Self.isNavigation(request.header("Sec-Fetch-Dest")) else {
                return .respond(Self.json(401, ["error": .string("unauthorized")]))
            }
            return .respond(start(query: request.query ?? "", host: request.host ?? "localhost", cookies: cookies))
        case Self.signOutPath:
            // GET for links, POST for sign-out forms; anything else (a HEAD from a link preview
            // included) must not end a session.
            let method = request.method
            guard method == .get || method == .post else {
                return .respond(CallbackPage.error(status: 405, message: "This address only accepts GET and POST.",
                                                   title: "Not signed out", extraHeaders: [("Allow", "GET, POST")]))
            }
            let fetchSite = request.headers(named: "Sec-Fetch-Site")
            guard Self.isSameSiteOrUnknown(fetchSite) else {
                log.info("sign-out refused", ["reason": "cross_site",
                                              "fetch_site": fetchSite.allSatisfy(Self.fetchSiteValues.contains) ? fetchSite.joined(separator: ",") : "other"])
                return .respond(CallbackPage.error(status: 403, message: Messages.crossSiteSignOut, title: "Not signed out"))
            }
            let rd = Self.queryValue(request.query, "rd").flatMap(redirects.validate) ?? "/"
            return .deferred { [self] sink in signOut(cookies: cookies, rd: rd, on: loop) { sink.respond($0) } }
        case Self.userInfoPath:
            return withSession(cookies, on: loop) { [self] found in
                guard case .success(let s?) = found else { return .respond(Self.noSession(found, json: true)) }
                if let r = refusal(s.accessSubject, now: loop.nowNanoseconds) {
                    noteRefusal(r, provider: s.provider, subject: s.accessSubject, during: "userinfo", now: loop.nowNanoseconds)
                    return .respond(Self.forbidden(json: true))
                }
                var o: [String: JSONValue] = ["provider": .string(s.provider), "user": .string(s.subject)]
                if let e = s.verifiedEmail { o["email"] = .string(e) }
                if let u = s.preferredUsername { o["preferred_username"] = .string(u) }
                return .respond(Self.json(200, o))
            }
        case Self.authPath:
            let perCall: AccessRule?
            switch Self.perCallRule(request.query) {
            case .success(let rule): perCall = rule
            case .failure(let problem):
                if refusalLog.isDue(provider: "", setting: "auth query", now: loop.nowNanoseconds) {
                    log.warn("forward-auth restriction cannot be read; refused", [
                        "reason": problem.reason,
                        "setting": "the /_oauth/auth URL in the gateway's forward-auth configuration",
                    ])
                }
                return .respond(Self.authRefused)
            }
            guard let pathRules = forwardedPathRules(request) else {
                if refusalLog.isDue(provider: "", setting: "auth original uri", now: loop.nowNanoseconds) {
                    log.warn("forward-auth original path refused; refused", [
                        "reason": "X-Original-URI / X-Forwarded-Uri is not a path the proxy would forward",
                        "setting": "the header the gateway's forward-auth configuration sets",
                    ])
                }
                return .respond(Self.authRefused)
            }
            // A native app's API call through the gateway: its id_token, when it names one of
            // ours (a JWT of the app's own is left alone: the cookie session decides then).
            if !bearerIssuers.isEmpty, let authorization = request.header("Authorization"),
               let token = Self.bearerToken(authorization),
               let decision = bearerDecision(token, needed: false, pathRules: pathRules, for: .forwardAuth(perCall: perCall), on: loop) {
                return decision
            }
            return withSession(cookies, on: loop) { [self] found in
                guard case .success(let s?) = found else { return .respond(Self.noSession(found, json: false)) }
                let now = loop.nowNanoseconds
                if let r = refusal(s.accessSubject, pathRules: pathRules, now: now) ?? perCall.flatMap({ $0.check(s.accessSubject) }) {
                    noteRefusal(r, provider: s.provider, subject: s.accessSubject, during: "auth", now: now)
                    return .respond(Self.authRefused)
                }
                return .respond(authGranted(s, on: loop))
            }
        case Self.webCallbackPath:
            guard request.method == .get else {
                return .respond(CallbackPage.error(status: 405, message: "This address only accepts GET.",
                                                   extraHeaders: [("Allow", "GET")]))
            }
            let query = request.query ?? ""
            let host = request.host ?? "localhost"
            return .deferred { [self] sink in
                webCallback(query: query, host: host, cookies: cookies, on: loop) { sink.respond($0) }
            }
        default:
            let method = request.method
            // (Not `&&` over the header: its autoclosure cannot capture the borrowed request.)
            var preflight = false
            if settings.skipPreflight && method == .options { preflight = request.header("Access-Control-Request-Method") != nil }
            let (needed, pathRules) = request.withPathReadings { r in
                (!preflight && settings.requiresSession(r, method: method), settings.pathRules.isEmpty ? [] : settings.pathRules(for: r))
            }
            if !bearerIssuers.isEmpty, let authorization = request.header("Authorization"),
               let token = Self.bearerToken(authorization),
               let decision = bearerDecision(token, needed: needed, pathRules: pathRules, on: loop) {
                return decision
            }
            // Scripts, and sub-resources (a favicon, an image: browsers say so in Sec-Fetch-Dest),
            // get a 401, not a redirect to sign-in: following it would start sign-ins nobody
            // finishes, whose state cookies push out the one of the page's sign-in in flight.
            // Only asked of requests that need a session: the rest never see either answer.
            let json: Bool
            if needed {
                // Copied now: the view is only valid during this call.
                let accept = request.header("Accept") ?? ""
                let scripted = request.header("X-Requested-With") != nil
                let navigation = Self.isNavigation(request.header("Sec-Fetch-Dest"))
                json = scripted || Self.acceptsJSON(accept) || !navigation
            } else {
                json = false
            }
            let target = needed ? request.target : ""
            return withSession(cookies, on: loop) { [self] found in
                switch found {
                case .success(let s?):
                    let now = loop.nowNanoseconds
                    guard let r = refusal(s.accessSubject, pathRules: pathRules, now: now) else { return .pass(s) }
                    // No longer (or never, on this path) allowed: refused where a session is
                    // needed, anonymous where it is not.
                    guard needed else { return .pass(nil) }
                    noteRefusal(r, provider: s.provider, subject: s.accessSubject, during: "request", now: now)
                    return .respond(Self.forbidden(json: json))
                case .success(nil) where needed: return .respond(Self.signInFirst(target: target, json: json))
                case .failure where needed: return .respond(Self.noSession(found, json: json))
                // Unprotected paths go on without identity while the store is away: anonymous
                // is what the app sees for anyone without a session anyway.
                case .success(nil), .failure: return .pass(nil)
                }
            }
        }
    }

    /// Whether an `Accept` value names `application/json` (any case). Over bytes: String's
    /// `contains(_:)` builds a Character table per call, a cost every protected request paid.
    static func acceptsJSON(_ accept: String) -> Bool {
        var accept = accept
        return accept.withUTF8 { hay in
            let needle = jsonMediaType
            guard hay.count >= needle.count else { return false }
            outer: for start in 0...(hay.count - needle.count) {
                for (i, b) in needle.enumerated() where hay[start + i] | 0x20 != b | 0x20 { continue outer }
                return true
            }
            return false
        }
    }

    private static let jsonMediaType = Array("application/json".utf8)

    /// Whether a request is a top-level page load: `Sec-Fetch-Dest: document`, or no such
    /// header (clients that predate Fetch Metadata, curl).
    static func isNavigation(_ fetchDest: String?) -> Bool {
        guard let fetchDest else { return true }
        return fetchDest.lowercased() == "document"
    }

    /// The values Fetch Metadata defines for `Sec-Fetch-Site`.
    static let fetchSiteValues: Set<String> = ["same-origin", "same-site", "none", "cross-site"]

    /// Whether a sign-out may proceed: session cookies are `SameSite=Lax`, so a link or a
    /// top-level navigation from any other site carries them, and without this check any site
    /// could sign the user out. Browsers say where a request comes from in `Sec-Fetch-Site`
    /// (every current one sends it); `same-origin`, `same-site` and `none` (typed in the address
    /// bar, a bookmark) pass, anything else is refused. A request without the header (a client
    /// that predates Fetch Metadata, curl) passes: refusing it would break sign-out for them,
    /// and the browsers that matter here all send it.
    static func isSameSiteOrUnknown(_ fetchSite: [String]) -> Bool {
        fetchSite.allSatisfy { ["same-origin", "same-site", "none"].contains($0.lowercased()) }
    }

    /// A protected path without a session: to sign-in, or 401 for scripts.
    static func signInFirst(target: String, json: Bool) -> Response {
        if json { return Self.json(401, ["error": .string("unauthorized")]) }
        let rd = FormEncoding.encode([("rd", target)])
        return Response(status: 302, headers: [("Location", Self.startPath + "?" + rd), ("Cache-Control", "no-store")])
    }

    /// No session (401) or no way to tell (503: the store is away — fail closed, and no
    /// redirect to sign-in, which would only loop).
    static func noSession(_ found: Result<ProxySession?, StoreError>, json: Bool) -> Response {
        if case .failure = found {
            return json ? Self.json(503, ["error": .string("temporarily_unavailable")])
                : CallbackPage.error(status: 503, message: Messages.unavailable)
        }
        return json ? Self.json(401, ["error": .string("unauthorized")]) : Response(status: 401, headers: [("Cache-Control", "no-store")])
    }

    /// Identity headers for the upstream: every client-sent variant removed, ours added.
    /// With server-side sessions, ours came with the deferred decision (`withSession`).
    /// Every proxied request: client-sent identity headers are stripped. A session's own
    /// headers come with the decision (`withSession`), never from here.
    public func upstreamEdits(_ request: borrowing RequestView, _ edits: inout HeaderEdits) {
        edits.removeMatching = strip
    }

    /// The upstream request's identity headers for `s`, the signed assertion last. Call on `loop`.
    func identityHeaders(_ s: ProxySession, on loop: EventLoop) -> [(name: String, value: String)] {
        var out = IdentityHeaders.headers(for: s, passAccessToken: settings.passAccessToken,
                                          passAuthorization: settings.passAccessToken, names: settings.headers).map { (name: $0.0, value: $0.1) }
        if let assertion = assertionHeader(s, on: loop) { out.append(assertion) }
        return out
    }

    /// The `jwt_assertion` header for `s`, nil without that setting (or if signing failed).
    func assertionHeader(_ s: ProxySession, on loop: EventLoop) -> (name: String, value: String)? {
        guard let assertions, let token = assertions.assertion(for: s, user: IdentityHeaders.userValue(s, settings.headers.userClaim),
                                                                on: loop, now: clock()) else { return nil }
        return (settings.headers.jwtAssertion, token)
    }

    /// The keys that verify `jwt_assertion` tokens (`{"keys":[…]}`), nil when none are signed.
    public var assertionJWKS: [UInt8]? { assertions?.jwks }

    // MARK: Sign-in

    /// - Parameter cookies: the request's, to find this browser's other state cookies (the
    ///   oldest are cleared beyond `maximumStateCookies`).
    func start(query: String, host: String, cookies: [(name: String, value: String)]) -> Response {
        // More than one provider and none asked for: the site offers the choice (an unchanged
        // site has no link of its own for a second provider).
        if Self.queryValue(query, "provider") == nil && providers.count > 1 { return chooser(query: query) }
        let requested = Self.queryValue(query, "provider") ?? providers.keys.sorted().first ?? ""
        guard let provider = providers[requested], let client = provider.appClient,
              let authorize = Self.authorizationEndpoint(provider) else {
            return CallbackPage.error(status: 400, message: "Unknown sign-in provider.")
        }
        let scheme = settings.secure ? "https" : "http"
        var rd = Self.queryValue(query, "rd").flatMap(redirects.validate) ?? "/"
        // One sign-in across sub-domains: the callback may answer on another host
        // (`web_redirect_uri`), where a bare path would land. The path is made absolute on the
        // host the sign-in started from — only when that host is an allowed redirect host too.
        if settings.cookieDomain != nil, rd.hasPrefix("/"), let absolute = redirects.validate("\(scheme)://\(host)\(rd)") {
            rd = absolute
        }
        guard let state = try? SecureRandom.bytes(32), let nonce = try? SecureRandom.bytes(16),
              let verifier = try? SecureRandom.bytes(32) else {
            return CallbackPage.error(status: 500, message: Messages.internalError)
        }
        let record = StateRecord(state: Base64URL.encode(state), nonce: Base64URL.encode(nonce), rd: rd,
                                 provider: provider.name, expiresAt: clock() + Self.stateLifetime,
                                 verifier: Base64URL.encode(verifier),
                                 redirectURI: settings.webRedirectURI ?? "\(scheme)://\(host)\(Self.webCallbackPath)")
        let name = stateCookieName(for: record.state)
        guard let sealed = try? stateSealers[0].seal(record.json(), authenticating: Array(name.utf8)) else {
            return CallbackPage.error(status: 500, message: Messages.internalError)
        }
        // PKCE (S256) on the web client too: a code intercepted on its way back is useless
        // without the verifier, which never leaves the sealed state cookie.
        let offline = offlineAccessParameters(provider)
        let location = authorize + (authorize.contains("?") ? "&" : "?") + FormEncoding.encode([
            ("response_type", "code"), ("client_id", client.clientID),
            ("redirect_uri", record.redirectURI),
            ("scope", offline.scope), ("state", record.state), ("nonce", record.nonce),
            ("code_challenge", Base64URL.encode(SHA256.hash(record.verifier))), ("code_challenge_method", "S256"),
        ] + offline.extra)
        let attributes = stateCookieAttributes + "; Max-Age=\(Self.stateLifetime); HttpOnly; SameSite=Lax" + (settings.secure ? "; Secure" : "")
        let cleared = stateCookiesToClear(cookies).map { ("Set-Cookie", clearStateCookie(named: $0)) }
        return Response(status: 302, headers: [("Location", location), ("Cache-Control", "no-store")] + cleared
                        + [("Set-Cookie", name + "=" + Base64URL.encode(sealed) + attributes)])
    }

    /// After a verified callback in session mode: this browser must hold the state cookie of the
    /// callback's state, given by /_oauth/start (login CSRF), then the session is created. `completion` runs on
    /// `loop`.
    /// - Parameter platform: the native platform whose client redeemed the code (a refresh
    ///   token, if any, belongs to that client).
    func signIn(_ identity: VerifiedIdentity, state: String, provider: String, platform: String,
                cookies: [(name: String, value: String)], on loop: EventLoop,
                _ completion: @escaping (Result<Response, CallbackFailure>) -> Void) {
        guard let record = stateRecord(cookies, state: state), record.provider == provider else {
            return completion(.failure(Self.stateMismatch))
        }
        establish(identity, record: record, platform: platform, cookies: cookies, on: loop, completion)
    }

    static let stateMismatch = CallbackFailure(
        .client, code: "state_mismatch",
        userMessage: "This sign-in was not started in this browser. Please start signing in again.",
        logDetail: "no state cookie in this browser for the callback's state (login CSRF refused)")

    /// Creates the session for a verified sign-in whose state cookie matched: the session
    /// cookie (or the store record and its reference), that state cookie cleared (single use),
    /// and the redirect to the remembered `rd`.
    /// `platform`: `web`, or the native platform whose client redeemed the code.
    func establish(_ identity: VerifiedIdentity, record: StateRecord, platform: String, cookies: [(name: String, value: String)],
                   on loop: EventLoop, _ completion: @escaping (Result<Response, CallbackFailure>) -> Void) {
        let now = clock()
        var session = ProxySession(provider: record.provider, subject: identity.subject, email: identity.email,
                                   emailVerified: identity.emailVerified ?? false, name: identity.name,
                                   preferredUsername: identity.preferredUsername, groups: groups(of: identity),
                                   hostedDomain: identity.claims["hd"]?.stringValue,
                                   accessToken: settings.passAccessToken ? identity.tokens.accessToken : nil,
                                   issuedAt: now, expiresAt: now + settings.lifetimeSeconds)
        // Only for RP-initiated logout's id_token_hint: a cookie without it stays ~1 KiB smaller.
        if settings.signOutAtProvider { session.idToken = identity.tokens.idToken }
        session.ruleClaims = ruleClaims(identity.claims)
        // Checked before any cookie or store record exists: a refused account leaves nothing.
        if let r = refusal(session.accessSubject, now: loop.nowNanoseconds) {
            noteRefusal(r, provider: record.provider, subject: session.accessSubject, during: "sign_in", now: loop.nowNanoseconds)
            return completion(.failure(Self.refusedAtSignIn))
        }
        let present = cookies.map(\.name).filter(cookie.isSessionCookieName)
        let done: (Result<[String], CallbackFailure>) -> Void = { [self] result in
            completion(result.map { setCookies in
                Response(status: 302, headers: [("Location", record.rd)]
                         + setCookies.map { ("Set-Cookie", $0) } + [("Set-Cookie", clearStateCookie(named: stateCookieName(for: record.state)))])
            })
        }
        guard serverSide else {
            guard let setCookies = try? cookie.setCookies(for: session, now: now, present: present) else {
                return done(.failure(Self.unsealable))
            }
            return done(.success(setCookies))
        }
        store(withRefreshState(session, identity, platform: platform, now: now), present: present, on: loop, done)
    }

    static let unsealable = CallbackFailure(.internal, code: "server_error", userMessage: Messages.internalError,
                                            logDetail: "session cookie could not be sealed")

    // MARK: Helpers

    /// The cookie-borne session; never one with server-side sessions (a whole session sealed
    /// in a cookie could not be ended at sign-out, so it is not accepted there).
    /// The cookie session among `cookies`, if one opens and is live. With `loop`, an opened
    /// cookie is remembered for that loop's next requests (`opened`).
    func session(_ cookies: [(name: String, value: String)], on loop: EventLoop? = nil) -> ProxySession? {
        guard !serverSide else { return nil }
        let mine = cookies.filter { cookie.isSessionCookieName($0.name) }
        guard !mine.isEmpty else { return nil }
        let now = clock()
        guard let loop else { return cookie.session(from: mine, now: now).flatMap(ofConfiguredProvider) }
        // Keyed by names and values, in the order sent (another order is only a miss): the
        // same value under another name (`_oauth_session_0=<a whole cookie>`) does not open,
        // so it must not find the entry of the name it does open under.
        let key = mine.count == 1 ? mine[0].name + "=" + mine[0].value : mine.map { $0.name + "=" + $0.value }.joined(separator: ";")
        return opened.value(for: key, on: loop, isFresh: { now < $0.expiresAt }) { cookie.session(from: mine, now: now) }
            .flatMap(ofConfiguredProvider)
    }

    /// A session whose provider a reload removed is over: the operator took that way in away,
    /// and its sessions must not live on until their lifetime ends.
    func ofConfiguredProvider(_ session: ProxySession) -> ProxySession? {
        providers[session.provider] == nil ? nil : session
    }

    static func authorizationEndpoint(_ p: ProviderSettings) -> String? {
        if let a = p.endpoints.authorization { return a }
        switch p.kind {
        case .google: return "https://accounts.google.com/o/oauth2/v2/auth"
        case .apple: return "https://appleid.apple.com/auth/authorize"
        case .facebook: return "https://www.facebook.com/\(GraphAPIVersions.newest)/dialog/oauth"
        case .oidc: return nil
        }
    }

    /// `Cookie` header values → (name, value) pairs (RFC 6265 §5.4 shape: `a=b; c=d`). Runs
    /// on every request in session mode, so over UTF-8 bytes: splitting the String by
    /// Character cost more than opening the session cookie itself.
    static func cookies(_ headers: [String]) -> [(name: String, value: String)] {
        var out: [(name: String, value: String)] = []
        for var header in headers {
            header.withUTF8 { bytes in
                var i = 0
                while i < bytes.count {
                    while i < bytes.count && bytes[i] == 0x20 { i += 1 }
                    let start = i
                    var equals = -1
                    while i < bytes.count && bytes[i] != 0x3B {
                        if equals < 0 && bytes[i] == 0x3D { equals = i }
                        i += 1
                    }
                    if equals >= 0 {
                        out.append((String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<equals]), as: UTF8.self),
                                    String(decoding: UnsafeBufferPointer(rebasing: bytes[(equals + 1)..<i]), as: UTF8.self)))
                    }
                    i += 1
                }
            }
        }
        return out
    }

    static func queryValue(_ query: String?, _ name: String) -> String? {
        guard let query, case .success(let fields) = QueryDecoding.decode(query) else { return nil }
        return fields.first { $0.name == name }?.value
    }

    static func json(_ status: Int, _ object: [String: JSONValue]) -> Response {
        Response(status: status, headers: [("Content-Type", "application/json"), ("Cache-Control", "no-store")],
                 body: JSONValue.object(object).serialized())
    }
}

/// What the state cookie holds between /_oauth/start and the callback.
struct StateRecord: Equatable {
    let state: String
    let nonce: String
    let rd: String
    let provider: String
    let expiresAt: Int64
    /// The web sign-in's PKCE verifier (S256 challenge sent to the provider).
    let verifier: String
    /// The web sign-in's redirect URI, exactly as sent (the token request must repeat it).
    let redirectURI: String

    func json() -> [UInt8] {
        JSONValue.object(["s": .string(state), "n": .string(nonce), "r": .string(rd), "p": .string(provider),
                          "e": .number(String(expiresAt)), "v": .string(verifier), "u": .string(redirectURI)]).serialized()
    }

    init(state: String, nonce: String, rd: String, provider: String, expiresAt: Int64, verifier: String, redirectURI: String) {
        self.state = state
        self.nonce = nonce
        self.rd = rd
        self.provider = provider
        self.expiresAt = expiresAt
        self.verifier = verifier
        self.redirectURI = redirectURI
    }

    init?(json: [UInt8]) {
        guard let o = (try? JSONParser.parse(json))?.objectValue,
              let s = o["s"]?.stringValue, let n = o["n"]?.stringValue, let r = o["r"]?.stringValue,
              let p = o["p"]?.stringValue, let e = o["e"]?.int64Value,
              let v = o["v"]?.stringValue, let u = o["u"]?.stringValue else { return nil }
        self.init(state: s, nonce: n, rd: r, provider: p, expiresAt: e, verifier: v, redirectURI: u)
    }
}
