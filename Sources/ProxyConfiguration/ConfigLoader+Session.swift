import OAuthCallback
import ProxyCore

/// The `oauth.session:` section (session hand-off mode).
///
/// ```yaml
/// oauth:
///   session:
///     secret_env: SESSION_SECRET          # or secret_file; ≥ 32 characters
///     previous_secret_env: OLD_SECRET     # optional, for rotation (or previous_secret_file)
///     cookie_name: _oauth_session
///     lifetime: 12h
///     refresh_interval: 15m               # re-check with the IdP (refresh token); server-side sessions only
///     secure: true                        # false only for plain-http development
///     allowed_redirect_hosts: [app.example.com]
///     pass_access_token: false
///     protect: all                        # none (default) | all | [/admin, /account]
///     skip: [/healthz, /assets]
///     server_side: true                   # default: true with a redis store, false with memory
///     error_url: /signin-failed           # default: the proxy's own page (?error=<code> appended)
///     web_redirect_uri: https://app.example.com/_oauth/web_callback   # default: from Host and secure
///     # who may enter (at least one, or allow_any_authenticated_user: true):
///     allowed_email_domains: [example.com, .example.org]   # exact, or .domain for subdomains
///     allowed_emails: [alice@example.com]
///     allowed_emails_file: /etc/callback-proxy/emails.txt
///     allowed_groups: [staff]             # from groups_claim (default groups; a.b for nested)
///     allowed_hosted_domains: [example.com]   # Google Workspace: the id_token's hd
///     path_rules:                         # on top of the rules above, for some paths
///       - { prefix: /admin, allowed_groups: [admins] }
/// ```
extension ConfigLoader {
    func readSession(_ m: MappingReader) -> SessionSettings {
        var s = SessionSettings()
        for (name, required) in [("secret", true), ("previous_secret", false)] {
            if let secret = secret(m, name, required: required) {
                if secret.value.count < 32 {
                    m.problems.add(m.child("\(name)_env"), m.line, "must be at least 32 characters")
                } else {
                    s.secrets.append(secret)
                }
            }
        }
        if let n = m.string("cookie_name") {
            if n.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "_" || $0 == "-" }) && n.utf8.count <= 64 { s.cookieName = n } else {
                m.problems.add(m.child("cookie_name"), m.node("cookie_name")?.line, "must be letters, digits, _ and - (at most 64)")
            }
        }
        if let d = m.parsed("lifetime", "a duration from 1m to 30 days", {
            Units.duration($0).flatMap { $0 >= 60_000_000_000 && $0 <= 30 * 86_400_000_000_000 ? $0 : nil }
        }) {
            s.lifetimeSeconds = Int64(d / 1_000_000_000)
        }
        if let d = m.parsed("idle_timeout", "a duration from 1s to 30 days", {
            Units.duration($0).flatMap { $0 >= 1_000_000_000 && $0 <= 30 * 86_400_000_000_000 ? $0 : nil }
        }) {
            s.idleTimeoutSeconds = Int64(d / 1_000_000_000)
        }
        // From 1 s so the integration tests can watch several refreshes; in production a
        // few minutes to an hour (each refresh is one token-endpoint call per active session).
        // Checked against `lifetime` and the session store by `ConfigLoader.read`.
        if let d = m.parsed("refresh_interval", "a duration from 1s to 30 days", {
            Units.duration($0).flatMap { $0 >= 1_000_000_000 && $0 <= 30 * 86_400_000_000_000 ? $0 : nil }
        }) {
            s.refreshIntervalSeconds = Int64(d / 1_000_000_000)
        }
        if let d = m.string("cookie_domain") {
            // `.example.com` (oauth2-proxy's spelling) or `example.com`: the same to a browser.
            let domain = String((d.hasPrefix(".") ? d.dropFirst() : d[...])).asciiLowercased()
            if EmailAddress.isDomain(Substring(domain)) && domain.contains(".") { s.cookieDomain = domain } else {
                m.problems.add(m.child("cookie_domain"), m.node("cookie_domain")?.line,
                               "'\(d)' is not a domain with at least two labels, like .example.com")
            }
        }
        if let b = m.bool("secure") { s.secure = b }
        if let b = m.bool("pass_access_token") { s.passAccessToken = b }
        if let hosts = m.strings("allowed_redirect_hosts") {
            for h in hosts where !RedirectValidator.isValidEntry(h) {
                m.problems.add(m.child("allowed_redirect_hosts"), m.node("allowed_redirect_hosts")?.line, "'\(h)' is not a host name or .domain entry")
            }
            s.allowedRedirectHosts = hosts.filter(RedirectValidator.isValidEntry)
        }
        if let node = m.node("protect") {
            if case .scalar(let v, _, _) = node, v == "all" || v == "none" {
                s.protect = v == "all" ? .all : .none
            } else if let list = m.strings("protect") {
                s.protect = .prefixes(pathPrefixes(list, m, "protect", node.line))
            }
        }
        if let list = m.strings("skip") {
            // `GET /api/public`, `GET,HEAD /feed`: for those methods only.
            let line = m.node("skip")?.line
            let (routes, plain) = (list.filter { !$0.hasPrefix("/") }, list.filter { $0.hasPrefix("/") })
            s.skip = pathPrefixes(plain, m, "skip", line)
            for entry in routes {
                let parts = entry.split(separator: " ", omittingEmptySubsequences: true)
                let methods = parts.first.map { $0.split(separator: ",", omittingEmptySubsequences: false).map { SessionSettings.MethodRoute.namable[String($0)] } } ?? []
                guard parts.count == 2, !methods.isEmpty, methods.allSatisfy({ $0 != nil }) else {
                    m.problems.add(m.child("skip"), line,
                                   "'\(entry)' is neither a path nor METHOD[,METHOD…] /path (GET, HEAD, POST, PUT, DELETE, OPTIONS, PATCH)")
                    continue
                }
                for prefix in pathPrefixes([String(parts[1])], m, "skip", line) {
                    s.skipRoutes.append(.init(methods: methods.compactMap { $0 }, prefix: prefix))
                }
            }
        }
        if let b = m.bool("skip_preflight") { s.skipPreflight = b }
        if let b = m.bool("server_side") { s.serverSide = b }
        if let b = m.bool("revocation") { s.revocation = b }
        if let u = m.string("error_url") {
            if RedirectValidator(allowedHosts: s.allowedRedirectHosts).validate(u) == u { s.errorURL = u } else {
                m.problems.add(m.child("error_url"), m.node("error_url")?.line,
                               "must be a local path or an https:// URL on allowed_redirect_hosts")
            }
        }
        if let u = m.string("web_redirect_uri") {
            if (u.hasPrefix("https://") || (u.hasPrefix("http://") && !s.secure)) && u.hasSuffix("/_oauth/web_callback")
                && !u.contains("?") && !u.contains("#") {
                s.webRedirectURI = u
            } else {
                m.problems.add(m.child("web_redirect_uri"), m.node("web_redirect_uri")?.line,
                               "must be https://HOST/_oauth/web_callback (http:// only with secure: false), without a query")
            }
        }
        s.access = readAccessRule(m, allowFile: true, allowAnyUser: true)
        if let h = m.mapping("headers") { s.headers = readHeaderNames(h) }
        if let a = m.mapping("jwt_assertion") { s.jwtAssertion = readJWTAssertion(a, names: &s.headers) }
        // Checked against the providers by `ConfigLoader.read` (they are read after this section).
        if let list = m.strings("bearer_tokens") { s.bearerProviders = list }
        if let node = m.node("extra_jwt_issuers") { s.extraJWTIssuers = readExtraJWTIssuers(node, m) }
        if let so = m.mapping("sign_out") {
            if let b = so.bool("at_provider") { s.signOutAtProvider = b }
            if let u = so.string("post_logout_redirect_uri") {
                if (u.hasPrefix("https://") || (u.hasPrefix("http://") && !s.secure)) && !u.contains("#") && u.count > 8 {
                    s.postLogoutRedirectURI = u
                } else {
                    so.problems.add(so.child("post_logout_redirect_uri"), so.node("post_logout_redirect_uri")?.line,
                                    "must be an https:// URL (http:// only with secure: false), as registered at the provider")
                }
            }
            so.finish()
        }
        if let claim = m.string("groups_claim") {
            if ClaimRule.isPath(claim) {
                s.groupsClaim = claim
            } else {
                m.problems.add(m.child("groups_claim"), m.node("groups_claim")?.line, "must be a claim name, or a dotted path like realm_access.roles")
            }
        }
        if let node = m.node("path_rules") {
            if case .sequence(let items, _) = node {
                for (i, item) in items.enumerated() {
                    let path = "\(m.child("path_rules"))[\(i)]"
                    let entry = MappingReader(item, path: path, pattern: m.childPattern("path_rules") + "[]", problems: m.problems)
                    let prefixText = entry.string("prefix", required: true)
                    let rule = readAccessRule(entry, allowFile: false, allowAnyUser: false)
                    if rule.isEmpty && !rule.denies {
                        m.problems.add(path, item.line, "needs a rule: allowed_email_domains, allowed_emails, allowed_groups, allowed_hosted_domains, allowed_claims or a denied_… one")
                    }
                    if let prefixText {
                        switch PathPrefix.parse(prefixText) {
                        case .success(let prefix): s.pathRules.append(PathAccessRule(prefix: prefix, rule: rule))
                        case .failure(let why): m.problems.add("\(path).prefix", item.line, "'\(prefixText)' \(why.text)")
                        }
                    }
                    entry.finish()
                }
            } else {
                m.problems.add(m.child("path_rules"), node.line, "must be a list of { prefix, allowed_… }, not \(node.kindName)")
            }
        }
        if let domain = s.cookieDomain { checkCookieDomain(domain, s, m) }
        m.finish()
        return s
    }

    /// With `cookie_domain`, the hosts a sign-in involves must lie under it: the callback's host
    /// (`web_redirect_uri`; its state cookie is shared through the domain) and every redirect
    /// host (the session cookie never reaches a host outside, so a redirect there would only
    /// start another sign-in).
    private func checkCookieDomain(_ domain: String, _ s: SessionSettings, _ m: MappingReader) {
        for entry in s.allowedRedirectHosts {
            guard let host = RedirectValidator.entryHost(entry), !SessionSettings.isHost(host, under: domain) else { continue }
            m.problems.add(m.child("allowed_redirect_hosts"), m.node("allowed_redirect_hosts")?.line,
                           "'\(entry)' is not under cookie_domain '\(domain)': the session cookie never reaches it")
        }
        if let uri = s.webRedirectURI, let host = Self.host(ofURL: uri), !SessionSettings.isHost(host, under: domain) {
            m.problems.add(m.child("cookie_domain"), m.node("cookie_domain")?.line,
                           "'\(domain)' does not cover web_redirect_uri's host '\(host)': the sign-in's cookies would never reach its callback")
        }
    }

    /// The host of an `http(s)://host[:port]/…` URL, nil when it has none.
    static func host(ofURL url: String) -> String? {
        for scheme in ["https://", "http://"] where url.hasPrefix(scheme) {
            let host = url.dropFirst(scheme.count).prefix { $0 != "/" && $0 != ":" && $0 != "?" && $0 != "#" }
            return host.isEmpty ? nil : String(host)
        }
        return nil
    }

    /// `extra_jwt_issuers: [{ issuer, audiences, jwks_uri }]`: the issuer exact and https (its
    /// tokens' `iss` is compared byte for byte), at least one audience, each issuer once.
    private func readExtraJWTIssuers(_ node: ConfigNode, _ m: MappingReader) -> [SessionSettings.ExtraJWTIssuer] {
        guard case .sequence(let items, _) = node else {
            m.problems.add(m.child("extra_jwt_issuers"), node.line, "must be a list of { issuer, audiences, jwks_uri }, not \(node.kindName)")
            return []
        }
        var out: [SessionSettings.ExtraJWTIssuer] = []
        for (i, item) in items.enumerated() {
            let path = "\(m.child("extra_jwt_issuers"))[\(i)]"
            let entry = MappingReader(item, path: path, pattern: m.childPattern("extra_jwt_issuers") + "[]", problems: m.problems)
            let issuer = entry.string("issuer", required: true)
            let audiences = (entry.strings("audiences") ?? []).filter { !$0.isEmpty }
            let jwks = entry.string("jwks_uri")
            var ok = issuer != nil
            if let issuer, !isAllowedURL(issuer) {
                m.problems.add("\(path).issuer", item.line, "must be an https:// URL (http:// only for loopback), exactly as its tokens' iss")
                ok = false
            } else if let issuer, out.contains(where: { $0.issuer == issuer }) {
                m.problems.add("\(path).issuer", item.line, "'\(issuer)' is listed twice")
                ok = false
            }
            if audiences.isEmpty {
                m.problems.add("\(path).audiences", item.line, "needs at least one audience: a token is accepted only when its aud names one")
                ok = false
            }
            if let jwks, !isAllowedURL(jwks) {
                m.problems.add("\(path).jwks_uri", item.line, "must be an https:// URL (http:// only for loopback)")
                ok = false
            }
            if ok, let issuer { out.append(.init(issuer: issuer, audiences: audiences, jwksURI: jwks)) }
            entry.finish()
        }
        return out
    }

    /// `headers: { user, user_claim, email, preferred_username, groups, access_token }`: header
    /// names are tokens, distinct, and none the engine or HTTP itself gives a meaning to.
    private func readHeaderNames(_ m: MappingReader) -> IdentityHeaderNames {
        var n = IdentityHeaderNames()
        var seen: [String: String] = [:]
        for key in ["user", "email", "preferred_username", "groups", "access_token"] {
            guard let name = m.string(key) else { continue }
            let lower = name.asciiLowercased()
            if let problem = Self.identityHeaderNameProblem(name) {
                m.problems.add(m.child(key), m.node(key)?.line, problem)
                continue
            }
            if let other = seen[lower] {
                m.problems.add(m.child(key), m.node(key)?.line, "'\(name)' is already headers.\(other)")
                continue
            }
            seen[lower] = key
            switch key {
            case "user": n.user = name
            case "email": n.email = name
            case "preferred_username": n.preferredUsername = name
            case "groups": n.groups = name
            default: n.accessToken = name
            }
        }
        if let c = m.parsed("user_claim", "sub, email, preferred_username, or another claim's name or dotted path",
                            IdentityHeaderNames.UserClaim.init(text:)) {
            n.userClaim = c
        }
        m.finish()
        return n
    }

    /// `jwt_assertion: { signing_key_file | signing_key_env, previous_signing_key_…, issuer,
    /// audience, lifetime, header }`. The keys must be P-256 private keys in PEM
    /// (`openssl ecparam -name prime256v1 -genkey -noout | openssl pkcs8 -topk8 -nocrypt`).
    private func readJWTAssertion(_ m: MappingReader, names: inout IdentityHeaderNames) -> JWTAssertionSettings? {
        func key(_ name: String, required: Bool) -> Secret? {
            guard let pem = secret(m, name, required: required) else { return nil }
            guard (try? P256PrivateKey(pem: pem.value)) != nil else {
                let source = m.node("\(name)_file") != nil ? "\(name)_file" : "\(name)_env"
                m.problems.add(m.child(source), m.node(source)?.line,
                               "must be a P-256 (prime256v1) private key in PEM, unencrypted: "
                               + "openssl ecparam -name prime256v1 -genkey -noout | openssl pkcs8 -topk8 -nocrypt")
                return nil
            }
            return pem
        }
        let signing = key("signing_key", required: true)
        let previous = key("previous_signing_key", required: false)
        if let name = m.string("header") {
            let lower = name.asciiLowercased()
            if let problem = Self.identityHeaderNameProblem(name) {
                m.problems.add(m.child("header"), m.node("header")?.line, problem)
            } else if [names.user, names.email, names.preferredUsername, names.groups, names.accessToken].contains(where: { $0.lowercased() == lower }) {
                m.problems.add(m.child("header"), m.node("header")?.line, "'\(name)' is already one of oauth.session.headers")
            } else {
                names.jwtAssertion = name
            }
        }
        var a = signing.map(JWTAssertionSettings.init(signingKeyPEM:))
        if let previous { a?.previousKeyPEMs = [previous] }
        if let issuer = m.string("issuer") {
            if issuer.isEmpty || !IdentityHeaders.isSafeValue(issuer) {
                m.problems.add(m.child("issuer"), m.node("issuer")?.line, "must be a non-empty string without control characters")
            } else { a?.issuer = issuer }
        }
        if let audience = m.string("audience") {
            if audience.isEmpty || !IdentityHeaders.isSafeValue(audience) {
                m.problems.add(m.child("audience"), m.node("audience")?.line, "must be a non-empty string without control characters")
            } else { a?.audience = audience }
        }
        if let d = m.parsed("lifetime", "a duration from 10s to 1h", {
            Units.duration($0).flatMap { $0 >= 10_000_000_000 && $0 <= 3_600_000_000_000 ? $0 : nil }
        }) {
            a?.lifetimeSeconds = Int64(d / 1_000_000_000)
        }
        m.finish()
        return a
    }

    /// Why `name` cannot carry an identity header, or nil: it must be a token, and not one the
    /// engine or HTTP itself gives a meaning to.
    static func identityHeaderNameProblem(_ name: String) -> String? {
        let lower = name.asciiLowercased()
        if !HeaderRules.isName(name) { return "'\(name)' is not a header name" }
        if reservedHeaders.contains(lower) || lower.hasPrefix("proxy-") {
            return "'\(name)' is a header the proxy or HTTP itself uses: pick another name"
        }
        return nil
    }

    static let reservedHeaders: Set<String> = [
        "host", "content-length", "transfer-encoding", "connection", "keep-alive", "te", "trailer", "upgrade",
        "cookie", "set-cookie", "authorization", "expect", "forwarded", "via", "x-forwarded-for", "x-forwarded-proto",
        "x-forwarded-host", "x-forwarded-port", "x-real-ip", "x-request-id",
    ]

    /// `allowed_email_domains`, `allowed_emails`, `allowed_groups`, `allowed_hosted_domains`
    /// (and, globally, `allowed_emails_file` and `allow_any_authenticated_user`). Domains and
    /// addresses are ASCII (IDNs as `xn--` A-labels) and lower-cased; every bad entry is named.
    private func readAccessRule(_ m: MappingReader, allowFile: Bool, allowAnyUser: Bool) -> AccessRule {
        var r = AccessRule()
        r.emailDomains = domains(m, "allowed_email_domains")
        r.emails = addresses(m, "allowed_emails")
        if allowFile, let f = m.string("allowed_emails_file") { r.emailsFile = f }
        r.deniedEmailDomains = domains(m, "denied_email_domains")
        r.deniedEmails = addresses(m, "denied_emails")
        if let list = m.strings("denied_groups") { r.deniedGroups = list.filter { !$0.isEmpty } }
        if let node = m.node("allowed_claims") {
            if case .sequence(let items, _) = node {
                for (i, item) in items.enumerated() {
                    let path = "\(m.child("allowed_claims"))[\(i)]"
                    let entry = MappingReader(item, path: path, pattern: m.childPattern("allowed_claims") + "[]", problems: m.problems)
                    if let rule = readClaimRule(entry, path: path, line: item.line) { r.claims.append(rule) }
                    entry.finish()
                }
            } else {
                m.problems.add(m.child("allowed_claims"), node.line, "must be a list of { claim, equals | contains | in }, not \(node.kindName)")
            }
        }
        if let list = m.strings("allowed_groups") { r.groups = list.filter { !$0.isEmpty } }
        if let list = m.strings("allowed_hosted_domains") {
            for d in list {
                if EmailAddress.isDomain(Substring(d.asciiLowercased())) { r.hostedDomains.append(d.asciiLowercased()) } else {
                    m.problems.add(m.child("allowed_hosted_domains"), m.node("allowed_hosted_domains")?.line, "'\(d)' is not a domain")
                }
            }
        }
        if allowAnyUser, let any = m.bool("allow_any_authenticated_user"), any {
            var others = r
            others.anyAuthenticatedUser = false
            // Deny rules may stand beside it: everyone but those.
            if !others.isEmpty {
                m.problems.add(m.child("allow_any_authenticated_user"), m.node("allow_any_authenticated_user")?.line,
                               "lets everyone in, so it cannot stand next to allowed_… rules: remove one or the other")
            }
            r.anyAuthenticatedUser = true
        }
        return r
    }

    /// A list of `example.com` / `.example.com` entries (`EmailAddress.domainPattern`); each bad one named.
    private func domains(_ m: MappingReader, _ key: String) -> [String] {
        (m.strings(key) ?? []).compactMap { d in
            guard let pattern = EmailAddress.domainPattern(d) else {
                m.problems.add(m.child(key), m.node(key)?.line, "'\(d)' is not a domain or .domain (write internationalized names as xn-- A-labels)")
                return nil
            }
            return pattern
        }
    }

    /// A list of addresses, ASCII lower-cased (`EmailAddress`); each bad one named.
    private func addresses(_ m: MappingReader, _ key: String) -> [String] {
        (m.strings(key) ?? []).compactMap { e in
            guard let address = EmailAddress(e) else {
                m.problems.add(m.child(key), m.node(key)?.line, "'\(e)' is not an email address with an ASCII domain")
                return nil
            }
            return address.address
        }
    }

    /// One `allowed_claims` entry: `claim` (a name or dotted path) and exactly one of `equals`,
    /// `contains` (a value) or `in` (a list).
    private func readClaimRule(_ m: MappingReader, path: String, line: Int?) -> ClaimRule? {
        let claim = m.string("claim", required: true)
        let equals = m.string("equals"), contains = m.string("contains"), oneOf = m.strings("in")
        if let claim, !ClaimRule.isPath(claim) {
            m.problems.add("\(path).claim", line, "must be a claim name, or a dotted path like realm_access.roles")
            return nil
        }
        let given = [equals != nil, contains != nil, oneOf != nil].filter { $0 }.count
        guard given == 1 else {
            m.problems.add(path, line, "needs exactly one of equals, contains or in")
            return nil
        }
        if let oneOf, oneOf.isEmpty {
            m.problems.add("\(path).in", line, "is empty: it would let nobody in")
            return nil
        }
        guard let claim else { return nil }
        if let equals { return ClaimRule(claim: claim, match: .equals(equals)) }
        if let contains { return ClaimRule(claim: claim, match: .contains(contains)) }
        return ClaimRule(claim: claim, match: .oneOf(oneOf!))
    }

    /// `protect`/`skip` entries: canonical paths (they are compared with the canonical request
    /// path, so `/%61dmin` or `/x/../admin` could never match as written); each bad one reported.
    private func pathPrefixes(_ list: [String], _ m: MappingReader, _ key: String, _ line: Int?) -> [PathPrefix] {
        var out: [PathPrefix] = []
        for entry in list {
            switch PathPrefix.parse(entry) {
            case .success(let p): out.append(p)
            case .failure(let why): m.problems.add(m.child(key), line, "'\(entry)' \(why.text)")
            }
        }
        return out
    }
}
