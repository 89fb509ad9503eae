import ProxyCore
import Synchronization

/// Sign in with Apple. The client authenticates with a "client secret" it signs itself (an
/// ES256 JWT from the team's `.p8` key); a native code (from `ASAuthorizationController` or a
/// system-browser flow with the bundle id) is redeemed **without** `redirect_uri`.
///
/// Exchange: `POST https://appleid.apple.com/auth/token` with `grant_type`, `code`,
/// `client_id`, `client_secret` (+ `code_verifier` when the app used PKCE). Verify: RS256
/// against Apple's JWKS, `iss` = `https://appleid.apple.com`, `aud` = the client id. Apple
/// sends `email_verified` as the string `"true"`/`"false"`; `VerifiedClaims` reads both forms.
/// Apple puts no name in the id_token (the app receives it once, on first sign-in).
public struct AppleProvider: IdentityProvider {
    public static let defaultTokenEndpoint = "https://appleid.apple.com/auth/token"
    public static let defaultJWKS = "https://appleid.apple.com/auth/keys"
    public static let defaultIssuer = "https://appleid.apple.com"

    /// Client secrets are minted for 1 h and replaced once they are 30 min old.
    ///
    /// Apple accepts up to 6 months, but nothing is gained by long-lived secrets: minting one is
    /// a single ES256 signature, and a short lifetime bounds what a leaked secret (a
    /// misconfigured TLS-intercepting egress proxy, a debug dump) is worth. Renewing at half
    /// life means a secret is never presented with less than 30 min left, so neither clock skew
    /// against Apple nor a slow exchange can make it expire in flight.
    public static let clientSecretLifetime: Int64 = 3_600
    public static let clientSecretRenewalAge: Int64 = 1_800
    /// `iat` is set this far in the past, so a clock running slightly ahead of Apple's does
    /// not produce a secret "issued in the future".
    public static let clientSecretBackdating: Int64 = 60

    public let settings: ProviderSettings
    public let tokenEndpoint: String
    public let issuer: String
    public let algorithms: Set<JWSAlgorithm>
    public let jwks: JWKSSource
    private let apple: AppleSettings
    private let key: P256PrivateKey
    private let secrets: ClientSecretCache
    private let http: any HTTPFetching
    private let clock: @Sendable () -> Int64
    private let options: ProviderOptions

    public init(_ settings: ProviderSettings, http: any HTTPFetching, clock: @escaping @Sendable () -> Int64,
                options: ProviderOptions = ProviderOptions()) throws(ProviderConfigurationError) {
        guard let apple = settings.apple else {
            throw ProviderConfigurationError(provider: settings.name,
                                             "kind apple needs apple.team_id, apple.key_id and apple.private_key")
        }
        guard !apple.teamID.isEmpty, !apple.keyID.isEmpty else {
            throw ProviderConfigurationError(provider: settings.name, "apple.team_id and apple.key_id must not be empty")
        }
        do {
            key = try P256PrivateKey(pem: apple.privateKeyPEM.value)
        } catch {
            // The error names the OpenSSL call, not the key.
            throw ProviderConfigurationError(provider: settings.name,
                                             "apple.private_key is not a P-256 private key in PEM (\(error.description))")
        }
        self.settings = settings
        self.apple = apple
        self.http = http
        self.clock = clock
        self.options = options
        tokenEndpoint = settings.endpoints.token ?? Self.defaultTokenEndpoint
        issuer = settings.endpoints.issuer ?? Self.defaultIssuer
        algorithms = try ProviderSupport.algorithms(settings, default: [.rs256])
        jwks = JWKSSource(url: settings.endpoints.jwks ?? Self.defaultJWKS, label: settings.name, http: http,
                          clock: clock, policy: options.jwksPolicy, timeout: options.timeout)
        secrets = ClientSecretCache()
    }

    public func redeem(_ request: ExchangeRequest, on loop: EventLoop,
                       _ completion: @escaping (Result<VerifiedIdentity, CallbackFailure>) -> Void) {
        let done = LoopCompletion(loop, completion)
        let context = "\(settings.name) token endpoint"
        let clientSecret: String
        switch currentClientSecret(for: request.client.clientID) {
        case .success(let s): clientSecret = s
        case .failure(let failure): return done.completeLater(.failure(failure))
        }
        var fields = [
            ("grant_type", "authorization_code"),
            ("code", request.code),
            ("client_id", request.client.clientID),
            ("client_secret", clientSecret),
        ]
        // Apple binds a web code to its redirect_uri, but a native code has none and Apple
        // refuses the exchange when one is sent.
        if let codeVerifier = request.codeVerifier { fields.append(("code_verifier", codeVerifier)) }
        let verifier = JWTVerifier(allowedAlgorithms: algorithms, issuers: [issuer], audience: request.client.clientID,
                                   leeway: options.leeway)
        let provider = settings.name
        let hidden = [request.code, clientSecret] + (request.codeVerifier.map { [$0] } ?? [])
        ProviderSupport.redeemForIDToken(.form(url: tokenEndpoint, fields: fields, timeout: options.timeout), http: http,
                                         context: context, hiding: hidden, jwks: jwks, verifier: verifier,
                                         expectedNonce: request.expectedNonce, provider: provider,
                                         platform: request.platform, kind: .apple, on: loop, done)
    }

    /// The cached client secret for `clientID`, minted anew when missing or half-way to expiry.
    func currentClientSecret(for clientID: String) -> Result<String, CallbackFailure> {
        let now = clock()
        return secrets.secret(for: clientID, now: now) { () throws(JOSEError) -> String in
            try AppleClientSecret.make(teamID: apple.teamID, clientID: clientID, keyID: apple.keyID, key: key,
                                       now: now - Self.clientSecretBackdating, lifetime: Self.clientSecretLifetime)
        }.mapError { error in
            CallbackFailure(.internal, code: "internal_error", userMessage: ProviderText.misconfigured,
                            logDetail: "\(settings.name) client secret could not be signed: \(error.description)")
        }
    }
}

/// Apple client secrets by client id (an app may have an iOS bundle id and a Services ID).
///
/// A `Mutex`, like `JWKSSource`: one provider value is shared by all loops, and per-loop copies
/// would only sign N times as often. Minting happens under the lock — one ECDSA signature,
/// about once every 30 minutes — so two loops never mint at once for nothing.
private final class ClientSecretCache: Sendable {
    private struct Entry {
        let secret: String
        let mintedAt: Int64
    }

    private let entries = Mutex<[String: Entry]>([:])

    func secret(for clientID: String, now: Int64,
                mint: () throws(JOSEError) -> String) -> Result<String, JOSEError> {
        entries.withLock { entries -> Result<String, JOSEError> in
            // A clock that went backwards also gets a new secret (its iat could be "future").
            if let entry = entries[clientID], now >= entry.mintedAt,
               now - entry.mintedAt < AppleProvider.clientSecretRenewalAge {
                return .success(entry.secret)
            }
            do throws(JOSEError) {
                let secret = try mint()
                entries[clientID] = Entry(secret: secret, mintedAt: now)
                return .success(secret)
            } catch {
                return .failure(error)
            }
        }
    }
}

extension AppleProvider: IDTokenVerifying {
    public var acceptedIssuers: Set<String> { [issuer] }

    public func verifyIDToken(_ token: String, audience: String, on loop: EventLoop,
                              _ completion: @escaping (Result<VerifiedClaims, CallbackFailure>) -> Void) {
        let verifier = JWTVerifier(allowedAlgorithms: algorithms, issuers: [issuer], audience: audience, leeway: options.leeway)
        jwks.verify(token, with: verifier, expectedNonce: nil, on: loop, completion)
    }
}

extension AppleProvider: TokenEndpointProviding {
    public func tokenEndpoint(on loop: EventLoop, _ completion: @escaping (Result<String, CallbackFailure>) -> Void) {
        completion(.success(tokenEndpoint))
    }
}
