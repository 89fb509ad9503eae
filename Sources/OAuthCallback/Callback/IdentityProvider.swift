import ProxyCore

/// Everything a provider needs to redeem one native authorization code. Built by the callback
/// pipeline only after the contract was parsed and the client pinned from configuration.
public struct ExchangeRequest: Sendable {
    public var provider: ProviderSettings
    public var platform: String
    /// The configured native client (never the URL's claim).
    public var client: NativeClient
    public var code: String
    public var codeVerifier: String?
    /// The nonce the id_token must carry, when one is known.
    public var expectedNonce: String?

    public init(provider: ProviderSettings, platform: String, client: NativeClient, code: String,
                codeVerifier: String?, expectedNonce: String? = nil) {
        self.provider = provider
        self.platform = platform
        self.client = client
        self.code = code
        self.codeVerifier = codeVerifier
        self.expectedNonce = expectedNonce
    }
}

/// The token endpoint's answer.
public struct TokenResponse: Sendable {
    public var accessToken: String
    public var tokenType: String
    public var idToken: String?
    public var refreshToken: String?
    public var expiresIn: Int64?
    public var scope: String?
    /// The body exactly as the provider sent it (the relay endpoint may answer with it).
    public var raw: [UInt8]

    public init(accessToken: String, tokenType: String = "Bearer", idToken: String? = nil, refreshToken: String? = nil,
                expiresIn: Int64? = nil, scope: String? = nil, raw: [UInt8] = []) {
        self.accessToken = accessToken
        self.tokenType = tokenType
        self.idToken = idToken
        self.refreshToken = refreshToken
        self.expiresIn = expiresIn
        self.scope = scope
        self.raw = raw
    }
}

/// A sign-in the proxy has verified.
public struct VerifiedIdentity: Sendable {
    public var provider: String
    public var subject: String
    public var email: String?
    public var emailVerified: Bool?
    public var name: String?
    /// The id_token's `preferred_username` (OIDC Core §5.1), when it has one.
    public var preferredUsername: String?
    /// The id_token's `groups` (a list of strings, or one string), as Keycloak, Okta, Azure AD and
    /// Dex send it when asked; empty when absent.
    public var groups: [String]
    /// Every claim of the verified id_token (empty when the provider gave none): what access
    /// rules read `hd` and a configured groups claim from.
    public var claims: [String: JSONValue]
    public var tokens: TokenResponse

    public init(provider: String, subject: String, email: String? = nil, emailVerified: Bool? = nil,
                name: String? = nil, preferredUsername: String? = nil, groups: [String] = [],
                claims: [String: JSONValue] = [:], tokens: TokenResponse) {
        self.claims = claims
        self.provider = provider
        self.subject = subject
        self.email = email
        self.emailVerified = emailVerified
        self.name = name
        self.preferredUsername = preferredUsername
        self.groups = groups
        self.tokens = tokens
    }
}

/// One provider kind (Google, Facebook, Apple, generic OIDC): exchanges a native code and
/// verifies the identity. Must not block: `completion` runs on `loop` exactly once, and never
/// inside the call itself (callers may hold state they update after `redeem` returns).
public protocol IdentityProvider: Sendable {
    func redeem(_ request: ExchangeRequest, on loop: EventLoop,
                _ completion: @escaping (Result<VerifiedIdentity, CallbackFailure>) -> Void)
}

/// Verifies an id_token the provider issued to one of our clients, outside a code exchange:
/// session mode's bearer tokens (`oauth.session.bearer_tokens`), which a native app sends on
/// its own API calls. Signature by the provider's keys, `iss`, `aud` containing `audience`
/// (and `azp`, when present, equal to it), `exp`/`iat` with the configured leeway.
public protocol IDTokenVerifying: Sendable {
    /// The `iss` values its id_tokens carry: a bearer token naming another issuer is not this
    /// provider's to judge.
    var acceptedIssuers: Set<String> { get }
    /// `completion` runs on `loop`, exactly once.
    func verifyIDToken(_ token: String, audience: String, on loop: EventLoop,
                       _ completion: @escaping (Result<VerifiedClaims, CallbackFailure>) -> Void)
}

/// Where RP-initiated logout sends the browser (OpenID Connect RP-Initiated Logout 1.0): the
/// configured `endpoints.end_session`, or (for `oidc`) the discovery document's. Nil: the
/// provider has none (Google does not offer one).
public protocol EndSessionProviding: Sendable {
    /// `completion` runs on `loop`.
    func endSessionEndpoint(on loop: EventLoop, _ completion: @escaping (String?) -> Void)
}

extension GoogleProvider: EndSessionProviding {
    public func endSessionEndpoint(on loop: EventLoop, _ completion: @escaping (String?) -> Void) {
        completion(settings.endpoints.endSession)
    }
}

/// Where a provider's real token endpoint is: the relay token endpoint forwards ordinary
/// (web) codes there verbatim, so the app's own web sign-in keeps working with one setting.
public protocol TokenEndpointProviding: Sendable {
    /// `completion` runs on `loop`.
    func tokenEndpoint(on loop: EventLoop, _ completion: @escaping (Result<String, CallbackFailure>) -> Void)
}
