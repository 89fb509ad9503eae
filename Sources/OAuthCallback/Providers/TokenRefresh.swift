import ProxyCore

/// One refresh of a server-side session at its provider (`oauth.session.refresh_interval`):
/// RFC 6749 §6, `grant_type=refresh_token`, made by the client that obtained the token.
public struct RefreshRequest: Sendable {
    public var provider: ProviderSettings
    /// `web` or the native platform whose client obtained the token (for log lines and settings).
    public var platform: String
    /// That client, from configuration: its secret (confidential) or none (a public native client).
    public var client: NativeClient
    public var refreshToken: String
    /// The session's `sub`: a new id_token (or userinfo answer) must carry the same one.
    public var subject: String

    public init(provider: ProviderSettings, platform: String, client: NativeClient, refreshToken: String, subject: String) {
        self.provider = provider
        self.platform = platform
        self.client = client
        self.refreshToken = refreshToken
        self.subject = subject
    }
}

/// What a refresh vouches for.
public struct RefreshedIdentity: Sendable {
    /// The new access token, and a rotated refresh token when the provider sent one.
    public var tokens: TokenResponse
    /// The user's claims now: a verified id_token's, else the userinfo endpoint's (`sub` checked
    /// in both); nil when the provider offered neither (the session keeps its claims).
    public var claims: [String: JSONValue]?

    public init(tokens: TokenResponse, claims: [String: JSONValue]?) {
        self.tokens = tokens
        self.claims = claims
    }
}

public enum RefreshResult: Sendable {
    case renewed(RefreshedIdentity)
    /// HTTP 400 `invalid_grant`: the refresh token is no longer good (revoked, rotated by
    /// another refresh, expired, the user disabled or removed). Ends the session.
    case invalidGrant
    /// No usable answer now (transport error, timeout, 5xx, 429, keys or discovery not
    /// reachable): the session keeps what it has and a later request tries again.
    case unavailable(CallbackFailure)
    /// The provider answered, but not with a re-check of this user (`invalid_client`, an
    /// id_token that does not verify or names another `sub`, a malformed answer): the session
    /// cannot be vouched for any more, and is ended (fail closed).
    case failed(CallbackFailure)
}

/// Providers whose sessions can follow the IdP: `google` and `oidc` (the kinds session mode
/// supports). `completion` runs on `loop`, exactly once, never inside the call.
public protocol SessionRefreshing: Sendable {
    func refresh(_ request: RefreshRequest, on loop: EventLoop, _ completion: @escaping (RefreshResult) -> Void)
}

extension ProviderSupport {
    /// The client authentication of a refresh: a confidential client's secret, as at sign-in;
    /// a public native client only its `client_id` (RFC 6749 §6 and §3.2.1 — there is no PKCE
    /// on a refresh, the token itself is the proof).
    static func refreshAuthentication(_ client: NativeClient)
        -> (fields: [(String, String)], headers: [(name: String, value: String)], hidden: [String]) {
        guard client.clientSecret != nil, let auth = clientAuthentication(client, codeVerifier: nil) else {
            return ([("client_id", client.clientID)], [], [])
        }
        return auth
    }

    /// Where a failure of a refresh leaves the session: kept (the IdP may answer later) or
    /// ended (it answered, and not with this user).
    static func refreshResult(_ failure: CallbackFailure) -> RefreshResult {
        failure.retryable || failure.code == "idp_unavailable" ? .unavailable(failure) : .failed(failure)
    }

    /// Whether a token endpoint answer is RFC 6749 §5.2's `invalid_grant`.
    static func isInvalidGrant(_ result: Result<OutboundResponse, OutboundError>) -> Bool {
        guard case .success(let response) = result, response.status == 400,
              response.body.count <= TokenResponseParsing.maximumBodySize,
              let body = try? JSONParser.parse(response.body) else { return false }
        return body["error"]?.stringValue == "invalid_grant"
    }

    /// The common refresh (Google, OIDC): POST the form once; `invalid_grant` → ended; a new
    /// id_token verified fully — signature, `iss`, `aud` = the client, `exp` — but without a
    /// nonce (OIDC Core §12.2: a refreshed id_token carries none to check), and its `sub` must
    /// be the session's; without an id_token, the userinfo endpoint's answer (same `sub` rule,
    /// OIDC Core §5.3.2) when there is one; else no claims.
    static func refresh(_ request: RefreshRequest, tokenEndpoint: String, userinfo: String?, jwks: JWKSSource,
                        verifier: JWTVerifier, http: any HTTPFetching, timeout: UInt64, kind: ProviderKind,
                        on loop: EventLoop, _ done: LoopCompletion<RefreshResult>) {
        let context = "\(request.provider.name) token endpoint (refresh)"
        let auth = refreshAuthentication(request.client)
        let fields = [("grant_type", "refresh_token"), ("refresh_token", request.refreshToken)] + auth.fields
        let hidden = [request.refreshToken] + auth.hidden
        let form = OutboundRequest.form(url: tokenEndpoint, fields: fields, headers: auth.headers, timeout: timeout)
        let provider = request.provider.name
        let platform = request.platform
        let subject = request.subject
        http.fetch(form, on: loop) { result in
            if isInvalidGrant(result) { return done.complete(.invalidGrant, from: loop) }
            let tokens: TokenResponse
            switch TokenResponseParsing.parse(result, context: context, hiding: hidden) {
            case .failure(let failure):
                return done.complete(refreshResult(clientRefused(failure, provider: provider, platform: platform, kind: kind)),
                                     from: loop)
            case .success(let t): tokens = t
            }
            let hiddenNow = hidden + [tokens.accessToken] + (tokens.refreshToken.map { [$0] } ?? [])
            func otherSubject(_ what: String) -> RefreshResult {
                .failed(CallbackFailure(.idp, code: "invalid_id_token", userMessage: ProviderText.notVerified,
                                        logDetail: "\(context): the \(what) names another sub than the session's"))
            }
            if let idToken = tokens.idToken {
                return jwks.verify(idToken, with: verifier, expectedNonce: nil, on: loop) { verified in
                    switch verified {
                    case .failure(let failure): done.complete(refreshResult(failure), from: loop)
                    case .success(let claims) where claims.subject != subject: done.complete(otherSubject("new id_token"), from: loop)
                    case .success(let claims): done.complete(.renewed(RefreshedIdentity(tokens: tokens, claims: claims.raw)), from: loop)
                    }
                }
            }
            guard let userinfo else { return done.complete(.renewed(RefreshedIdentity(tokens: tokens, claims: nil)), from: loop) }
            let ask = OutboundRequest(method: "GET", url: userinfo,
                                      headers: [("Authorization", "Bearer " + tokens.accessToken), ("Accept", "application/json")],
                                      timeout: timeout, idempotent: true, call: .userinfo)
            let infoContext = "\(provider) userinfo endpoint (refresh)"
            http.fetch(ask, on: loop) { answer in
                let object: [String: JSONValue]
                switch answer {
                case .failure(let error):
                    return done.complete(.unavailable(TokenResponseParsing.transportFailure(error, context: infoContext, hiding: hiddenNow)),
                                         from: loop)
                case .success(let response):
                    switch TokenResponseParsing.jsonObject(response, context: infoContext) {
                    case .failure(let failure): return done.complete(refreshResult(failure), from: loop)
                    case .success(let o): object = o
                    }
                }
                guard object["sub"]?.stringValue == subject else { return done.complete(otherSubject("userinfo answer"), from: loop) }
                done.complete(.renewed(RefreshedIdentity(tokens: tokens, claims: object)), from: loop)
            }
        }
    }
}

extension GoogleProvider: SessionRefreshing {
    /// Google's OpenID userinfo endpoint (its discovery document's `userinfo_endpoint`).
    public static let defaultUserinfo = "https://openidconnect.googleapis.com/v1/userinfo"

    /// `endpoints.userinfo`, else Google's — but only while the token endpoint is Google's
    /// too: an access token of another token endpoint must not be sent to Google.
    var userinfoEndpoint: String? {
        settings.endpoints.userinfo ?? (settings.endpoints.token == nil ? Self.defaultUserinfo : nil)
    }

    public func refresh(_ request: RefreshRequest, on loop: EventLoop, _ completion: @escaping (RefreshResult) -> Void) {
        let verifier = JWTVerifier(allowedAlgorithms: algorithms, issuers: issuers, audience: request.client.clientID,
                                   leeway: options.leeway)
        ProviderSupport.refresh(request, tokenEndpoint: tokenEndpoint, userinfo: userinfoEndpoint, jwks: jwks, verifier: verifier,
                                http: http, timeout: options.timeout, kind: .google, on: loop, LoopCompletion(loop, completion))
    }
}

extension OIDCProvider: SessionRefreshing {
    public func refresh(_ request: RefreshRequest, on loop: EventLoop, _ completion: @escaping (RefreshResult) -> Void) {
        let done = LoopCompletion(loop, completion)
        let algorithms = self.algorithms
        let leeway = options.leeway
        let timeout = options.timeout
        let http = self.http
        discovery.metadata(on: loop) { result in
            switch result {
            case .failure(let failure): done.complete(ProviderSupport.refreshResult(failure), from: loop)
            case .success(let metadata):
                let verifier = JWTVerifier(allowedAlgorithms: algorithms, issuers: [metadata.issuer],
                                           audience: request.client.clientID, leeway: leeway)
                ProviderSupport.refresh(request, tokenEndpoint: metadata.tokenEndpoint, userinfo: metadata.userinfo,
                                        jwks: metadata.jwks, verifier: verifier, http: http, timeout: timeout, kind: .oidc,
                                        on: loop, done)
            }
        }
    }
}
