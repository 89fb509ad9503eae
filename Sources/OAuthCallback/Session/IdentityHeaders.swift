/// The identity headers of `session` hand-off mode, with oauth2-proxy's names so apps already
/// set up behind oauth2-proxy (Grafana, Gitea, Jenkins, …) work unchanged.
///
/// An app that trusts `X-Forwarded-Email` trusts whoever can set it, so every client-sent
/// variant of these names is stripped before the proxy adds its own. "Variant" is what a
/// server behind us may fold onto the same name: any ASCII case, and `_` for `-` (Rack,
/// Django, PHP and CGI all turn `X_Forwarded_Email` and `X-Forwarded-Email` into the same
/// `HTTP_X_FORWARDED_EMAIL`).
/// The names the upstream request carries, and the claim behind the user header
/// (`oauth.session.headers`): Gitea wants a username in `X-WEBAUTH-USER`, Google's `sub` is a
/// number. Defaults are oauth2-proxy's.
public struct IdentityHeaderNames: Sendable, Equatable {
    public var user = IdentityHeaders.forwardedUser
    public var email = IdentityHeaders.forwardedEmail
    public var preferredUsername = IdentityHeaders.forwardedPreferredUsername
    public var groups = IdentityHeaders.forwardedGroups
    public var accessToken = IdentityHeaders.forwardedAccessToken
    /// The proxy-signed JWT (`jwt_assertion`); stripped from client requests whether or not
    /// the proxy sends one.
    public var jwtAssertion = IdentityHeaders.jwtAssertion
    /// What the user header holds.
    public var userClaim = UserClaim.sub

    public enum UserClaim: Sendable, Equatable {
        /// The IdP's stable id.
        case sub
        /// The verified address (none when unverified: then no user header at all).
        case email
        case preferredUsername
        /// Any other claim, by name or dotted path (`employee_id`, `ext.login`): kept in the
        /// session beside the claims the access rules read; a string or a number, else no
        /// user header at all.
        case claim(String)

        /// `sub`, `email`, `preferred_username`, or any other claim name or dotted path.
        public init?(text: String) {
            switch text {
            case "sub": self = .sub
            case "email": self = .email
            case "preferred_username": self = .preferredUsername
            default:
                guard ClaimRule.isPath(text) else { return nil }
                self = .claim(text)
            }
        }
    }

    public init() {}

    /// Every name these set, for stripping what clients send under them.
    public var all: [String] { [user, email, preferredUsername, groups, accessToken, jwtAssertion] }
}

public enum IdentityHeaders {
    /// Upstream request headers (`headers(for:…)`).
    public static let forwardedUser = "X-Forwarded-User"
    public static let forwardedEmail = "X-Forwarded-Email"
    public static let forwardedPreferredUsername = "X-Forwarded-Preferred-Username"
    public static let forwardedGroups = "X-Forwarded-Groups"
    public static let forwardedAccessToken = "X-Forwarded-Access-Token"
    public static let jwtAssertion = "X-Jwt-Assertion"
    /// Forward-auth response headers (`/_oauth/auth`, `authRequestHeaders(for:…)`).
    public static let authRequestUser = "X-Auth-Request-User"
    public static let authRequestEmail = "X-Auth-Request-Email"
    public static let authRequestPreferredUsername = "X-Auth-Request-Preferred-Username"
    public static let authRequestGroups = "X-Auth-Request-Groups"
    public static let authRequestAccessToken = "X-Auth-Request-Access-Token"
    public static let authorization = "Authorization"

    /// Every name the proxy may set, except `Authorization` (see `isIdentityHeader`). Every
    /// `X-Auth-Request-*` name is stripped from requests too, these and any other
    /// (`X-Auth-Request-Uid`…): nginx copies them from the auth subrequest into upstream
    /// headers, other gateways set more of them, and a client must not be able to pre-set one.
    public static let names: [String] = [
        forwardedUser, forwardedEmail, forwardedPreferredUsername, forwardedGroups, forwardedAccessToken, jwtAssertion,
        authRequestUser, authRequestEmail, authRequestPreferredUsername, authRequestGroups, authRequestAccessToken,
    ]

    /// Whether a client-sent header must be removed before the proxy adds its own.
    /// - Parameter includingAuthorization: true when the proxy passes `Authorization: Bearer`
    ///   upstream; otherwise the client's own `Authorization` is the app's business.
    public static func isIdentityHeader(_ name: String, includingAuthorization: Bool = false) -> Bool {
        isIdentityHeader(name.utf8, includingAuthorization: includingAuthorization)
    }

    /// The same over raw bytes, for the request path (a slice of the read buffer).
    public static func isIdentityHeader(_ name: some Collection<UInt8>, includingAuthorization: Bool = false) -> Bool {
        // Every identity name starts with `x-`/`x_`; only `Authorization` does not.
        if includingAuthorization, matches(name, authorizationFolded) { return true }
        guard name.count >= 6, let first = name.first, first | 0x20 == UInt8(ascii: "x") else { return false }
        for candidate in foldedNames where candidate.count == name.count {
            if matches(name, candidate) { return true }
        }
        return name.count > authRequestPrefix.count && matches(name.prefix(authRequestPrefix.count), authRequestPrefix)
    }

    /// A matcher for the request path: the default names, `Authorization` when asked, and
    /// every configured name — each in every spelling (case, `_` for `-`). The defaults stay
    /// stripped when other names are configured: an app may still trust them.
    public static func matcher(_ names: IdentityHeaderNames, includingAuthorization: Bool) -> @Sendable (UnsafeRawBufferPointer) -> Bool {
        let extra = names.all.filter { n in !Self.names.contains { $0.lowercased() == n.lowercased() } }.map { Array($0.utf8).map(fold) }
        if extra.isEmpty { return { isIdentityHeader($0, includingAuthorization: includingAuthorization) } }
        return { name in
            if isIdentityHeader(name, includingAuthorization: includingAuthorization) { return true }
            for candidate in extra where candidate.count == name.count && matches(name, candidate) { return true }
            return false
        }
    }

    /// Headers to add to the upstream request, in this order. Values holding control
    /// characters (a CR/LF would split the header) or empty values are left out.
    /// - Parameters:
    ///   - passAccessToken: add `X-Forwarded-Access-Token` (oauth2-proxy `--pass-access-token`).
    ///   - passAuthorization: add `Authorization: Bearer <access token>`. oauth2-proxy's
    ///     `--pass-authorization-header` sends the id_token; the session keeps no id_token, so
    ///     this is the access token, which is what an API behind the proxy expects.
    public static func headers(for session: ProxySession, passAccessToken: Bool,
                               passAuthorization: Bool, names: IdentityHeaderNames = IdentityHeaderNames()) -> [(String, String)] {
        var out = identity(session, user: names.user, email: names.email,
                           preferredUsername: names.preferredUsername, groups: names.groups, userClaim: names.userClaim)
        if passAccessToken { append(names.accessToken, session.accessToken, to: &out) }
        if passAuthorization, let token = session.accessToken {
            append(authorization, "Bearer " + token, to: &out)
        }
        return out
    }

    /// Headers of a 2xx answer from the forward-auth endpoint (nginx `auth_request_set`,
    /// Traefik `authResponseHeaders`, Caddy `copy_headers`).
    public static func authRequestHeaders(for session: ProxySession, passAccessToken: Bool,
                                          userClaim: IdentityHeaderNames.UserClaim = .sub) -> [(String, String)] {
        var out = identity(session, user: authRequestUser, email: authRequestEmail,
                           preferredUsername: authRequestPreferredUsername, groups: authRequestGroups, userClaim: userClaim)
        if passAccessToken { append(authRequestAccessToken, session.accessToken, to: &out) }
        return out
    }

    private static func identity(_ session: ProxySession, user: String, email: String,
                                 preferredUsername: String, groups: String,
                                 userClaim: IdentityHeaderNames.UserClaim) -> [(String, String)] {
        var out: [(String, String)] = []
        append(user, userValue(session, userClaim), to: &out)
        append(email, session.verifiedEmail, to: &out)
        append(preferredUsername, session.preferredUsername, to: &out)
        if !session.groups.isEmpty { append(groups, groupsValue(session.groups), to: &out) }
        return out
    }

    /// The groups, comma-separated as apps split them, each with `%` and `,` percent-encoded:
    /// a group named `viewer,admins` must not read as `admins` to an app that splits on commas.
    static func groupsValue(_ groups: [String]) -> String {
        groups.map { g in
            guard g.utf8.contains(where: { $0 == UInt8(ascii: ",") || $0 == UInt8(ascii: "%") }) else { return g }
            var out = ""
            for c in g.unicodeScalars {
                switch c {
                case ",": out += "%2C"
                case "%": out += "%25"
                default: out.unicodeScalars.append(c)
                }
            }
            return out
        }.joined(separator: ",")
    }

    /// What the user header (and the assertion's `user` claim) holds for `claim`.
    public static func userValue(_ session: ProxySession, _ claim: IdentityHeaderNames.UserClaim) -> String? {
        switch claim {
        case .sub: return session.subject
        case .email: return session.verifiedEmail
        case .preferredUsername: return session.preferredUsername
        case .claim(let path):
            switch session.ruleClaims[path] {
            case .string(let v)?: return v
            case .number(let v)?: return v
            default: return nil
            }
        }
    }

    private static func append(_ name: String, _ value: String?, to out: inout [(String, String)]) {
        guard let value, !value.isEmpty, isSafeValue(value) else { return }
        out.append((name, value))
    }

    /// No C0 controls (CR, LF, NUL, HTAB) and no DEL; UTF-8 passes through unchanged.
    public static func isSafeValue(_ value: String) -> Bool {
        !value.utf8.contains { $0 < 0x20 || $0 == 0x7F }
    }

    // MARK: Matching

    /// Lowercase, `_` folded to `-`.
    private static let foldedNames: [[UInt8]] = names.map { Array($0.utf8).map(fold) }
    private static let authorizationFolded: [UInt8] = Array(authorization.utf8).map(fold)
    private static let authRequestPrefix: [UInt8] = Array("x-auth-request-".utf8)

    private static func fold(_ byte: UInt8) -> UInt8 {
        if byte == UInt8(ascii: "_") { return UInt8(ascii: "-") }
        if (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) { return byte | 0x20 }
        return byte
    }

    private static func matches(_ name: some Collection<UInt8>, _ folded: [UInt8]) -> Bool {
        name.count == folded.count && zip(name, folded).allSatisfy { fold($0) == $1 }
    }
}
