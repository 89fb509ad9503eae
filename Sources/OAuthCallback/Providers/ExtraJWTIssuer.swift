import ProxyCore

/// An issuer that is not a sign-in provider but whose JWTs session mode accepts as bearer
/// tokens (`oauth.session.extra_jwt_issuers`, oauth2-proxy's `--extra-jwt-issuers`): another
/// team's IdP tenant, a service-to-service token issuer.
///
/// Verification is the providers' own, not a second implementation: `JWTVerifier` (RS256 or
/// ES256 only, signature first, then `iss` exactly, `aud` holding the audience and `azp` —
/// when present — equal to it, `exp`/`iat`/`nbf` with the configured leeway) over a
/// `JWKSSource` (cached keys, one refetch for an unknown `kid` at most every few seconds). The
/// keys come from `jwks_uri`, else from the issuer's discovery document, as for an `oidc`
/// provider (its `issuer` must equal the configured one exactly).
public struct ExtraJWTIssuer: IDTokenVerifying {
    public let issuer: String
    /// Where its keys are found, for the warning when they cannot be had.
    public let setting: String
    private let keys: Keys
    private let leeway: Int64

    private enum Keys: Sendable {
        case jwks(JWKSSource)
        case discovery(OIDCProvider.Discovery)
    }

    /// - Parameter index: the entry's position in `extra_jwt_issuers`, to name it in logs.
    public init(_ settings: SessionSettings.ExtraJWTIssuer, index: Int, http: any HTTPFetching,
                clock: @escaping @Sendable () -> Int64 = ProviderFactory.systemClock, options: ProviderOptions = ProviderOptions()) {
        issuer = settings.issuer
        leeway = options.leeway
        let label = "extra_jwt_issuers[\(index)]"
        if let uri = settings.jwksURI {
            setting = "oauth.session.\(label).jwks_uri"
            keys = .jwks(JWKSSource(url: uri, label: label, http: http, clock: clock, policy: options.jwksPolicy,
                                    timeout: options.timeout))
        } else {
            setting = "oauth.session.\(label).issuer (its discovery document's jwks_uri)"
            let url = ProviderSupport.trimmingTrailingSlashes(settings.issuer) + "/.well-known/openid-configuration"
            keys = .discovery(OIDCProvider.Discovery(url: url, issuer: settings.issuer, tokenOverride: nil, jwksOverride: nil,
                                                     tokenEndpointRequired: false, label: label, http: http, clock: clock,
                                                     options: options))
        }
    }

    public var acceptedIssuers: Set<String> { [issuer] }

    public func verifyIDToken(_ token: String, audience: String, on loop: EventLoop,
                              _ completion: @escaping (Result<VerifiedClaims, CallbackFailure>) -> Void) {
        let verifier = JWTVerifier(allowedAlgorithms: [.rs256, .es256], issuers: [issuer], audience: audience, leeway: leeway)
        switch keys {
        case .jwks(let source):
            source.verify(token, with: verifier, expectedNonce: nil, on: loop, completion)
        case .discovery(let discovery):
            discovery.metadata(on: loop) { result in
                switch result {
                case .failure(let failure): completion(.failure(failure))
                case .success(let metadata): metadata.jwks.verify(token, with: verifier, expectedNonce: nil, on: loop, completion)
                }
            }
        }
    }
}
