/// Who is signed in through the proxy in `session` hand-off mode: what the encrypted session
/// cookie carries and what the identity headers to the upstream are made from. Built from a
/// verified id_token (or the provider's userinfo), never from anything the client sent.
public struct ProxySession: Sendable, Equatable {
    /// The configured provider name (`google`, `apple`, …).
    public var provider: String
    /// The IdP's stable user id (`sub`): what `X-Forwarded-User` carries.
    public var subject: String
    public var email: String?
    /// Whether the IdP vouches for `email`. An unverified address is never passed upstream:
    /// an app that links accounts by `X-Forwarded-Email` would otherwise be open to takeover.
    public var emailVerified: Bool
    /// The display name (`name` claim).
    public var name: String?
    /// `preferred_username`, when the IdP provides one.
    public var preferredUsername: String?
    public var groups: [String]
    /// When a request last used the session (seconds since the epoch), for `idle_timeout`
    /// (server-side sessions only; written at most once a minute).
    public var seenAt: Int64? = nil
    /// The id_token, kept only for RP-initiated logout's `id_token_hint` (`sign_out.at_provider`).
    public var idToken: String? = nil
    /// The id_token's `hd` (Google Workspace domain), for `allowed_hosted_domains`.
    public var hostedDomain: String?
    /// Only kept when the operator passes it upstream (`X-Forwarded-Access-Token` /
    /// `Authorization: Bearer`); otherwise nil, which also keeps the cookie small.
    public var accessToken: String?
    /// The refresh token of the sign-in (`refresh_interval`; server-side sessions only: it is
    /// in the store record, never in a cookie, a header or a log line).
    public var refreshToken: String? = nil
    /// Which client obtained `refreshToken`: `web` (the app's web client) or the native
    /// platform (`ios`, …) whose client redeemed the code. A refresh must be made by that same
    /// client, with its own authentication (secret or none), or the IdP refuses it.
    public var refreshClient: String? = nil
    /// When the session's claims were last checked with the IdP (the sign-in, then each
    /// successful refresh), seconds since the epoch.
    public var refreshedAt: Int64? = nil
    /// When a refresh last found the IdP unavailable: the next try waits (see `SessionRefresh`).
    public var refreshFailedAt: Int64? = nil
    /// The claims `allowed_claims` rules read (by dotted path), kept from the id_token so a
    /// reload that adds or narrows such a rule is applied at every request.
    public var ruleClaims: [String: JSONValue] = [:]
    /// Seconds since the epoch.
    public var issuedAt: Int64
    /// Seconds since the epoch; the session is refused at or after this instant.
    public var expiresAt: Int64

    public init(provider: String, subject: String, email: String? = nil, emailVerified: Bool = false,
                name: String? = nil, preferredUsername: String? = nil, groups: [String] = [],
                hostedDomain: String? = nil, accessToken: String? = nil, issuedAt: Int64, expiresAt: Int64) {
        self.hostedDomain = hostedDomain
        self.provider = provider
        self.subject = subject
        self.email = email
        self.emailVerified = emailVerified
        self.name = name
        self.preferredUsername = preferredUsername
        self.groups = groups
        self.accessToken = accessToken
        self.issuedAt = issuedAt
        self.expiresAt = expiresAt
    }

    /// The address to pass upstream: only a verified one.
    public var verifiedEmail: String? { emailVerified ? email : nil }

    /// What the access rules look at.
    public var accessSubject: AccessSubject {
        AccessSubject(email: email, emailVerified: emailVerified, groups: groups, hostedDomain: hostedDomain, claims: ruleClaims)
    }
}
