import ProxyCore

/// The OAuth layer's configuration, as loaded and validated from the configuration file.
/// Plain values with documented defaults; secrets are already resolved (from env or files).
public struct OAuthSettings: Sendable, Equatable {
    /// Providers by the name the wrapper app puts in `provider=` (e.g. `google`).
    public var providers: [String: ProviderSettings] = [:]
    /// Provider names in the order the configuration lists them (the chooser's order).
    public var providerOrder: [String] = []
    /// The path the wrapper app loads. Default `/_oauth_callback`.
    public var callbackPath = "/_oauth_callback"
    /// How long a seen code is remembered by the replay guard (seconds). Default 600.
    public var replayWindowSeconds: Int64 = 600
    /// Leeway for id_token `exp`/`iat`/`nbf` (seconds). Default 300, at most 300.
    public var clockLeewaySeconds: Int64 = 300
    /// CA bundle for outbound TLS (IdP calls); nil = the system store. Never "verify off".
    public var caFile: String? = nil
    /// Timeout of one outbound IdP call (nanoseconds). Default 10 s.
    public var idpTimeout: UInt64 = 10_000_000_000
    /// How often each provider's discovery document and keys are fetched in the background to
    /// see that a sign-in could work (nanoseconds; 0 = never, not even at start-up). Default 5 min.
    public var providerCheckInterval: UInt64 = 300_000_000_000
    /// The relay token endpoint's path on the internal listener. Default `/_oauth/token`.
    public var relayTokenPath = "/_oauth/token"
    /// How long a relay code may wait to be redeemed (seconds). Default 60, at most 60.
    public var relayCodeTTLSeconds: Int64 = 60
    /// `session` mode's settings; required when a provider uses it.
    public var session: SessionSettings? = nil
    /// Callbacks per client address (`oauth.rate_limit`); nil = unlimited (the default).
    public var rateLimit: RateLimit? = nil
    /// `oauth.app_links`: the universal-link / App Link files served for the site's domain.
    public var appLinks: AppLinks? = nil

    public init() {}
}

public enum ProviderKind: String, Sendable, CaseIterable {
    case google, facebook, apple, oidc
}

/// How a verified sign-in is handed to the app (see DESIGN §2).
public enum HandoffMode: String, Sendable, CaseIterable {
    case relay, params, session
    /// Verify only and answer a minimal page: for checking a provider's setup end to end
    /// before the site is involved (and for the callback test suite and benchmarks).
    case verify
}

public struct ProviderSettings: Sendable, Equatable {
    public var name: String
    public var kind: ProviderKind
    public var handoff: HandoffMode = .relay
    /// The app's own OAuth callback path (relay/params), e.g. `/users/auth/google_oauth2/callback`.
    public var appCallback: String? = nil
    /// Native clients by platform (`ios`, `android`).
    public var native: [String: NativeClient] = [:]
    /// The app's (web) client: authenticates the app at the relay token endpoint, and is the
    /// client the proxy's own web sign-in uses in `session` mode.
    public var appClient: ClientCredentials? = nil
    public var endpoints = ProviderEndpoints()
    /// id_token algorithms accepted for this provider. Defaults per kind (Google: RS256).
    public var allowedAlgorithms: [String] = []
    /// Relay mode: leave these out of the token response the app redeems (an app that checks
    /// the id_token's `aud` against its web client would refuse the native one).
    public var relayOmitIDToken = false
    public var relayOmitRefreshToken = false
    /// What session mode's provider chooser calls it (`display_name`); default from the kind.
    public var displayName: String? = nil
    public var facebook: FacebookSettings? = nil
    public var apple: AppleSettings? = nil

    public init(name: String, kind: ProviderKind) {
        self.name = name
        self.kind = kind
    }
}

/// A native (installed-app) OAuth client: public, custom-scheme redirect, PKCE — except
/// where the provider makes it confidential (Facebook: app secret; Apple: signed JWT).
public struct NativeClient: Sendable, Equatable {
    public var clientID: String
    /// The exact redirect the app used. For Google iOS clients it defaults to the reversed
    /// client id: `com.googleusercontent.apps.<id>:/oauth2redirect`.
    public var redirectURI: String
    /// Only for OIDC providers whose native clients are confidential.
    public var clientSecret: Secret? = nil
    /// `client_secret_post` (default) or `client_secret_basic`, for confidential clients.
    public var clientAuth: ClientAuthMethod = .post

    public init(clientID: String, redirectURI: String, clientSecret: Secret? = nil, clientAuth: ClientAuthMethod = .post) {
        self.clientID = clientID
        self.redirectURI = redirectURI
        self.clientSecret = clientSecret
        self.clientAuth = clientAuth
    }

    /// Google's derived iOS redirect for a client id like `123-abc.apps.googleusercontent.com`.
    public static func googleIOSRedirect(for clientID: String) -> String? {
        let suffix = ".apps.googleusercontent.com"
        guard clientID.hasSuffix(suffix) else { return nil }
        let id = clientID.dropLast(suffix.count)
        guard !id.isEmpty else { return nil }
        return "com.googleusercontent.apps.\(id):/oauth2redirect"
    }
}

public enum ClientAuthMethod: String, Sendable {
    case post = "client_secret_post"
    case basic = "client_secret_basic"
}

public struct ClientCredentials: Sendable, Equatable {
    public var clientID: String
    public var clientSecret: Secret
    /// How the proxy authenticates this (web) client at the provider's token endpoint in
    /// session mode's web sign-in. Default `client_secret_post` (what Google documents).
    public var clientAuth: ClientAuthMethod = .post
    public init(clientID: String, clientSecret: Secret, clientAuth: ClientAuthMethod = .post) {
        self.clientID = clientID
        self.clientSecret = clientSecret
        self.clientAuth = clientAuth
    }
}

/// Endpoint overrides (tests, regional endpoints). Unset ones take the provider's defaults
/// (or, for `oidc`, come from discovery).
public struct ProviderEndpoints: Sendable, Equatable {
    public var issuer: String? = nil
    public var discovery: String? = nil
    public var authorization: String? = nil
    public var token: String? = nil
    public var jwks: String? = nil
    public var userinfo: String? = nil
    /// Facebook Graph API base, e.g. `https://graph.facebook.com/v26.0` (`GraphAPIVersions.newest` by default).
    public var graph: String? = nil
    /// RP-initiated logout (`end_session_endpoint`); an `oidc` provider's comes from discovery.
    public var endSession: String? = nil
    public init() {}
}

public struct FacebookSettings: Sendable, Equatable {
    public var appID: String
    public var appSecret: Secret
    public init(appID: String, appSecret: Secret) {
        self.appID = appID
        self.appSecret = appSecret
    }
}

public struct AppleSettings: Sendable, Equatable {
    public var teamID: String
    public var keyID: String
    /// The `.p8` PKCS#8 PEM, read once at start-up.
    public var privateKeyPEM: Secret
    public init(teamID: String, keyID: String, privateKeyPEM: Secret) {
        self.teamID = teamID
        self.keyID = keyID
        self.privateKeyPEM = privateKeyPEM
    }
}

/// A secret value. Its description never shows the value, so it cannot leak into a log line
/// or an error message by accident.
public struct Secret: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible {
    public let value: String
    public init(_ value: String) { self.value = value }
    public var description: String { "<redacted>" }
    public var debugDescription: String { "<redacted>" }
}
