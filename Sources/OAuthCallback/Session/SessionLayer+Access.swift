import ProxyCore

/// Session mode's access rules (`AccessRule`) where a session is made and where it is used:
/// - at sign-in (`establish`, for the native callback and the web callback alike), before any
///   session cookie exists: a refused account gets a 403 page and no session;
/// - on every request that carries a session, with the path's own rules: a reload that narrows
///   the rules refuses the sessions that no longer qualify at their next request (403 on a path
///   that needs a session; anonymous elsewhere);
/// - at `/_oauth/userinfo` and `/_oauth/auth`, which also takes per-call restrictions
///   (`?allowed_groups=a,b&allowed_emails=…&allowed_email_domains=…`, oauth2-proxy's shape).
extension SessionLayer {
    /// The first rule that refuses `subject`: the global one, then each of `pathRules`.
    func refusal(_ subject: AccessSubject, pathRules: [PathAccessRule] = [], now: UInt64) -> AccessRefusal? {
        let file = emailsFile
        let listed: ((String) -> Bool)? = file.map { f in { f.contains($0, now: now) } }
        if let r = settings.access.check(subject, listed: listed) { return r }
        for p in pathRules where p.rule.check(subject) != nil { return .pathRule }
        return nil
    }

    /// The groups a new session carries: the configured claim's (`groups_claim`).
    func groups(of identity: VerifiedIdentity) -> [String] {
        guard settings.groupsClaim != "groups" else { return identity.groups }
        return groups(identity.claims)
    }

    /// The claims the `allowed_claims` rules (global and per path) read, from an id_token's
    /// claims, by dotted path: what a session keeps for them.
    func ruleClaims(_ claims: [String: JSONValue]) -> [String: JSONValue] {
        var out: [String: JSONValue] = [:]
        for path in settings.claimPaths {
            if let v = ClaimRule.value(at: path, in: claims) { out[path] = v }
        }
        return out
    }

    /// The configured groups claim of an id_token's claims.
    func groups(_ claims: [String: JSONValue]) -> [String] {
        ProviderSupport.groups(ClaimRule.value(at: settings.groupsClaim, in: claims))
    }

    /// Counts and logs a refusal: the rule and the setting that made it, the address's domain
    /// only (never the whole address at info level), at most one line a second per provider,
    /// rule and place.
    func noteRefusal(_ rule: AccessRefusal, provider: String, subject: AccessSubject, during: String, now: UInt64) {
        metrics?.sessionRefused(provider, rule: rule)
        guard refusalLog.isDue(provider: provider, setting: rule.rawValue + " " + during, now: now) else { return }
        let domain = subject.email.flatMap(EmailAddress.init).map { String($0.domain) } ?? ""
        log.info("access refused by a session rule", [
            "provider": provider, "rule": rule.rawValue, "during": during, "email_domain": domain,
            "setting": Self.setting(for: rule),
        ])
    }

    static func setting(for rule: AccessRefusal) -> String {
        switch rule {
        case .noEmail, .unverifiedEmail, .email: return "oauth.session.allowed_emails, allowed_emails_file, allowed_email_domains"
        case .group: return "oauth.session.allowed_groups (groups_claim)"
        case .hostedDomain: return "oauth.session.allowed_hosted_domains"
        case .pathRule: return "oauth.session.path_rules"
        case .denied: return "oauth.session.denied_emails, denied_email_domains, denied_groups"
        case .claim: return "oauth.session.allowed_claims"
        }
    }

    /// A signed-in account the rules keep out: 403, JSON for scripts, never a redirect to
    /// sign-in (the same account would only come back to the same answer).
    static func forbidden(json: Bool) -> Response {
        json ? Self.json(403, ["error": .string("forbidden")])
            : CallbackPage.error(status: 403, message: Messages.forbidden, title: "Access denied")
    }

    /// `/_oauth/auth`'s refusal: bare, the gateway shows its own page.
    static let authRefused = Response(status: 403, headers: [("Cache-Control", "no-store")])

    /// `/_oauth/auth`'s 202 for `session`: the identity as `X-Auth-Request-*` (and the signed
    /// assertion) for nginx's `auth_request_set` / Traefik's `authResponseHeaders` to pass on.
    func authGranted(_ session: ProxySession, on loop: EventLoop) -> Response {
        var headers = [("Cache-Control", "no-store")]
            + IdentityHeaders.authRequestHeaders(for: session, passAccessToken: settings.passAccessToken,
                                                 userClaim: settings.headers.userClaim)
        if let assertion = assertionHeader(session, on: loop) { headers.append(assertion) }
        return Response(status: 202, headers: headers)
    }

    static let refusedAtSignIn = CallbackFailure(
        .policy, code: "forbidden", userMessage: Messages.forbidden,
        logDetail: "the account is not allowed by oauth.session's access rules (no session made)")

    /// `/_oauth/auth`'s per-call restrictions from its query: comma-separated lists; nil when
    /// the query names none. The operator writes this query into the gateway's configuration
    /// (nginx `auth_request`, Traefik `forwardAuth`), so anything in it that cannot be read as
    /// written — a query that does not decode strictly (`R&D` unescaped, a stray `&`), an unknown
    /// or repeated parameter (`allowed_group=`), an empty list, an entry that is no address or
    /// domain — is a problem, and the caller refuses: a restriction that cannot be read must
    /// never read as "no restriction".
    static func perCallRule(_ query: String?) -> Result<AccessRule?, PerCallRuleProblem> {
        guard let query, !query.isEmpty else { return .success(nil) }
        guard case .success(let fields) = QueryDecoding.decode(query) else { return .failure(.unreadable) }
        var rule = AccessRule()
        var seen: Set<String> = []
        for field in fields {
            guard Self.perCallNames.contains(field.name) else { return .failure(.unknownParameter(field.name)) }
            guard seen.insert(field.name).inserted else { return .failure(.repeated(field.name)) }
            let list = field.value.split(separator: ",").map { $0.trimming(" ") }.filter { !$0.isEmpty }
            guard !list.isEmpty else { return .failure(.empty(field.name)) }
            switch field.name {
            case "allowed_groups":
                rule.groups = list
            case "allowed_emails":
                for e in list {
                    guard let address = EmailAddress(e) else { return .failure(.notAnEntry(field.name)) }
                    rule.emails.append(address.address)
                }
            default:  // allowed_email_domains
                for d in list {
                    guard let pattern = EmailAddress.domainPattern(d) else { return .failure(.notAnEntry(field.name)) }
                    rule.emailDomains.append(pattern)
                }
            }
        }
        return .success(rule)
    }

    static let perCallNames: Set<String> = ["allowed_groups", "allowed_emails", "allowed_email_domains"]

    /// The `path_rules` of the request a gateway asks `/_oauth/auth` about: its path from
    /// `X-Original-URI` (nginx's usual `proxy_set_header X-Original-URI $request_uri`), else
    /// `X-Forwarded-Uri` (Traefik, Caddy), canonicalized and read every way as for a proxied
    /// request (Pomerium judges the original request's route the same way). Empty without
    /// either header or without path rules; nil when the path is one the proxy would refuse
    /// (a malformed escape, `%00`, not a path): the caller refuses too.
    func forwardedPathRules(_ request: borrowing RequestView) -> [PathAccessRule]? {
        guard !settings.pathRules.isEmpty else { return [] }
        // (Not `??`: its autoclosure cannot capture the borrowed request.)
        var found = request.header("X-Original-URI")
        if found == nil { found = request.header("X-Forwarded-Uri") }
        guard let uri = found else { return [] }
        let path = uri.prefix { $0 != "?" && $0 != "#" }
        guard path.hasPrefix("/") else { return nil }
        return PathReadings.of(String(path)) { settings.pathRules(for: $0) }
    }
}

/// Why `/_oauth/auth`'s query could not be read as restrictions. The text names parameters,
/// never values (they may hold addresses).
enum PerCallRuleProblem: Error, Equatable {
    case unreadable
    case unknownParameter(String)
    case repeated(String)
    case empty(String)
    case notAnEntry(String)

    var reason: String {
        switch self {
        case .unreadable: return "the query does not decode strictly (escape & , = and % in values, no stray &)"
        case .unknownParameter(let n): return "unknown parameter '\(n.prefix(40))' (allowed_groups, allowed_emails, allowed_email_domains)"
        case .repeated(let n): return "'\(n)' is given more than once"
        case .empty(let n): return "'\(n)' is empty"
        case .notAnEntry(let n): return "'\(n)' has an entry that is not an address or domain"
        }
    }
}
