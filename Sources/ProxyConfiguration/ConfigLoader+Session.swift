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
///     secure: true                        # false only for plain-http development
///     allowed_redirect_hosts: [app.example.com]
///     pass_access_token: false
///     protect: all                        # none (default) | all | [/admin, /account]
///     skip: [/healthz, /assets]
///     server_side: true                   # default: true with a redis store, false with memory
///     error_url: /signin-failed           # default: the proxy's own page (?error=<code> appended)
///     web_redirect_uri: https://app.example.com/_oauth/web_callback   # default: from Host and secure
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
            s.skip = pathPrefixes(list, m, "skip", m.node("skip")?.line)
        }
        if let b = m.bool("server_side") { s.serverSide = b }
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
        m.finish()
        return s
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
