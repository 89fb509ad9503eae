import ProxyCore

/// Google: the native iOS/Android clients are *public* (no secret exists for them), so the
/// code is redeemed with PKCE alone, and the identity comes from the id_token. The site's web
/// client (session mode's web sign-in) adds its secret (`client_secret_post`, or basic) and
/// its `aud` is the web client id: the same steps, another client.
///
/// Exchange: `POST https://oauth2.googleapis.com/token` with exactly `grant_type`, `code`,
/// `client_id`, `redirect_uri`, `code_verifier`. Verify: RS256 against Google's JWKS, `iss` ∈
/// {`accounts.google.com`, `https://accounts.google.com`}, `aud` (and `azp` when present) =
/// the native client id, `exp`/`iat` within the leeway, `nonce` when one is expected.
public struct GoogleProvider: IdentityProvider {
    public static let defaultTokenEndpoint = "https://oauth2.googleapis.com/token"
    public static let defaultJWKS = "https://www.googleapis.com/oauth2/v3/certs"
    /// Google documents both spellings.
    public static let defaultIssuers: Set<String> = ["accounts.google.com", "https://accounts.google.com"]

    public let settings: ProviderSettings
    /// `endpoints.token`, else Google's.
    public let tokenEndpoint: String
    /// `endpoints.issuer` replaces the set when configured.
    public let issuers: Set<String>
    public let algorithms: Set<JWSAlgorithm>
    public let jwks: JWKSSource
    let http: any HTTPFetching
    let options: ProviderOptions

    public init(_ settings: ProviderSettings, http: any HTTPFetching, clock: @escaping @Sendable () -> Int64,
                options: ProviderOptions = ProviderOptions()) throws(ProviderConfigurationError) {
        self.settings = settings
        self.http = http
        self.options = options
        tokenEndpoint = settings.endpoints.token ?? Self.defaultTokenEndpoint
        issuers = settings.endpoints.issuer.map { [$0] } ?? Self.defaultIssuers
        algorithms = try ProviderSupport.algorithms(settings, default: [.rs256])
        jwks = JWKSSource(url: settings.endpoints.jwks ?? Self.defaultJWKS, label: settings.name, http: http,
                          clock: clock, policy: options.jwksPolicy, timeout: options.timeout)
    }

    public func redeem(_ request: ExchangeRequest, on loop: EventLoop,
                       _ completion: @escaping (Result<VerifiedIdentity, CallbackFailure>) -> Void) {
        let done = LoopCompletion(loop, completion)
        let context = "\(settings.name) token endpoint"
        // Google refuses a native code without its verifier; asking would only burn the code.
        // The web client (session mode's web sign-in) is confidential and sends its verifier too:
        // /_oauth/start always uses PKCE.
        guard let codeVerifier = request.codeVerifier, !codeVerifier.isEmpty,
              let auth = ProviderSupport.clientAuthentication(request.client, codeVerifier: codeVerifier) else {
            done.completeLater(.failure(ProviderSupport.invalidRequest("\(context): no code_verifier for a PKCE client")))
            return
        }
        let fields = [("grant_type", "authorization_code"), ("code", request.code)] + auth.fields + [
            ("redirect_uri", request.client.redirectURI),
            ("code_verifier", codeVerifier),
        ]
        let verifier = JWTVerifier(allowedAlgorithms: algorithms, issuers: issuers, audience: request.client.clientID,
                                   leeway: options.leeway)
        let provider = settings.name
        let form = OutboundRequest.form(url: tokenEndpoint, fields: fields, headers: auth.headers, timeout: options.timeout)
        ProviderSupport.redeemForIDToken(form, http: http, context: context, hiding: [request.code, codeVerifier] + auth.hidden,
                                         jwks: jwks, verifier: verifier, expectedNonce: request.expectedNonce,
                                         provider: provider, platform: request.platform, kind: .google, on: loop, done)
    }
}

extension GoogleProvider: IDTokenVerifying {
    public var acceptedIssuers: Set<String> { issuers }

    public func verifyIDToken(_ token: String, audience: String, on loop: EventLoop,
                              _ completion: @escaping (Result<VerifiedClaims, CallbackFailure>) -> Void) {
        let verifier = JWTVerifier(allowedAlgorithms: algorithms, issuers: issuers, audience: audience, leeway: options.leeway)
        jwks.verify(token, with: verifier, expectedNonce: nil, on: loop, completion)
    }
}

extension GoogleProvider: TokenEndpointProviding {
    public func tokenEndpoint(on loop: EventLoop, _ completion: @escaping (Result<String, CallbackFailure>) -> Void) {
        completion(.success(tokenEndpoint))
    }
}
