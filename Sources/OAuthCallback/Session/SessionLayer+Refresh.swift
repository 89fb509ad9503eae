import ProxyCore

/// Sessions that follow the IdP (`oauth.session.refresh_interval`, server-side sessions only):
/// what `SessionRefresh` decides, performed against the store and the provider.
///
/// - Sign-in (`establish`) keeps the token response's refresh token in the store record, with
///   the client that obtained it (`web`, or the native platform); no refresh token → the
///   session lasts one interval.
/// - `/_oauth/start` asks for offline access (`offlineAccessParameters`).
/// - A request whose session is due refreshes it inline, before it is answered: a user the IdP
///   disabled, or who lost the group a rule asks for, is refused at that very request.
extension SessionLayer {
    /// What `/_oauth/start` adds so the provider issues a refresh token, when refresh is on.
    /// - google: `access_type=offline` and `prompt=consent` — Google returns a refresh token
    ///   only on a consent, and only to a request that asks for offline access (oauth2-proxy does
    ///   the same). The consent screen then shows at every sign-in.
    /// - oidc: the `offline_access` scope (OIDC Core §11), always: the scope is asked for even
    ///   when the discovery document's `scopes_supported` does not list it (the list is
    ///   optional and often partial, and `/_oauth/start` answers without waiting for discovery).
    ///   An IdP that refuses the scope fails the sign-in with `invalid_scope`: turn refresh off.
    ///   No `prompt=consent` (Keycloak, Okta, Auth0, Entra issue the token without it; it
    ///   would put a consent screen in front of every sign-in).
    func offlineAccessParameters(_ provider: ProviderSettings) -> (scope: String, extra: [(String, String)]) {
        let base = "openid email profile"
        guard settings.refreshIntervalSeconds != nil, serverSide else { return (base, []) }
        switch provider.kind {
        case .google: return (base, [("access_type", "offline"), ("prompt", "consent")])
        case .oidc: return (base + " offline_access", [])
        case .facebook, .apple: return (base, [])
        }
    }

    /// The new session's refresh state at sign-in. `platform`: the client that redeemed the
    /// code (`web`, or the native platform).
    func withRefreshState(_ session: ProxySession, _ identity: VerifiedIdentity, platform: String, now: Int64) -> ProxySession {
        guard let interval = settings.refreshIntervalSeconds, serverSide else { return session }
        var s = session
        s.refreshedAt = now
        if let token = identity.tokens.refreshToken, !token.isEmpty {
            s.refreshToken = token
            s.refreshClient = platform
        } else {
            // Nothing to re-check the user with: fail closed, the session lasts one interval
            // (then a sign-in, a redirect round trip while the IdP's own session lasts).
            s.expiresAt = min(s.expiresAt, now + interval)
            log.info("session without a refresh token", [
                "provider": s.provider, "client": platform, "lasts_s": String(s.expiresAt - now),
                "setting": "oauth.session.refresh_interval",
                "detail": "the token response had no refresh_token, so the session cannot be re-checked and ends at the interval",
            ])
        }
        return s
    }

    static func refreshLockKey(_ id: [UInt8]) -> String {
        "refresh:" + ReplayGuard.hex(SHA256.hash(id))
    }

    /// The client a session's refresh must use: the one that obtained the token, from the
    /// configuration as it is now (its secret included). nil when it is no longer configured.
    static func refreshClient(_ provider: ProviderSettings, platform: String) -> NativeClient? {
        guard platform == "web" else { return provider.native[platform] }
        return provider.appClient.map {
            NativeClient(clientID: $0.clientID, redirectURI: "", clientSecret: $0.clientSecret, clientAuth: $0.clientAuth)
        }
    }

    /// Refreshes `session` (record `id`, due) when this request takes the lock; otherwise, and
    /// whenever the IdP cannot answer, serves it as it is. `completion`: the session to serve,
    /// nil when it ended.
    func refresh(_ session: ProxySession, id: [UInt8], on loop: EventLoop,
                 _ completion: @escaping (Result<ProxySession?, StoreError>) -> Void) {
        guard let interval = settings.refreshIntervalSeconds else { return completion(.success(session)) }
        store.setIfAbsent(key: Self.refreshLockKey(id), value: Array("1".utf8), ttlSeconds: SessionRefresh.lockTTL(interval),
                          on: loop) { [self] taken in
            guard SessionRefresh.afterLock(try? taken.get()) == .tryLock else { return completion(.success(session)) }
            guard let provider = providers[session.provider], let token = session.refreshToken,
                  let platform = session.refreshClient,
                  let implementation = identityProviders[session.provider] as? any SessionRefreshing,
                  let client = Self.refreshClient(provider, platform: platform) else {
                let setting = "providers.\(session.provider)" + (session.refreshClient.map { $0 == "web" ? ".app_client" : ".native.\($0)" } ?? "")
                return settle(.failed(CallbackFailure(.config, code: "config_error", userMessage: Messages.internalError,
                                                      logDetail: "the client that obtained the session's refresh token is no longer configured",
                                                      setting: setting)),
                              session, id: id, token: session.refreshToken ?? "", on: loop, completion)
            }
            let request = RefreshRequest(provider: provider, platform: platform, client: client, refreshToken: token,
                                         subject: session.subject)
            implementation.refresh(request, on: loop) { [self] result in
                settle(result, session, id: id, token: token, on: loop, completion)
            }
        }
    }

    /// Records what the IdP answered and hands on the session to serve.
    private func settle(_ result: RefreshResult, _ session: ProxySession, id: [UInt8], token: String, on loop: EventLoop,
                        _ completion: @escaping (Result<ProxySession?, StoreError>) -> Void) {
        let now = clock()
        let key = Self.storeKey(id)
        let provider = session.provider
        let log = self.log
        var renewed = session
        if case .renewed(let identity) = result {
            renewed = SessionRefresh.renewed(session, with: identity, now: now, passAccessToken: settings.passAccessToken,
                                             keepIDToken: settings.signOutAtProvider, groups: groups(_:),
                                             ruleClaims: ruleClaims(_:))
            if renewed.seenAt != nil { renewed.seenAt = now }
        }
        let refused = { [self] (_: RefreshedIdentity) in refusal(renewed.accessSubject, now: loop.nowNanoseconds) != nil }
        switch SessionRefresh.outcome(result, refused: refused) {
        case .renewed:
            metrics?.sessionRefreshed(provider, .renewed)
            log.debug("session refreshed", ["provider": provider])
            // Only over a live record: one deleted while the IdP answered (sign-out) stays deleted.
            store.replace(key: key, value: SessionCookie.payload(renewed).serialized(), ttlSeconds: storeTTL(renewed, now: now),
                          ifHolding: nil, on: loop) { written in
                switch written {
                case .success(true):
                    completion(.success(renewed))
                case .success(false):
                    log.debug("session ended during its refresh", ["provider": provider])
                    completion(.success(nil))
                case .failure(let error):
                    // Served renewed; unrecorded, the next request refreshes again (and, if the
                    // IdP rotated the token, finds it refused: the session then ends).
                    log.warn("session refresh not recorded", ["provider": provider, "reason": "store_unavailable",
                                                              "detail": error.description])
                    completion(.success(renewed))
                }
            }
        case .refused:
            metrics?.sessionRefreshed(provider, .refused)
            // Ended for good; this request is answered with the renewed claims, which the
            // caller's own rule check refuses (403) — and counts and logs, once, as at any request.
            endSession(key, on: loop) { completion(.success(renewed)) }
        case .unavailable:
            metrics?.sessionRefreshed(provider, .idpUnavailable)
            let retry = SessionRefresh.retryDelay(settings.refreshIntervalSeconds ?? 60)
            if case .unavailable(let failure) = result,
               refreshFailureLog.isDue(provider: provider, setting: "unavailable", now: loop.nowNanoseconds) {
                log.warn("session refresh failed, session kept", [
                    "provider": provider, "reason": "idp_unavailable", "detail": failure.logDetail,
                    "retry_after_s": String(retry), "setting": failure.setting ?? "oauth.session.refresh_interval",
                ])
            }
            var kept = session
            kept.refreshFailedAt = now
            store.replace(key: key, value: SessionCookie.payload(kept).serialized(), ttlSeconds: storeTTL(kept, now: now),
                          ifHolding: nil, on: loop) { written in
                completion(.success(written == .success(false) ? nil : session))
            }
        case .ended:
            // Another request (or instance) may have refreshed first with this token, which the
            // IdP then rotated: its record is the session.
            store.get(key: key, on: loop) { [self] reread in
                let current = (try? reread.get())?.flatMap { (try? JSONParser.parse($0)).flatMap(SessionCookie.session(from:)) }
                if let survivor = SessionRefresh.survivor(reread: current, usedToken: token, now: clock()) {
                    return completion(.success(survivor))
                }
                switch result {
                case .failed(let failure):
                    metrics?.sessionRefreshed(provider, .failed)
                    if refreshFailureLog.isDue(provider: provider, setting: failure.code, now: loop.nowNanoseconds) {
                        log.log(failure.source == .config ? .error : .warn, "session refresh failed, session ended", [
                            "provider": provider, "source": failure.source.rawValue, "reason": failure.code,
                            "detail": failure.logDetail, "setting": failure.setting ?? "oauth.session.refresh_interval",
                        ])
                    }
                default:
                    metrics?.sessionRefreshed(provider, .ended)
                    log.info("session ended by the provider", ["provider": provider, "reason": "invalid_grant"])
                }
                endSession(key, on: loop) { completion(.success(nil)) }
            }
        }
    }

    /// Deletes an ended session's record; a failure leaves it to the next request (which asks
    /// the IdP again and gets the same answer).
    func endSession(_ key: String, on loop: EventLoop, _ then: @escaping () -> Void) {
        let log = self.log
        store.delete(key: key, on: loop) { result in
            if case .failure(let error) = result {
                log.warn("ended session not deleted", ["reason": "store_unavailable", "detail": error.description])
            }
            then()
        }
    }
}
