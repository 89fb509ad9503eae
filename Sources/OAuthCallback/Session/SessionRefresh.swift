/// When and how a server-side session is re-checked with its provider
/// (`oauth.session.refresh_interval`), as pure functions of the record, the setting and the
/// clock; `SessionLayer+Refresh.swift` performs what they decide.
///
///     lookup → decision: serve | end | tryLock → (lock taken?) refresh | serve → outcome → record
///
/// - Due: `interval` seconds after the sign-in or the last successful refresh.
/// - A session without a refresh token (the IdP gave none, or it was made before refresh was
///   configured) cannot be re-checked: it ends when it falls due (fail closed). Sign-in
///   already caps such a session's lifetime at one interval.
/// - After the IdP was unavailable, the next try waits `retryDelay` (at most a minute), so an
///   outage costs the IdP one call per session per minute, not one per request.
/// - One refresh per session at a time (single flight, across instances): a request takes the
///   store lock `refresh:<hash of the session id>` with `setIfAbsent` first. The lock is never
///   deleted, only expires (`lockTTL`): a request that read the record just before a refresh
///   wrote it cannot take the lock right after and refresh again with the rotated-out token.
///   (If it still does, past the lock's expiry, its `invalid_grant` re-reads the record and
///   finds the rotated token: see `SessionLayer+Refresh.swift`.) A request that does not get
///   the lock serves the session as it is: the holder is refreshing it now, so a session is
///   served unchecked for at most `interval` + `lockTTL` (+ the IdP timeout).
enum SessionRefresh {
    enum Decision: Equatable {
        /// Not due (or refresh is off, or waiting after an unavailable IdP): serve as is.
        case serve
        /// Due, with a refresh token: try the lock, then refresh.
        case tryLock
        /// Due without a refresh token: the session ends.
        case end
    }

    static func decision(_ session: ProxySession, interval: Int64?, now: Int64) -> Decision {
        guard let interval else { return .serve }
        let checked = session.refreshedAt ?? session.issuedAt
        guard now - checked >= interval else { return .serve }
        guard session.refreshToken != nil, session.refreshClient != nil else { return .end }
        if let failed = session.refreshFailedAt, now - failed < retryDelay(interval) { return .serve }
        return .tryLock
    }

    /// What a due request does once it asked for the lock: `true` it took it, `false` another
    /// request holds it, nil the store could not answer (it just answered the lookup: serve,
    /// and a later request tries again).
    static func afterLock(_ taken: Bool?) -> Decision { taken == true ? .tryLock : .serve }

    /// How long after an unavailable IdP the next refresh waits: a minute, or the interval
    /// when shorter.
    static func retryDelay(_ interval: Int64) -> Int64 { max(1, min(interval, 60)) }

    /// The lock's lifetime: 30 s (longer than a refresh normally takes), or the interval when
    /// shorter, so a short interval is not stretched by its own lock.
    static func lockTTL(_ interval: Int64) -> Int64 { max(1, min(interval, 30)) }

    /// What the answer of the IdP does to the session.
    enum Outcome: Equatable {
        /// Renewed and still admitted: write the record, serve it.
        case renewed
        /// Renewed, but the access rules refuse the claims now: the session ends (this request
        /// gets a 403).
        case refused
        /// `invalid_grant`, or an answer that does not vouch for this user: the session ends,
        /// unless the record's refresh token changed meanwhile (another request renewed it).
        case ended
        /// The IdP could not answer: keep serving, note the failure, try again later.
        case unavailable
    }

    /// The session as a successful refresh leaves it: new access token (kept only when passed
    /// upstream), the rotated refresh token if the IdP sent one, and — when the refresh came
    /// with claims — the claims a sign-in would take from them (they replace the old ones: a
    /// group or address the IdP no longer lists is gone). `groups` reads the configured claim.
    static func renewed(_ session: ProxySession, with identity: RefreshedIdentity, now: Int64, passAccessToken: Bool,
                        keepIDToken: Bool, groups: ([String: JSONValue]) -> [String],
                        ruleClaims: ([String: JSONValue]) -> [String: JSONValue]) -> ProxySession {
        var s = session
        s.refreshedAt = now
        s.refreshFailedAt = nil
        if let rotated = identity.tokens.refreshToken, !rotated.isEmpty { s.refreshToken = rotated }
        if passAccessToken { s.accessToken = identity.tokens.accessToken }
        if keepIDToken, let idToken = identity.tokens.idToken { s.idToken = idToken }
        if let claims = identity.claims {
            s.email = claims["email"]?.stringValue
            switch claims["email_verified"] {
            case .bool(let b)?: s.emailVerified = b
            case .string("true")?: s.emailVerified = true
            default: s.emailVerified = false
            }
            s.name = claims["name"]?.stringValue
            s.preferredUsername = claims["preferred_username"]?.stringValue
            s.groups = groups(claims)
            s.hostedDomain = claims["hd"]?.stringValue
            s.ruleClaims = ruleClaims(claims)
        }
        return s
    }

    /// The outcome of a refresh; `refused` says whether the access rules turn down the renewed
    /// claims (only asked for a renewal).
    static func outcome(_ result: RefreshResult, refused: (RefreshedIdentity) -> Bool) -> Outcome {
        switch result {
        case .renewed(let identity): return refused(identity) ? .refused : .renewed
        case .invalidGrant, .failed: return .ended
        case .unavailable: return .unavailable
        }
    }

    /// After an `invalid_grant` or failure: the record as it is now in the store, read again.
    /// Another request (or instance) may have refreshed it meanwhile with the same token — the
    /// IdP rotated it, and our try came second. Then that record is the session; otherwise the
    /// session ends.
    static func survivor(reread: ProxySession?, usedToken: String, now: Int64) -> ProxySession? {
        guard let r = reread, now < r.expiresAt, let token = r.refreshToken, token != usedToken else { return nil }
        return r
    }
}
