import ProxyCore

/// `session` hand-off mode: the proxy's own sign-in (oauth2-proxy style), identity passed
/// upstream in headers. Present when any provider uses `handoff: session`.
public struct SessionSettings: Sendable, Equatable {
    /// Base name of the session cookie (`__Host-` is prefixed when `secure`, `__Secure-` with a
    /// `cookieDomain`). Default `_oauth_session`.
    public var cookieName = "_oauth_session"
    /// The `Domain` of the session and state cookies (`cookie_domain`, oauth2-proxy's
    /// `--cookie-domain`), lower-case, without a leading dot: one sign-in serves every host under
    /// it. nil (the default): host-only cookies, `__Host-` prefixed when `secure`.
    public var cookieDomain: String? = nil
    /// Cookie secrets, newest first (rotation: seal with the first, open with any). Each is
    /// stretched to a 32-byte AES key with SHA-256; at least 32 characters.
    public var secrets: [Secret] = []
    /// How long a session lasts (seconds). Default 12 h.
    public var lifetimeSeconds: Int64 = 12 * 3600
    /// A session unused this long ends (seconds); nil: only `lifetime` ends it. Server-side
    /// sessions only: the store record slides forward as it is used.
    public var idleTimeoutSeconds: Int64? = nil
    /// Re-check each session with its provider this often (seconds), with the refresh token
    /// the sign-in obtained (`SessionLayer+Refresh.swift`): new access token, new claims (groups,
    /// email, `hd`), the access rules applied again; `invalid_grant` ends the session. nil (the
    /// default): no refresh, a session lives on what its sign-in said until `lifetime`.
    /// Server-side sessions only: a refresh token never goes into a cookie.
    public var refreshIntervalSeconds: Int64? = nil
    /// Cookies carry `Secure` (and the `__Host-` prefix). Default true; turn off only for
    /// plain-http development.
    public var secure = true
    /// Hosts an absolute `rd` may point to (see `RedirectValidator`); relative paths always may.
    /// With a `cookieDomain`, every one lies under it (`check` refuses others).
    public var allowedRedirectHosts: [String] = []
    /// Pass the access token upstream (`X-Forwarded-Access-Token`). Default false.
    public var passAccessToken = false
    /// Which paths need a session: none (only headers for those who have one), all, or prefixes.
    public var protect: PathRule = .none
    /// Path prefixes that never need a session (matched on the path only, never the query).
    public var skip: [PathPrefix] = []
    /// `skip` entries that name methods (`GET /api/public`, oauth2-proxy's
    /// `--skip-auth-route=GET=^/api/public`): the path needs no session for those methods only.
    public var skipRoutes: [MethodRoute] = []
    /// A CORS preflight (`OPTIONS` with `Access-Control-Request-Method`) needs no session
    /// (oauth2-proxy's `--skip-auth-preflight`): browsers send it without cookies, so a
    /// protected API would otherwise fail every cross-origin call before it is made.
    public var skipPreflight = false
    /// Who may have a session at all (`allowed_*`, `allow_any_authenticated_user`); checked at
    /// sign-in and again on every request, so a reload that narrows it takes effect at once.
    public var access = AccessRule()
    /// Rules for some paths on top of `access` (`path_rules`); their paths need a session.
    public var pathRules: [PathAccessRule] = []
    /// `/_oauth/sign_out` continues to the provider's `end_session_endpoint` (RP-initiated
    /// logout), so its own sign-in session ends too; sessions then keep the id_token for the hint.
    public var signOutAtProvider = false
    /// Where the provider sends the browser after that (registered at the provider); nil: the
    /// provider's own page.
    public var postLogoutRedirectURI: String? = nil
    /// Providers whose id_tokens, issued to one of their native clients, API calls may carry as
    /// `Authorization: Bearer` instead of a session cookie (`bearer_tokens`).
    public var bearerProviders: [String] = []
    /// Issuers other than the providers whose JWTs API calls may carry as bearer tokens
    /// (`extra_jwt_issuers`; oauth2-proxy's `--extra-jwt-issuers`), verified by the same code.
    public var extraJWTIssuers: [ExtraJWTIssuer] = []
    /// Sessions can be revoked from outside (`revocation`; the internal listener's
    /// `POST /sessions/revoke`): every request with a session then reads its user's revocation
    /// markers from the store (`SessionRevocation`). Default false: nothing is read.
    public var revocation = false
    /// The names of the identity headers upstream, and the claim behind the user header.
    public var headers = IdentityHeaderNames()
    /// A proxy-signed JWT about the user with the identity headers (`jwt_assertion`); nil: none.
    public var jwtAssertion: JWTAssertionSettings? = nil
    /// The id_token claim that holds the user's groups: a name, or a dotted path into nested
    /// objects (`realm_access.roles`, Keycloak's roles). A list of strings, or one string.
    public var groupsClaim = "groups"
    /// Keep sessions in the store, the cookie carrying only a sealed random session id, so
    /// sign-out ends a session everywhere (a copied cookie dies with it). nil = follow the
    /// store: on with a shared store (redis), off with the in-memory one (sessions then live in
    /// the sealed cookie alone and survive restarts).
    public var serverSide: Bool? = nil
    /// Where a failed web sign-in lands (`?error=<code>` appended): a local path or an
    /// `allowed_redirect_hosts` URL. nil = the proxy's own error page.
    public var errorURL: String? = nil
    /// The web sign-in's redirect URI as registered at the provider
    /// (`https://app.example.com/_oauth/web_callback`). nil = derived per request from the
    /// `Host` header and `secure`: `https://<Host>/_oauth/web_callback`.
    public var webRedirectURI: String? = nil

    public enum PathRule: Sendable, Equatable {
        case none, all
        case prefixes([PathPrefix])
    }

    /// A path prefix for some methods only.
    public struct MethodRoute: Sendable, Equatable {
        public var methods: [HTTPMethod]
        public var prefix: PathPrefix

        public init(methods: [HTTPMethod], prefix: PathPrefix) {
            self.methods = methods
            self.prefix = prefix
        }

        /// The methods a route may name: the standard ones (an extension method cannot be told
        /// apart from another here, so none may be skipped by name).
        public static let namable: [String: HTTPMethod] = [
            "GET": .get, "HEAD": .head, "POST": .post, "PUT": .put, "DELETE": .delete, "OPTIONS": .options, "PATCH": .patch,
        ]
    }

    /// One `extra_jwt_issuers` entry: whose tokens, for which audiences, checked with which keys.
    public struct ExtraJWTIssuer: Sendable, Equatable {
        /// The exact `iss` its tokens carry.
        public var issuer: String
        /// Accepted `aud` values (with `azp`, when present, one of them too).
        public var audiences: [String]
        /// The JWKS document; nil: the issuer's discovery document's `jwks_uri`. Signatures
        /// are RS256 or ES256 (`JWSAlgorithm`: never `none`, never HMAC).
        public var jwksURI: String?

        public init(issuer: String, audiences: [String], jwksURI: String? = nil) {
            self.issuer = issuer
            self.audiences = audiences
            self.jwksURI = jwksURI
        }
    }

    public init() {}

    /// Whether `host` (a DNS name, any case) is `domain` or a name under it, on a label boundary.
    public static func isHost(_ host: String, under domain: String) -> Bool {
        let h = host.asciiLowercased()
        return h == domain || h.hasSuffix("." + domain)
    }

    /// The cookie-name prefix the browser enforces: `__Host-` binds a `Secure` cookie to this
    /// host alone (no `Domain` allowed), `__Secure-` is the strongest a cookie shared with a
    /// domain may carry (still `Secure`, so no plain-http page of a sibling can set it); none
    /// without `secure`.
    public var cookiePrefix: String {
        guard secure else { return "" }
        return cookieDomain == nil ? "__Host-" : "__Secure-"
    }

    /// Every claim path an `allowed_claims` rule reads, globally or per path, and the user
    /// header's claim when it is not one the session keeps anyway.
    public var claimPaths: [String] {
        var out: [String] = []
        if case .claim(let path) = headers.userClaim { out.append(path) }
        for rule in [access] + pathRules.map(\.rule) {
            for c in rule.claims where !out.contains(c.claim) { out.append(c.claim) }
        }
        return out
    }

    /// Whether the request path needs a session. Fails closed over the ways servers read a path
    /// (`PathReadings`): skipped only when every reading lies under a `skip` prefix exactly,
    /// protected when any reading lies under a `protect` prefix with ASCII case folded too (a
    /// case-insensitive router sends `/ADMIN` to `/admin`'s handler). Prefixes match on segment
    /// boundaries.
    public func requiresSession(_ readings: PathReadings, method: HTTPMethod) -> Bool {
        if !skip.isEmpty && readings.every({ p in skip.contains { $0.matches(p) } }) { return false }
        if !skipRoutes.isEmpty {
            let routes = skipRoutes.filter { $0.methods.contains(method) }
            if !routes.isEmpty && readings.every({ p in routes.contains { $0.prefix.matches(p) } }) { return false }
        }
        // A path with its own rule needs a session (unless skipped: `/admin/health` under a
        // `/admin` rule stays open when `skip` says so, exactly as written).
        if !pathRules.isEmpty && !pathRules(for: readings).isEmpty { return true }
        switch protect {
        case .none: return false
        case .all: return true
        case .prefixes(let list): return readings.any { p in list.contains { $0.covers(p) } }
        }
    }

    /// The path rules that apply to a request: those whose prefix matches any reading of its
    /// path, letter case folded (as `protect`).
    public func pathRules(for readings: PathReadings) -> [PathAccessRule] {
        pathRules.filter { rule in readings.any(rule.prefix.covers) }
    }

    /// The same for a path as a client might send it (configuration checks, tests). A path the
    /// engine would refuse counts as protected.
    public func requiresSession(_ path: String, method: HTTPMethod = .get) -> Bool {
        PathReadings.of(path) { requiresSession($0, method: method) } ?? true
    }
}
