import ProxyCore

/// Access rules that pass validation one by one but, read together, can never let anyone in or
/// never apply: `check` names each with its setting (a warning: the proxy runs, though not as
/// the operator meant).
extension SessionSettings {
    /// `sessionProviders`: the providers in `handoff: session`.
    public func rulesThatCannotMatch(sessionProviders: [ProviderSettings]) -> [String] {
        var out: [String] = []
        let rules = [("oauth.session", access)] + pathRules.enumerated().map { ("oauth.session.path_rules[\($0.offset)]", $0.element.rule) }
        for (setting, rule) in rules {
            for g in rule.groups where rule.deniedGroups.contains(where: g.sameBytes) {
                out.append("\(setting).allowed_groups: '\(g)' is denied too (denied_groups), and deny wins: it lets nobody in")
            }
            for e in rule.emails where rule.deniedEmails.contains(where: e.sameBytes)
                || EmailAddress(e).map({ a in rule.deniedEmailDomains.contains(where: a.domainMatches) }) == true {
                out.append("\(setting).allowed_emails: '\(e)' is denied too (denied_emails or denied_email_domains), and deny wins")
            }
            for d in rule.emailDomains where rule.deniedEmailDomains.contains(where: d.sameBytes)
                || (!d.hasPrefix(".") && EmailAddress("x@" + d).map({ a in rule.deniedEmailDomains.contains(where: a.domainMatches) }) == true) {
                out.append("\(setting).allowed_email_domains: '\(d)' is denied too (denied_email_domains), and deny wins")
            }
            if !rule.hostedDomains.isEmpty && !sessionProviders.contains(where: { $0.kind == .google }) {
                out.append("\(setting).allowed_hosted_domains: hd is Google Workspace's claim and no session provider is google: "
                           + "nobody has it, so nobody enters")
            }
        }
        for (i, p) in pathRules.enumerated() {
            let bytes = p.prefix.bytes
            if let s = skip.first(where: { s in bytes.withUnsafeBytes { s.matches($0) } }) {
                out.append("oauth.session.path_rules[\(i)]: '\(p.prefix)' lies under skip '\(s)': requested as written its paths "
                           + "need no session, so the rule refuses nobody there (a session it refuses only loses its identity headers)")
            }
        }
        for (i, extra) in extraJWTIssuers.enumerated() {
            // Providers are asked first (`SessionLayer.bearerIssuers`): a token naming one's issuer
            // and one of its native clients is that provider's to judge.
            let same = sessionProviders.filter { bearerProviders.contains($0.name) && $0.endpoints.issuer == extra.issuer }
            let clients = Set(same.flatMap { $0.native.values.map(\.clientID) })
            if let first = same.first, extra.audiences.allSatisfy(clients.contains) {
                out.append("oauth.session.extra_jwt_issuers[\(i)]: its issuer is bearer_tokens provider '\(first.name)''s and every "
                           + "audience one of that provider's native clients: those tokens are judged as the provider's, so this entry never applies")
            }
        }
        return out
    }
}
