import ProxyCore
#if canImport(Glibc)
import Glibc
#endif

/// Builds the `IdentityProvider` for one configured provider. Called once per provider at
/// start-up; the value it returns is shared by every event loop.
public enum ProviderFactory {
    /// Unix seconds from the system's real-time clock (id_token `exp`/`iat` are wall-clock).
    public static let systemClock: @Sendable () -> Int64 = { Int64(time(nil)) }

    /// - Throws: `ProviderConfigurationError` when the settings cannot make a working provider
    ///   (missing `facebook`/`apple` block, unreadable Apple key, unknown algorithm, an `oidc`
    ///   provider without an issuer).
    public static func make(_ settings: ProviderSettings, http: any HTTPFetching,
                            clock: @escaping @Sendable () -> Int64 = systemClock,
                            options: ProviderOptions = ProviderOptions()) throws(ProviderConfigurationError) -> any IdentityProvider {
        switch settings.kind {
        case .google: return try GoogleProvider(settings, http: http, clock: clock, options: options)
        case .facebook: return try FacebookProvider(settings, http: http, clock: clock, options: options)
        case .apple: return try AppleProvider(settings, http: http, clock: clock, options: options)
        case .oidc: return try OIDCProvider(settings, http: http, clock: clock, options: options)
        }
    }
}

/// What every provider takes from the global OAuth settings (`ProviderSettings` does not
/// carry them).
public struct ProviderOptions: Sendable {
    /// Leeway for id_token `exp`/`iat`/`nbf`, seconds. Default 300 (`JWTVerifier.defaultLeeway`).
    public var leeway: Int64 = JWTVerifier.defaultLeeway
    /// Timeout of one outbound IdP call, nanoseconds. Default 10 s.
    public var timeout: UInt64 = 10_000_000_000
    /// JWKS caching and refetch rules. Default `JWKSCache.Policy()`.
    public var jwksPolicy = JWKSCache.Policy()
    /// After a failed OIDC discovery, how long logins fail fast before the next attempt,
    /// seconds. Default 30.
    public var discoveryRetryBackoff: Int64 = 30

    public init() {}

    /// Leeway and timeout from the OAuth settings; the rest default.
    public init(_ settings: OAuthSettings) {
        leeway = settings.clockLeewaySeconds
        timeout = settings.idpTimeout
    }
}

/// A provider's settings cannot make a working provider. `description` names the provider
/// and the problem, never a secret.
public struct ProviderConfigurationError: Error, Sendable, Equatable, CustomStringConvertible {
    public let provider: String
    public let problem: String

    public init(provider: String, _ problem: String) {
        self.provider = provider
        self.problem = problem
    }

    public var description: String { "provider \(provider): \(problem)" }
}

/// Pieces every provider file shares.
enum ProviderSupport {
    /// The configured `allowedAlgorithms`, or `defaults` when none are configured.
    static func algorithms(_ settings: ProviderSettings,
                           default defaults: Set<JWSAlgorithm>) throws(ProviderConfigurationError) -> Set<JWSAlgorithm> {
        guard !settings.allowedAlgorithms.isEmpty else { return defaults }
        var set: Set<JWSAlgorithm> = []
        for name in settings.allowedAlgorithms {
            guard let alg = JWSAlgorithm(rawValue: name) else {
                let known = JWSAlgorithm.allCases.map(\.rawValue).joined(separator: ", ")
                throw ProviderConfigurationError(provider: settings.name,
                                                 "allowed_algorithms: \(name) is not supported (supported: \(known))")
            }
            set.insert(alg)
        }
        return set
    }

    /// A token endpoint's `invalid_client` (RFC 6749 §5.2) refuses the client itself — its id,
    /// its secret or how the secret was sent — for every sign-in, until the configuration
    /// changes: a `config` failure naming that client's settings.
    static func clientRefused(_ failure: CallbackFailure, provider: String, platform: String,
                              kind: ProviderKind) -> CallbackFailure {
        guard failure.source == .idp, failure.logDetail.contains("error=invalid_client") else { return failure }
        let client = platform == "web" ? "providers.\(provider).app_client" : "providers.\(provider).native.\(platform)"
        var out = failure
        out.source = .config
        if kind == .apple {
            // Apple's client secret is the JWT the proxy signs with the .p8 key.
            out.setting = "providers.\(provider).private_key_file"
            out.logDetail += " (Apple refuses the client-secret JWT: check team_id, key_id, private_key_file and \(client).client_id)"
        } else {
            out.setting = client
            out.logDetail += " (the IdP refuses this client: check \(client)'s client_id, secret and client_auth)"
        }
        return out
    }

    /// `url` without trailing slashes (for bases that paths are appended to).
    static func trimmingTrailingSlashes(_ url: String) -> String {
        var s = Substring(url)
        while s.hasSuffix("/") { s = s.dropLast() }
        return String(s)
    }

    /// The identity an id_token vouches for.
    static func identity(_ claims: VerifiedClaims, provider: String, tokens: TokenResponse) -> VerifiedIdentity {
        VerifiedIdentity(provider: provider, subject: claims.subject, email: claims.email,
                         emailVerified: claims.emailVerified, name: claims.name,
                         preferredUsername: claims.raw["preferred_username"]?.stringValue,
                         groups: groups(claims.raw["groups"]), claims: claims.raw, tokens: tokens)
    }

    /// `groups` as a list of strings (one string is a list of one); anything else is no groups.
    static func groups(_ claim: JSONValue?) -> [String] {
        if let one = claim?.stringValue { return [one] }
        return claim?.arrayValue?.compactMap(\.stringValue) ?? []
    }

    /// The common tail of an OpenID code exchange (Google, Apple, OIDC): POST the token form
    /// once, parse the answer (hiding codes and secrets from its log details), require an
    /// id_token and verify it against the provider's keys.
    static func redeemForIDToken(_ form: OutboundRequest, http: any HTTPFetching, context: String, hiding hidden: [String],
                                 jwks: JWKSSource, verifier: JWTVerifier, expectedNonce: String?, provider: String,
                                 platform: String, kind: ProviderKind,
                                 on loop: EventLoop, _ done: LoopCompletion<Result<VerifiedIdentity, CallbackFailure>>) {
        http.fetch(form, on: loop) { result in
            let tokens: TokenResponse
            switch TokenResponseParsing.parse(result, context: context, hiding: hidden) {
            case .failure(let failure):
                return done.complete(.failure(clientRefused(failure, provider: provider, platform: platform, kind: kind)),
                                     from: loop)
            case .success(let t): tokens = t
            }
            guard let idToken = tokens.idToken else {
                return done.complete(.failure(missingIDToken(context)), from: loop)
            }
            jwks.verify(idToken, with: verifier, expectedNonce: expectedNonce, on: loop) { verified in
                done.complete(verified.map { identity($0, provider: provider, tokens: tokens) }, from: loop)
            }
        }
    }

    /// A token response that must carry an id_token but does not.
    static func missingIDToken(_ context: String) -> CallbackFailure {
        CallbackFailure(.idp, code: "invalid_id_token", userMessage: ProviderText.notVerified,
                        logDetail: "\(context): token response has no id_token")
    }

    /// How a client proves itself at a token endpoint: a confidential client (an OIDC native
    /// client with a secret, or the site's web client in `session` mode's web sign-in) sends its
    /// secret as `client_secret_post` (id and secret in the body) or `client_secret_basic`
    /// (RFC 6749 §2.3.1); a public one sends only its id, and must then use PKCE.
    /// - Returns: the body fields and headers to add, and the secret to hide from log details;
    ///   nil for a public client without a verifier (the exchange is refused before any call).
    static func clientAuthentication(_ client: NativeClient, codeVerifier: String?)
        -> (fields: [(String, String)], headers: [(name: String, value: String)], hidden: [String])? {
        guard let secret = client.clientSecret else {
            // RFC 8252 §8.1: a public client must use PKCE; without the verifier the exchange is
            // either refused or, worse, unprotected.
            guard let verifier = codeVerifier, !verifier.isEmpty else { return nil }
            return ([("client_id", client.clientID)], [], [])
        }
        switch client.clientAuth {
        case .post:
            return ([("client_id", client.clientID), ("client_secret", secret.value)], [], [secret.value])
        case .basic:
            return ([], [("Authorization", OIDCProvider.basicAuthorization(clientID: client.clientID, secret: secret))],
                    [secret.value])
        }
    }

    /// The request cannot be sent as the provider requires (refused before any IdP call, so
    /// the code is not burnt).
    static func invalidRequest(_ detail: String) -> CallbackFailure {
        CallbackFailure(.client, code: "invalid_request", userMessage: ProviderText.exchangeFailed, logDetail: detail)
    }
}
