/// The facts about a signed-in user that access rules look at, taken from the verified
/// id_token (or the provider's userinfo) when the session was made.
public struct AccessSubject: Sendable, Equatable {
    public var email: String?
    public var emailVerified: Bool
    public var groups: [String]
    /// The id_token's `hd` (Google Workspace domain).
    public var hostedDomain: String?
    /// The claims `allowed_claims` rules read, by their dotted path (kept in the session: only
    /// those, so a cookie stays small).
    public var claims: [String: JSONValue]

    public init(email: String?, emailVerified: Bool, groups: [String], hostedDomain: String?, claims: [String: JSONValue] = [:]) {
        self.email = email
        self.emailVerified = emailVerified
        self.groups = groups
        self.hostedDomain = hostedDomain
        self.claims = claims
    }
}

/// Why a rule refused someone: the metric's `rule` label and the log's `rule` field.
public enum AccessRefusal: String, Sendable, Equatable, CaseIterable {
    /// The rule needs an email and the provider gave none.
    case noEmail = "no_email"
    /// The provider did not vouch for the address (`email_verified` false or absent).
    case unverifiedEmail = "unverified_email"
    /// A verified address, neither listed nor in an allowed domain.
    case email
    case group
    case hostedDomain = "hosted_domain"
    /// A per-path rule (`oauth.session.path_rules`) refused what the global rule allowed.
    case pathRule = "path_rule"
    /// A `denied_…` rule named the account.
    case denied
    /// An `allowed_claims` rule did not hold.
    case claim
}

extension AccessRule {
    /// Whether `subject` may enter. `listed` answers whether an address is in the emails file
    /// (nil: there is no file). The first rule that refuses is named.
    public func check(_ subject: AccessSubject, listed: ((String) -> Bool)? = nil) -> AccessRefusal? {
        if denies && isDenied(subject) { return .denied }
        // The loader refuses this flag next to any other allow rule: it says "everyone".
        if anyAuthenticatedUser { return nil }
        if checksEmail {
            guard let email = subject.email, !email.isEmpty else { return .noEmail }
            guard subject.emailVerified else { return .unverifiedEmail }
            guard let address = EmailAddress(email) else { return .email }
            let allowed = emails.contains(where: address.address.sameBytes) || emailDomains.contains(where: address.domainMatches)
                || (listed?(address.address) ?? false)
            if !allowed { return .email }
        }
        // Group names compare exactly, byte for byte: they are the IdP's identifiers (`/Admins`
        // in Keycloak).
        if !groups.isEmpty && !groups.contains(where: { g in subject.groups.contains(where: g.sameBytes) }) { return .group }
        if !hostedDomains.isEmpty {
            guard let hd = subject.hostedDomain?.asciiLowercased(), EmailAddress.isDomain(Substring(hd)),
                  hostedDomains.contains(where: hd.sameBytes) else { return .hostedDomain }
        }
        for rule in claims where !rule.holds(subject.claims[rule.claim]) { return .claim }
        return nil
    }

    private func isDenied(_ subject: AccessSubject) -> Bool {
        if !deniedGroups.isEmpty && deniedGroups.contains(where: { g in subject.groups.contains(where: g.sameBytes) }) { return true }
        guard !deniedEmails.isEmpty || !deniedEmailDomains.isEmpty, let email = subject.email, !email.isEmpty else { return false }
        // An address that cannot be read as one is kept out too: deny must not be escaped by
        // spelling an address oddly.
        guard let address = EmailAddress(email) else { return true }
        return deniedEmails.contains(where: address.address.sameBytes) || deniedEmailDomains.contains(where: address.domainMatches)
    }
}
