import ProxyCore

/// Server-side sessions: the record in the store under `session:` + hex SHA-256 of a random
/// 256-bit id, the cookie carrying only that id, sealed. The store's TTL is the session's
/// lifetime; sign-out deletes the record, so a copied cookie stops working everywhere at once.
///
/// Fail closed: when the store cannot answer, a protected path gets 503 (never a redirect to
/// sign-in, which would only loop back to the same outage), `/_oauth/auth` and
/// `/_oauth/userinfo` get 503, and sign-out says it could not end the session (and keeps the
/// cookie, so trying again later can still end it).
extension SessionLayer {
    /// What a request decided on its session becomes.
    enum SessionAnswer {
        /// The proxy answers.
        case respond(Response)
        /// Upstream, with this session's identity headers (none for nil).
        case pass(ProxySession?)
    }

    /// Runs `answer` with the request's session: at once for cookie sessions (and for a request
    /// without a session cookie), after a store lookup for a server-side one. Call on `loop`.
    /// With `revocation`, a session found is first looked up in the store's revocation markers
    /// (`SessionRevocation`): a revoked one is no session, a store that cannot say fails closed.
    func withSession(_ cookies: [(name: String, value: String)], on loop: EventLoop,
                     _ answer: @escaping @Sendable (Result<ProxySession?, StoreError>) -> SessionAnswer) -> RequestDecision? {
        guard serverSide, let id = cookie.reference(from: cookies.filter { cookie.isSessionCookieName($0.name) }) else {
            let found = session(cookies, on: loop)
            if let revocation, let s = found {
                return .deferred { [self] sink in
                    revocation.isRevoked(s, on: loop) { revoked in self.deliver(answer(Self.unlessRevoked(s, revoked)), to: sink, on: loop) }
                }
            }
            switch answer(.success(found)) {
            case .respond(let response): return .respond(response)
            case .pass(nil): return nil
            // The cookie was opened once, here: its identity headers go with the decision.
            case .pass(let s?):
                var edits = HeaderEdits()
                edits.add = identityHeaders(s, on: loop)
                return .proceed(UpstreamRewrite(edits: edits))
            }
        }
        return .deferred { [self] sink in
            lookup(id, on: loop) { found in self.deliver(answer(found), to: sink, on: loop) }
        }
    }

    /// `session`, unless a revocation marker ends it (or the store could not say: fail closed).
    static func unlessRevoked(_ session: ProxySession, _ revoked: Result<Bool, StoreError>) -> Result<ProxySession?, StoreError> {
        revoked.map { $0 ? nil : session }
    }

    private func deliver(_ answer: SessionAnswer, to sink: ResponseSink, on loop: EventLoop) {
        switch answer {
        case .respond(let response): sink.respond(response)
        case .pass(let s):
            var edits = HeaderEdits()
            if let s { edits.add = identityHeaders(s, on: loop) }
            sink.proceed(UpstreamRewrite(edits: edits))
        }
    }

    static func storeKey(_ id: [UInt8]) -> String {
        "session:" + ReplayGuard.hex(SHA256.hash(id))
    }

    /// The live session for `id`, nil when there is none (signed out, expired, never existed,
    /// revoked). With `refresh_interval`, a due session is refreshed first
    /// (`SessionLayer+Refresh.swift`), unless `refreshing` is false (sign-out only needs the
    /// record) — and only once the revocation markers (with `revocation`) say it lives: a
    /// revoked session costs no call to its IdP.
    func lookup(_ id: [UInt8], refreshing: Bool = true, on loop: EventLoop,
                _ completion: @escaping (Result<ProxySession?, StoreError>) -> Void) {
        let now = clock()
        let log = self.log
        store.get(key: Self.storeKey(id), on: loop) { [self] result in
            switch result {
            case .success(let bytes?):
                let session = (try? JSONParser.parse(bytes)).flatMap(SessionCookie.session(from:))
                guard let live = session.flatMap({ now < $0.expiresAt ? $0 : nil }).flatMap(ofConfiguredProvider) else {
                    return completion(.success(nil))
                }
                if let idle = settings.idleTimeoutSeconds, let seen = live.seenAt {
                    // The store's TTL ends an idle session; this check covers a store whose clock
                    // or TTL granularity lags.
                    guard now - seen < idle else { return completion(.success(nil)) }
                }
                guard let revocation else { return serve(live, id: id, read: bytes, refreshing: refreshing, now: now, on: loop, completion) }
                revocation.isRevoked(live, on: loop) { [self] revoked in
                    switch revoked {
                    case .failure(let error): completion(.failure(error))
                    case .success(true): completion(.success(nil))
                    case .success(false): serve(live, id: id, read: bytes, refreshing: refreshing, now: now, on: loop, completion)
                    }
                }
            case .success(nil):
                completion(.success(nil))
            case .failure(let error):
                if storeFailureLog.isDue(provider: "session", setting: "lookup", now: loop.nowNanoseconds) {
                    log.warn("session lookup failed", ["reason": "store_unavailable", "detail": error.description, "setting": "store"])
                }
                completion(.failure(error))
            }
        }
    }

    /// A live session's record, as `read`: refreshed when due, its idle expiry slid forward.
    private func serve(_ live: ProxySession, id: [UInt8], read bytes: [UInt8], refreshing: Bool, now: Int64, on loop: EventLoop,
                       _ completion: @escaping (Result<ProxySession?, StoreError>) -> Void) {
        switch SessionRefresh.decision(live, interval: refreshing ? settings.refreshIntervalSeconds : nil, now: now) {
        case .end:
            return endSession(Self.storeKey(id), on: loop) { completion(.success(nil)) }
        case .tryLock:
            // No touch here: the refresh writes the record (seenAt included), and a touch
            // landing after it would put the rotated-out refresh token back.
            return refresh(live, id: id, on: loop, completion)
        case .serve:
            break
        }
        if let idle = settings.idleTimeoutSeconds, let seen = live.seenAt, now - seen >= Self.touchInterval(idle) {
            touch(live, id: id, read: bytes, now: now, on: loop)
        }
        completion(.success(live))
    }

    // MARK: Idle expiry (`idle_timeout`, server-side sessions only)

    /// How long the store keeps a session: its lifetime, or the idle timeout from now when that
    /// ends sooner (the record then slides forward as the session is used).
    func storeTTL(_ session: ProxySession, now: Int64) -> Int64 {
        let remaining = session.expiresAt - now
        guard let idle = settings.idleTimeoutSeconds else { return max(1, remaining) }
        return max(1, min(idle, remaining))
    }

    /// How stale `seenAt` may grow before a request writes it again: a minute, or a third of a
    /// short idle timeout. A write per request would cost a store round trip on every page.
    static func touchInterval(_ idle: Int64) -> Int64 { min(60, max(1, idle / 3)) }

    /// Slides the session's expiry forward; a failure only means it may end a little early.
    /// Only over the record as it was `read`: anything written since stands — a refresh's
    /// rotated token, another request's touch — and a record deleted since (sign-out, a
    /// session the rules ended) is not brought back.
    private func touch(_ session: ProxySession, id: [UInt8], read: [UInt8], now: Int64, on loop: EventLoop) {
        var seen = session
        seen.seenAt = now
        let log = self.log, failures = storeFailureLog
        store.replace(key: Self.storeKey(id), value: SessionCookie.payload(seen).serialized(), ttlSeconds: storeTTL(seen, now: now),
                      ifHolding: read, on: loop) { result in
            if case .failure(let error) = result, failures.isDue(provider: "session", setting: "touch", now: loop.nowNanoseconds) {
                log.warn("session activity not recorded", ["reason": "store_unavailable", "detail": error.description, "setting": "store"])
            }
        }
    }

    /// Stores a new session under a fresh id; the `Set-Cookie` values carrying its reference.
    func store(_ session: ProxySession, present: [String], on loop: EventLoop,
               _ completion: @escaping (Result<[String], CallbackFailure>) -> Void) {
        guard let id = try? SecureRandom.bytes(SessionCookie.referenceLength),
              let setCookies = try? cookie.setCookies(reference: id, maxAge: session.expiresAt - session.issuedAt,
                                                      present: present) else {
            return completion(.failure(Self.unsealable))
        }
        var session = session
        session.seenAt = settings.idleTimeoutSeconds == nil ? nil : session.issuedAt
        let record = SessionCookie.payload(session).serialized()
        store.set(key: Self.storeKey(id), value: record, ttlSeconds: storeTTL(session, now: session.issuedAt),
                  on: loop) { result in
            switch result {
            case .success: completion(.success(setCookies))
            case .failure(let error):
                completion(.failure(CallbackFailure(.internal, code: ReplayGuard.storeUnavailableCode, userMessage: Messages.unavailable,
                                                    logDetail: "session not stored: \(error)", retryable: true)))
            }
        }
    }

    /// `/_oauth/sign_out` (GET or POST, same-site: see `isSameSiteOrUnknown`): ends the session
    /// (cookie cleared; the store record deleted with server-side sessions) and goes to `rd` —
    /// or, with `sign_out.at_provider`, on to the provider's end-session endpoint, so that its
    /// own sign-in session ends too and the next `/_oauth/start` asks the user again.
    func signOut(cookies: [(name: String, value: String)], rd: String, on loop: EventLoop,
                 _ completion: @escaping (Response) -> Void) {
        let present = cookies.map(\.name).filter(cookie.isSessionCookieName)
        let clearing = cookie.clearingCookies(present: present).map { (name: "Set-Cookie", value: $0) }
        let finish: (ProxySession?) -> Void = { [self] ended in
            signedOutTarget(ended, rd: rd, on: loop) { location in
                completion(Response(status: 302, headers: [("Location", location), ("Cache-Control", "no-store")] + clearing))
            }
        }
        guard serverSide, let id = cookie.reference(from: cookies.filter { cookie.isSessionCookieName($0.name) }) else {
            return finish(settings.signOutAtProvider ? session(cookies) : nil)
        }
        let log = self.log
        let delete = { [self] (ended: ProxySession?) in
            store.delete(key: Self.storeKey(id), on: loop) { result in
                switch result {
                case .success: finish(ended)
                case .failure(let error):
                    log.warn("sign-out failed", ["reason": "store_unavailable", "detail": error.description])
                    completion(CallbackPage.error(status: 503, message: "Signing out is temporarily unavailable. Please try again in a moment.",
                                                  title: "Not signed out"))
                }
            }
        }
        guard settings.signOutAtProvider else { return delete(nil) }
        lookup(id, refreshing: false, on: loop) { found in delete(try? found.get()) }
    }

    /// Where a sign-out lands: `rd`, or the ended session's provider's end-session endpoint
    /// with `client_id`, `id_token_hint` (when the session kept it) and the configured
    /// `post_logout_redirect_uri` (RP-Initiated Logout 1.0 §2). `client_id` is the client the
    /// hint was issued to — after a native sign-in, the native client, not the app's web
    /// client: the provider refuses a hint whose audience is not `client_id`.
    private func signedOutTarget(_ ended: ProxySession?, rd: String, on loop: EventLoop, _ done: @escaping (String) -> Void) {
        guard settings.signOutAtProvider, let ended, let provider = providers[ended.provider],
              let endpoints = identityProviders[ended.provider] as? any EndSessionProviding else { return done(rd) }
        let postLogout = settings.postLogoutRedirectURI
        endpoints.endSessionEndpoint(on: loop) { url in
            guard let url else { return done(rd) }
            var fields: [(String, String)] = []
            if let client = Self.logoutClient(provider, idToken: ended.idToken) { fields.append(("client_id", client)) }
            if let hint = ended.idToken { fields.append(("id_token_hint", hint)) }
            if let postLogout { fields.append(("post_logout_redirect_uri", postLogout)) }
            done(url + (url.contains("?") ? "&" : "?") + FormEncoding.encode(fields))
        }
    }

    /// The configured client the id_token names (`azp`, else `aud`), else the app's web client.
    static func logoutClient(_ provider: ProviderSettings, idToken: String?) -> String? {
        let configured = [provider.appClient?.clientID].compactMap { $0 } + provider.native.values.map(\.clientID)
        if let idToken, let jwt = try? JWT(compact: idToken),
           let named = jwt.audienceCandidates.first(where: configured.contains) {
            return named
        }
        return provider.appClient?.clientID
    }
}
