import ProxyCore

/// Facebook Login. The app is a *confidential* client even for native sign-in: the code is
/// redeemed server-side with the app secret, and because a Facebook access token is not
/// self-describing, the token is then checked with the Graph API before it is believed.
///
/// 1. Exchange: `POST <graph>/oauth/access_token` (form body) with `client_id` = app id,
///    `client_secret`, `redirect_uri` = the native redirect (`fb<appid>://authorize`), `code`,
///    and `code_verifier` when the app used PKCE. POST rather than the documented GET keeps the
///    app secret and the code out of every URL (proxy logs, libcurl traces).
/// 2. When the token response carries an `id_token` (Limited Login / OIDC): RS256 against
///    Facebook's JWKS, `iss` = `https://www.facebook.com`, `aud` = the app id.
/// 3. `GET <graph>/debug_token` with the app access token `<appid>|<secret>`: `is_valid` must be
///    true and `app_id` ours — a token minted for another app is refused (`invalid_token`).
/// 4. `GET <graph>/me?fields=id,name,email` with `appsecret_proof` (hex HMAC-SHA256 of the
///    access token keyed with the app secret), so the Graph API itself refuses the token if it
///    was lifted and replayed without the secret.
///
/// Steps 3–4 must send secrets in the query (the Graph API takes them nowhere else); every
/// log detail names only the *path* of a call, and fetcher details are cut at `?` and scrubbed
/// of the secret, the tokens and the code.
public struct FacebookProvider: IdentityProvider {
    public static let defaultGraph = "https://graph.facebook.com/" + GraphAPIVersions.newest
    public static let defaultJWKS = "https://www.facebook.com/.well-known/oauth/openid/jwks/"
    public static let defaultIssuer = "https://www.facebook.com"

    public let settings: ProviderSettings
    /// Graph API base without a trailing slash.
    public let graph: String
    public let issuer: String
    public let algorithms: Set<JWSAlgorithm>
    public let jwks: JWKSSource
    private let facebook: FacebookSettings
    private let http: any HTTPFetching
    private let options: ProviderOptions

    public init(_ settings: ProviderSettings, http: any HTTPFetching, clock: @escaping @Sendable () -> Int64,
                options: ProviderOptions = ProviderOptions()) throws(ProviderConfigurationError) {
        guard let facebook = settings.facebook else {
            throw ProviderConfigurationError(provider: settings.name, "kind facebook needs app_id and app_secret")
        }
        guard !facebook.appID.isEmpty, !facebook.appSecret.value.isEmpty else {
            throw ProviderConfigurationError(provider: settings.name, "app_id and app_secret must not be empty")
        }
        self.settings = settings
        self.facebook = facebook
        self.http = http
        self.options = options
        graph = ProviderSupport.trimmingTrailingSlashes(settings.endpoints.graph ?? Self.defaultGraph)
        issuer = settings.endpoints.issuer ?? Self.defaultIssuer
        algorithms = try ProviderSupport.algorithms(settings, default: [.rs256])
        jwks = JWKSSource(url: settings.endpoints.jwks ?? Self.defaultJWKS, label: settings.name, http: http,
                          clock: clock, policy: options.jwksPolicy, timeout: options.timeout)
    }

    /// `appsecret_proof`: lowercase hex HMAC-SHA256 of the access token, keyed with the app secret.
    public static func appSecretProof(accessToken: String, appSecret: Secret) -> String {
        let mac = HMACSHA256.authenticationCode(for: accessToken, key: appSecret.value)
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(mac.count * 2)
        for b in mac {
            out.append(digits[Int(b >> 4)])
            out.append(digits[Int(b & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    public func redeem(_ request: ExchangeRequest, on loop: EventLoop,
                       _ completion: @escaping (Result<VerifiedIdentity, CallbackFailure>) -> Void) {
        let run = Run(provider: self, request: request, loop: loop, done: LoopCompletion(loop, completion))
        run.exchange()
    }

    /// One redemption's steps, each continuing from the previous one's completion on `loop`.
    private struct Run {
        let provider: FacebookProvider
        let request: ExchangeRequest
        let loop: EventLoop
        let done: LoopCompletion<Result<VerifiedIdentity, CallbackFailure>>

        var name: String { provider.settings.name }
        var appID: String { provider.facebook.appID }
        var secret: Secret { provider.facebook.appSecret }

        func fail(_ failure: CallbackFailure) { done.complete(.failure(failure), from: loop) }

        /// What no log detail may contain, even if a fetcher echoed it.
        func hidden(_ accessToken: String? = nil) -> [String] {
            [secret.value, request.code] + (request.codeVerifier.map { [$0] } ?? []) + (accessToken.map { [$0] } ?? [])
        }

        func get(_ path: String, _ query: [(String, String)], call: OutboundCall) -> OutboundRequest {
            OutboundRequest(method: "GET", url: provider.graph + path + "?" + FormEncoding.encode(query),
                            headers: [("Accept", "application/json")], timeout: provider.options.timeout,
                            idempotent: true, call: call)
        }

        func exchange() {
            var fields = [
                ("client_id", appID),
                ("client_secret", secret.value),
                ("redirect_uri", request.client.redirectURI),
                ("code", request.code),
            ]
            if let codeVerifier = request.codeVerifier { fields.append(("code_verifier", codeVerifier)) }
            let context = "\(name) /oauth/access_token"
            let request = OutboundRequest.form(url: provider.graph + "/oauth/access_token", fields: fields,
                                               timeout: provider.options.timeout)
            provider.http.fetch(request, on: loop) { result in
                switch TokenResponseParsing.parse(result, context: context, hiding: hidden()) {
                case .failure(let failure): fail(failure)
                case .success(let tokens): verifyIDToken(tokens)
                }
            }
        }

        func verifyIDToken(_ tokens: TokenResponse) {
            guard let idToken = tokens.idToken else { return debugToken(tokens, idTokenSubject: nil) }
            let verifier = JWTVerifier(allowedAlgorithms: provider.algorithms, issuers: [provider.issuer],
                                       audience: appID, leeway: provider.options.leeway)
            provider.jwks.verify(idToken, with: verifier, expectedNonce: request.expectedNonce, on: loop) { result in
                switch result {
                case .failure(let failure): fail(failure)
                case .success(let claims): debugToken(tokens, idTokenSubject: claims.subject)
                }
            }
        }

        func debugToken(_ tokens: TokenResponse, idTokenSubject: String?) {
            let context = "\(name) /debug_token"
            let request = get("/debug_token", [("input_token", tokens.accessToken),
                                               ("access_token", "\(appID)|\(secret.value)")], call: .debugToken)
            provider.http.fetch(request, on: loop) { result in
                switch graphObject(result, context: context, accessToken: tokens.accessToken) {
                case .failure(let failure): return fail(failure)
                case .success(let object):
                    guard let data = object["data"]?.objectValue else {
                        return fail(invalidToken("\(context): answer has no data object"))
                    }
                    guard data["is_valid"] == .bool(true) else {
                        return fail(invalidToken("\(context): token is not valid"))
                    }
                    guard let tokenApp = data["app_id"]?.stringValue, tokenApp == appID else {
                        return fail(invalidToken("\(context): token was issued to another app"))
                    }
                    if let type = data["type"], type != .string("USER") {
                        return fail(invalidToken("\(context): token is not a user token"))
                    }
                    guard let userID = data["user_id"]?.stringValue, !userID.isEmpty else {
                        return fail(invalidToken("\(context): token has no user_id"))
                    }
                    if let idTokenSubject, idTokenSubject != userID {
                        return fail(invalidToken("\(context): id_token sub and token user_id differ"))
                    }
                    me(tokens, userID: userID)
                }
            }
        }

        func me(_ tokens: TokenResponse, userID: String) {
            let context = "\(name) /me"
            let request = get("/me", [("fields", "id,name,email"), ("access_token", tokens.accessToken),
                                      ("appsecret_proof", FacebookProvider.appSecretProof(accessToken: tokens.accessToken,
                                                                                          appSecret: secret))],
                              call: .userinfo)
            provider.http.fetch(request, on: loop) { result in
                switch graphObject(result, context: context, accessToken: tokens.accessToken) {
                case .failure(let failure): return fail(failure)
                case .success(let object):
                    guard let id = object["id"]?.stringValue, !id.isEmpty else {
                        return fail(invalidToken("\(context): answer has no id"))
                    }
                    guard id == userID else { return fail(invalidToken("\(context): id differs from the token's user_id")) }
                    // The Graph API returns only a confirmed primary email, but does not say
                    // so in the answer; we report "unknown" rather than promise it.
                    let identity = VerifiedIdentity(provider: name, subject: id, email: object["email"]?.stringValue,
                                                    emailVerified: nil, name: object["name"]?.stringValue,
                                                    tokens: tokens)
                    done.complete(.success(identity), from: loop)
                }
            }
        }

        func graphObject(_ result: Result<OutboundResponse, OutboundError>, context: String,
                         accessToken: String) -> Result<[String: JSONValue], CallbackFailure> {
            switch result {
            case .failure(let error):
                return .failure(TokenResponseParsing.transportFailure(error, context: context, hiding: hidden(accessToken)))
            case .success(let response):
                return TokenResponseParsing.jsonObject(response, context: context)
            }
        }

        func invalidToken(_ detail: String) -> CallbackFailure {
            CallbackFailure(.idp, code: "invalid_token", userMessage: ProviderText.notVerified, logDetail: detail)
        }
    }
}

extension FacebookProvider: TokenEndpointProviding {
    public func tokenEndpoint(on loop: EventLoop, _ completion: @escaping (Result<String, CallbackFailure>) -> Void) {
        completion(.success(graph + "/oauth/access_token"))
    }
}
