import ProxyCore
import Synchronization

/// Any OpenID Connect provider, configured by its issuer (OIDC Discovery 1.0).
///
/// - Discovery: `endpoints.discovery`, else `<issuer>/.well-known/openid-configuration`. Fetched
///   on first use and kept for the life of the process; the document's `issuer` must equal the
///   configured issuer exactly (Discovery §4.3 — otherwise anyone who can serve that document
///   could name themselves issuer). After a failure, logins fail fast for
///   `ProviderOptions.discoveryRetryBackoff` seconds, then the next one tries again.
///   `endpoints.token` / `endpoints.jwks` override the discovered values; with both set,
///   discovery is skipped.
/// - Exchange: public native clients send `code_verifier` (PKCE) and no secret; confidential
///   ones authenticate with `client_secret_post` (id and secret in the body) or
///   `client_secret_basic` (RFC 6749 §2.3.1: each form-urlencoded, joined by `:`, Base64).
/// - Verify: against the discovered `jwks_uri`, `allowedAlgorithms` (default RS256, ES256),
///   `iss` = the issuer, `aud` = the native client id.
public struct OIDCProvider: IdentityProvider {
    public let settings: ProviderSettings
    public let issuer: String
    public let discoveryURL: String
    public let algorithms: Set<JWSAlgorithm>
    let discovery: Discovery
    let http: any HTTPFetching
    let options: ProviderOptions

    public init(_ settings: ProviderSettings, http: any HTTPFetching, clock: @escaping @Sendable () -> Int64,
                options: ProviderOptions = ProviderOptions()) throws(ProviderConfigurationError) {
        guard let issuer = settings.endpoints.issuer, !issuer.isEmpty else {
            throw ProviderConfigurationError(provider: settings.name, "kind oidc needs endpoints.issuer")
        }
        self.settings = settings
        self.issuer = issuer
        self.http = http
        self.options = options
        discoveryURL = Self.discoveryURL(settings)!
        algorithms = try ProviderSupport.algorithms(settings, default: [.rs256, .es256])
        discovery = Discovery(url: discoveryURL, issuer: issuer, tokenOverride: settings.endpoints.token,
                              jwksOverride: settings.endpoints.jwks, userinfoOverride: settings.endpoints.userinfo,
                              label: settings.name, http: http,
                              clock: clock, options: options)
    }

    /// `endpoints.discovery`, or the issuer's well-known document (OIDC Discovery §4); nil
    /// without an issuer.
    static func discoveryURL(_ settings: ProviderSettings) -> String? {
        if let d = settings.endpoints.discovery { return d }
        guard let issuer = settings.endpoints.issuer, !issuer.isEmpty else { return nil }
        return ProviderSupport.trimmingTrailingSlashes(issuer) + "/.well-known/openid-configuration"
    }

    /// The `Authorization` value for `client_secret_basic` (RFC 6749 §2.3.1): id and secret are
    /// each `application/x-www-form-urlencoded` *before* they are joined with `:` and Base64
    /// encoded, so a `:` in the id, or any non-ASCII, survives the trip.
    public static func basicAuthorization(clientID: String, secret: Secret) -> String {
        let pair = FormEncoding.escape(clientID) + ":" + FormEncoding.escape(secret.value)
        return "Basic " + Base64.encode(Array(pair.utf8), .standard)
    }

    public func redeem(_ request: ExchangeRequest, on loop: EventLoop,
                       _ completion: @escaping (Result<VerifiedIdentity, CallbackFailure>) -> Void) {
        let done = LoopCompletion(loop, completion)
        let context = "\(settings.name) token endpoint"
        let client = request.client
        guard let auth = ProviderSupport.clientAuthentication(client, codeVerifier: request.codeVerifier) else {
            done.completeLater(.failure(ProviderSupport.invalidRequest("\(context): no code_verifier for a public client")))
            return
        }
        var fields = [("grant_type", "authorization_code"), ("code", request.code)] + auth.fields
        let headers = auth.headers
        let hidden = [request.code] + (request.codeVerifier.map { [$0] } ?? []) + auth.hidden
        fields.append(("redirect_uri", client.redirectURI))
        if let verifier = request.codeVerifier { fields.append(("code_verifier", verifier)) }

        let algorithms = self.algorithms
        let leeway = options.leeway
        let timeout = options.timeout
        let provider = settings.name
        let http = self.http
        discovery.metadata(on: loop) { result in
            let metadata: Discovery.Metadata
            switch result {
            case .failure(let failure): return done.complete(.failure(failure), from: loop)
            case .success(let m): metadata = m
            }
            let verifier = JWTVerifier(allowedAlgorithms: algorithms, issuers: [metadata.issuer],
                                       audience: client.clientID, leeway: leeway)
            let form = OutboundRequest.form(url: metadata.tokenEndpoint, fields: fields, headers: headers, timeout: timeout)
            ProviderSupport.redeemForIDToken(form, http: http, context: context, hiding: hidden, jwks: metadata.jwks,
                                             verifier: verifier, expectedNonce: request.expectedNonce, provider: provider,
                                             platform: request.platform, kind: .oidc, on: loop, done)
        }
    }
}

extension OIDCProvider {
    /// The discovery document's outcome, shared by all loops behind a `Mutex` for the same
    /// reasons as `JWKSSource`: one fetch serves every loop, and concurrent first logins wait
    /// for it rather than each fetching.
    final class Discovery: Sendable {
        struct Metadata: Sendable {
            let issuer: String
            let tokenEndpoint: String
            let jwks: JWKSSource
            /// `end_session_endpoint` (RP-initiated logout), when the document has a usable one.
            var endSession: String? = nil
            /// `endpoints.userinfo`, else the document's `userinfo_endpoint` when usable: where a
            /// session refresh without a new id_token reads the user's claims.
            var userinfo: String? = nil
        }

        private enum Phase {
            case idle
            case fetching([LoopCompletion<Result<Metadata, CallbackFailure>>])
            case ready(Metadata)
            case failed(CallbackFailure, retryAt: Int64)
        }

        private let url: String
        private let issuer: String
        private let tokenOverride: String?
        private let jwksOverride: String?
        private let userinfoOverride: String?
        /// False for an issuer of bearer tokens only (`ExtraJWTIssuer`): nothing is redeemed
        /// there, and documents like GitHub Actions' or a Kubernetes cluster's name no token
        /// endpoint, which must not cost them their keys.
        private let tokenEndpointRequired: Bool
        private let label: String
        private let http: any HTTPFetching
        private let clock: @Sendable () -> Int64
        private let options: ProviderOptions
        private let phase: Mutex<Phase>

        init(url: String, issuer: String, tokenOverride: String?, jwksOverride: String?, userinfoOverride: String? = nil,
             tokenEndpointRequired: Bool = true,
             label: String, http: any HTTPFetching, clock: @escaping @Sendable () -> Int64, options: ProviderOptions) {
            self.userinfoOverride = userinfoOverride
            self.tokenEndpointRequired = tokenEndpointRequired
            self.url = url
            self.issuer = issuer
            self.tokenOverride = tokenOverride
            self.jwksOverride = jwksOverride
            self.label = label
            self.http = http
            self.clock = clock
            self.options = options
            if let tokenOverride, let jwksOverride {
                phase = Mutex(.ready(Metadata(issuer: issuer, tokenEndpoint: tokenOverride,
                                              jwks: JWKSSource(url: jwksOverride, label: label, http: http, clock: clock,
                                                               policy: options.jwksPolicy, timeout: options.timeout),
                                              userinfo: userinfoOverride)))
            } else {
                phase = Mutex(.idle)
            }
        }

        /// Callers waiting for the fetch in flight (tests use it to line up concurrent callers).
        var waitingCount: Int {
            phase.withLock { phase in
                if case .fetching(let waiters) = phase { return waiters.count }
                return 0
            }
        }

        /// The metadata, fetching the document when needed. `body` runs on `loop`.
        func metadata(on loop: EventLoop, _ body: @escaping (Result<Metadata, CallbackFailure>) -> Void) {
            enum Next { case use(Result<Metadata, CallbackFailure>), wait, fetch }
            let waiter = LoopCompletion(loop, body)
            let now = clock()
            let next: Next = phase.withLock { phase in
                switch phase {
                case .ready(let metadata):
                    return .use(.success(metadata))
                case .fetching(var waiters):
                    waiters.append(waiter)
                    phase = .fetching(waiters)
                    return .wait
                case .failed(let failure, let retryAt) where now < retryAt:
                    return .use(.failure(failure))
                case .idle, .failed:
                    phase = .fetching([waiter])
                    return .fetch
                }
            }
            switch next {
            case .use(let result): waiter.completeLater(result)
            case .wait: break
            case .fetch: fetch(on: loop)
            }
        }

        private func fetch(on loop: EventLoop) {
            let request = OutboundRequest(method: "GET", url: url, headers: [("Accept", "application/json")],
                                          timeout: options.timeout, idempotent: true, call: .discovery)
            http.fetch(request, on: loop) { [self] result in
                let outcome = metadata(from: result)
                let now = clock()
                let waiters = phase.withLock { phase -> [LoopCompletion<Result<Metadata, CallbackFailure>>] in
                    guard case .fetching(let waiters) = phase else { return [] }
                    switch outcome {
                    case .success(let metadata): phase = .ready(metadata)
                    case .failure(let failure): phase = .failed(failure, retryAt: now &+ options.discoveryRetryBackoff)
                    }
                    return waiters
                }
                for waiter in waiters { waiter.complete(outcome, from: loop) }
            }
        }

        private func metadata(from result: Result<OutboundResponse, OutboundError>) -> Result<Metadata, CallbackFailure> {
            let context = "\(label) discovery \(ProviderText.withoutQuery(url))"
            let document: [String: JSONValue]
            switch result {
            case .failure(let error):
                return .failure(TokenResponseParsing.transportFailure(error, context: context))
            case .success(let response):
                switch TokenResponseParsing.jsonObject(response, context: context) {
                case .failure(let failure):
                    return .failure(unavailable(failure.logDetail, retryable: true))
                case .success(let object):
                    document = object
                }
            }
            switch Self.endpoints(of: document, issuer: issuer, tokenOverride: tokenOverride, jwksOverride: jwksOverride,
                                  context: context, label: label, tokenEndpointRequired: tokenEndpointRequired) {
            case .failure(let failure):
                return .failure(failure)
            case .success(let endpoints):
                let jwks = JWKSSource(url: endpoints.jwks, label: label, http: http, clock: clock, policy: options.jwksPolicy,
                                      timeout: options.timeout)
                let endSession = document["end_session_endpoint"]?.stringValue.flatMap { Self.isAcceptableEndpoint($0) ? $0 : nil }
                let userinfo = userinfoOverride
                    ?? document["userinfo_endpoint"]?.stringValue.flatMap { Self.isAcceptableEndpoint($0) ? $0 : nil }
                return .success(Metadata(issuer: issuer, tokenEndpoint: endpoints.token, jwks: jwks, endSession: endSession,
                                         userinfo: userinfo))
            }
        }

        /// The token endpoint and JWKS URL a discovery document gives for this provider's
        /// settings, or the `config` failure saying why it cannot work with them (the issuer
        /// must equal `endpoints.issuer` byte for byte; both endpoints must be https). Shared
        /// with `check --online` (`ProviderProbe`), so both say the same thing.
        /// Without `tokenEndpointRequired` a missing token endpoint reads as `""` (never called).
        static func endpoints(of document: [String: JSONValue], issuer: String, tokenOverride: String?, jwksOverride: String?,
                              context: String, label: String,
                              tokenEndpointRequired: Bool = true) -> Result<(token: String, jwks: String), CallbackFailure> {
            func misconfigured(_ detail: String, _ setting: String) -> Result<(token: String, jwks: String), CallbackFailure> {
                // Stays so until someone changes the settings or the document: a `config` failure.
                .failure(CallbackFailure(.config, code: "idp_unavailable", userMessage: ProviderText.unavailable,
                                         logDetail: detail, setting: "providers.\(label).\(setting)"))
            }
            guard let discovered = document["issuer"]?.stringValue else {
                return misconfigured("\(context): document has no issuer", "endpoints.discovery")
            }
            guard discovered == issuer else {
                // Both values: they are public, and the difference is usually one `/` at the end.
                var detail = "\(context): document issuer \"\(discovered)\" does not equal endpoints.issuer \"\(issuer)\""
                if ProviderSupport.trimmingTrailingSlashes(discovered) == ProviderSupport.trimmingTrailingSlashes(issuer) {
                    detail += " (they differ only in a trailing /: write endpoints.issuer exactly as the document has it)"
                }
                return misconfigured(detail, "endpoints.issuer")
            }
            var token = tokenOverride ?? document["token_endpoint"]?.stringValue ?? ""
            if !isAcceptableEndpoint(token) {
                guard !tokenEndpointRequired else {
                    return misconfigured("\(context): token_endpoint is missing or not https", "endpoints.discovery")
                }
                token = ""
            }
            guard let jwks = jwksOverride ?? document["jwks_uri"]?.stringValue, isAcceptableEndpoint(jwks) else {
                return misconfigured("\(context): jwks_uri is missing or not https", "endpoints.discovery")
            }
            return .success((token, jwks))
        }

        private func unavailable(_ detail: String, retryable: Bool) -> CallbackFailure {
            CallbackFailure(.idp, code: "idp_unavailable", userMessage: ProviderText.unavailable,
                            logDetail: detail, retryable: retryable)
        }

        /// Discovery §3 requires https for these; plain http is accepted only on loopback
        /// (a test IdP on the same machine), where there is no network to attack.
        static func isAcceptableEndpoint(_ url: String) -> Bool {
            if url.hasPrefix("https://") { return url.utf8.count > "https://".utf8.count }
            for loopback in ["http://127.0.0.1", "http://localhost", "http://[::1]"] where url.hasPrefix(loopback) {
                let rest = url.dropFirst(loopback.count)
                if rest.isEmpty || rest.hasPrefix(":") || rest.hasPrefix("/") { return true }
            }
            return false
        }
    }
}

extension OIDCProvider: EndSessionProviding {
    public func endSessionEndpoint(on loop: EventLoop, _ completion: @escaping (String?) -> Void) {
        if let configured = settings.endpoints.endSession { return completion(configured) }
        discovery.metadata(on: loop) { result in
            completion(try? result.get().endSession)
        }
    }
}

extension OIDCProvider: IDTokenVerifying {
    public var acceptedIssuers: Set<String> { [issuer] }

    public func verifyIDToken(_ token: String, audience: String, on loop: EventLoop,
                              _ completion: @escaping (Result<VerifiedClaims, CallbackFailure>) -> Void) {
        let algorithms = self.algorithms
        let leeway = options.leeway
        discovery.metadata(on: loop) { result in
            switch result {
            case .failure(let failure): completion(.failure(failure))
            case .success(let metadata):
                let verifier = JWTVerifier(allowedAlgorithms: algorithms, issuers: [metadata.issuer], audience: audience, leeway: leeway)
                metadata.jwks.verify(token, with: verifier, expectedNonce: nil, on: loop, completion)
            }
        }
    }
}

extension OIDCProvider: TokenEndpointProviding {
    public func tokenEndpoint(on loop: EventLoop, _ completion: @escaping (Result<String, CallbackFailure>) -> Void) {
        discovery.metadata(on: loop) { completion($0.map(\.tokenEndpoint)) }
    }
}
