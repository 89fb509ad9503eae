import ProxyCore

/// API calls from the native app (`oauth.session.bearer_tokens`): a request with
/// `Authorization: Bearer <id_token>` issued to one of a listed provider's native clients passes
/// `protect` when the token verifies — the provider's keys, `iss`, `aud` (and `azp`) a native
/// client id, `exp` — and the access rules (global and per path) hold for the identity in it.
/// The identity headers are set from it as from a session. Never a redirect: a bad token gets
/// 401 JSON with `WWW-Authenticate: Bearer error="invalid_token"`, a refused identity 403 JSON.
/// `extra_jwt_issuers` add issuers that are no provider (`ExtraJWTIssuer`), checked by the same
/// verifier and held to the same rules; a token of one whose keys cannot be had is refused (401,
/// a warning naming the setting), never let by. (oauth2-proxy's `skip_jwt_bearer_tokens` with
/// `extra_jwt_issuers`.)
extension SessionLayer {
    /// What a verified bearer token is for.
    enum BearerUse: Sendable {
        /// The request goes upstream with the token's identity headers.
        case upstream
        /// `/_oauth/auth`, with its per-call restriction: its 202 with the identity, or a bare
        /// 401 / 403, answers instead.
        case forwardAuth(perCall: AccessRule?)
    }

    /// One issuer whose tokens are accepted: a provider (its native client ids) or an
    /// `extra_jwt_issuers` entry (its audiences), and its verifier.
    struct BearerIssuer: Sendable {
        /// The provider's name, or an extra issuer's `iss` (metrics and log lines).
        let provider: String
        let audiences: Set<String>
        let verifier: any IDTokenVerifying
        /// An extra issuer's key setting, named when its keys cannot be had; nil for a provider.
        var keySetting: String? = nil
    }

    static func bearerIssuers(_ oauth: OAuthSettings, _ providers: [String: any IdentityProvider],
                              extra: [ExtraJWTIssuer]) -> [BearerIssuer] {
        let configured = oauth.session?.extraJWTIssuers ?? []
        return (oauth.session?.bearerProviders ?? []).compactMap { name in
            guard let settings = oauth.providers[name], let verifier = providers[name] as? any IDTokenVerifying else { return nil }
            return BearerIssuer(provider: name, audiences: Set(settings.native.values.map(\.clientID)), verifier: verifier)
        } + zip(configured, extra).map { settings, verifier in
            BearerIssuer(provider: settings.issuer, audiences: Set(settings.audiences), verifier: verifier, keySetting: verifier.setting)
        }
    }

    /// The token of `Authorization: Bearer <token>` (scheme case-insensitive), when it looks like a JWT.
    static func bearerToken(_ authorization: String) -> String? {
        guard authorization.count > 7, authorization.prefix(7).lowercased() == "bearer " else { return nil }
        let token = authorization.dropFirst(7).trimming(" ")
        return token.split(separator: ".", omittingEmptySubsequences: false).count == 3 ? token : nil
    }

    /// The decision for a request that carries a bearer token; nil when the token names no
    /// configured issuer and client and the path needs no session: it is then the app's own
    /// business (an app behind may use JWTs of its own), and the request goes on as one
    /// without a token.
    func bearerDecision(_ token: String, needed: Bool, pathRules: [PathAccessRule], for use: BearerUse = .upstream,
                        on loop: EventLoop) -> RequestDecision? {
        // Which provider and client: from the token's own azp/aud, before any signature work
        // (a token for no configured client costs nothing); the signature then decides.
        guard let (issuer, audience) = bearerAudience(token) else {
            guard needed else { return nil }
            metrics?.bearerToken("unknown", result: "invalid")
            return .respond(Self.invalidBearer)
        }
        return .deferred { [self] sink in
            issuer.verifier.verifyIDToken(token, audience: audience, on: loop) { [self] result in
                let claims: VerifiedClaims
                switch result {
                case .success(let c): claims = c
                case .failure(let failure):
                    // An extra issuer's keys missing for good (a discovery document naming
                    // another issuer) count as unavailable too: either way the token is unchecked.
                    let unavailable = failure.retryable || (issuer.keySetting != nil && failure.code == "idp_unavailable")
                    metrics?.bearerToken(issuer.provider, result: unavailable ? "unavailable" : "invalid")
                    if refusalLog.isDue(provider: issuer.provider, setting: "bearer " + failure.code, now: loop.nowNanoseconds) {
                        if unavailable, let setting = issuer.keySetting {
                            log.warn("bearer token refused: the issuer's keys cannot be had", [
                                "issuer": issuer.provider, "reason": failure.code, "detail": failure.logDetail, "setting": setting,
                            ])
                        } else {
                            log.info("bearer token refused", ["provider": issuer.provider, "reason": failure.code, "detail": failure.logDetail])
                        }
                    }
                    // A provider's outage is the sign-in's outage too: 503, try again. An extra
                    // issuer is not ours to wait for: a token that cannot be checked is refused.
                    guard unavailable && issuer.keySetting == nil else { return sink.respond(Self.invalidBearer) }
                    return sink.respond(Self.json(503, ["error": .string("temporarily_unavailable")]))
                }
                let now = clock()
                var session = ProxySession(provider: issuer.provider, subject: claims.subject, email: claims.email,
                                           emailVerified: claims.emailVerified ?? false, name: claims.name,
                                           preferredUsername: claims.raw["preferred_username"]?.stringValue,
                                           groups: groups(claims.raw), hostedDomain: claims.raw["hd"]?.stringValue,
                                           issuedAt: now, expiresAt: claims.expiresAt)
                session.ruleClaims = ruleClaims(claims.raw)
                var perCall: AccessRefusal? = nil
                if case .forwardAuth(let rule?) = use { perCall = rule.check(session.accessSubject) }
                if let r = refusal(session.accessSubject, pathRules: pathRules, now: loop.nowNanoseconds) ?? perCall {
                    metrics?.bearerToken(issuer.provider, result: "forbidden")
                    noteRefusal(r, provider: issuer.provider, subject: session.accessSubject, during: "bearer", now: loop.nowNanoseconds)
                    if case .forwardAuth = use { return sink.respond(Self.authRefused) }
                    return sink.respond(Self.forbidden(json: true))
                }
                metrics?.bearerToken(issuer.provider, result: "accepted")
                if case .forwardAuth = use { return sink.respond(authGranted(session, on: loop)) }
                var edits = HeaderEdits()
                edits.add = identityHeaders(session, on: loop)
                sink.proceed(UpstreamRewrite(edits: edits))
            }
        }
    }

    /// The configured issuer and client a token names: a listed provider whose issuer is the
    /// token's `iss`, and its `azp`, else the first of its `aud`, that is one of that
    /// provider's native clients.
    private func bearerAudience(_ token: String) -> (BearerIssuer, String)? {
        guard let jwt = try? JWT(compact: token), let iss = jwt.claims["iss"]?.stringValue else { return nil }
        let candidates = jwt.audienceCandidates
        for issuer in bearerIssuers where issuer.verifier.acceptedIssuers.contains(iss) {
            if let audience = candidates.first(where: issuer.audiences.contains) { return (issuer, audience) }
        }
        return nil
    }

    static let invalidBearer = Response(status: 401, headers: [
        ("Content-Type", "application/json"), ("Cache-Control", "no-store"), ("WWW-Authenticate", "Bearer error=\"invalid_token\""),
    ], body: Array("{\"error\":\"invalid_token\"}".utf8))
}
