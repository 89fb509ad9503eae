import ProxyCore

/// Who may enter through session mode (`oauth.session`): without a rule, every account the
/// provider accepts gets a session — with `kind: google`, every Google account in the world.
/// So session mode needs at least one rule, or `allow_any_authenticated_user` said outright
/// (oauth2-proxy's `--email-domain=*`).
///
/// Each kind of rule that is configured must hold (they combine with AND):
/// - **email**: a *verified* address listed in `emails` (or the emails file), or whose domain is
///   in `emailDomains` (`example.com` exactly; `.example.com` any subdomain of it, not itself);
/// - **groups**: at least one of the user's groups (the `groups_claim`) is in `groups`;
/// - **hosted domain**: the id_token's `hd` claim (Google Workspace) is in `hostedDomains`
///   — never the `hd` of a URL, which the user can edit.
/// Addresses and domains compare without ASCII case, group names exactly. Addresses and domains must be ASCII (A-labels:
/// `xn--…`): an address with other characters in its domain never matches, so a look-alike
/// in another script cannot pass for a configured domain.
public struct AccessRule: Sendable, Equatable {
    /// `example.com` (that domain) or `.example.com` (its subdomains), lower-cased.
    public var emailDomains: [String] = []
    /// Whole addresses, lower-cased.
    public var emails: [String] = []
    /// A file of addresses, one a line (`#` comments), re-read when it changes.
    public var emailsFile: String? = nil
    public var groups: [String] = []
    public var hostedDomains: [String] = []
    /// Rules on other claims (`allowed_claims`): every one must hold.
    public var claims: [ClaimRule] = []
    /// Every account the providers accept may enter (and nothing else is checked).
    public var anyAuthenticatedUser = false
    /// Kept out whatever else allows them (deny wins, as Pomerium's `deny` beside `allow`):
    /// addresses (lower-cased), domains as `emailDomains`, and groups compared exactly. An
    /// address is denied whether or not the provider vouches for it.
    public var deniedEmails: [String] = []
    public var deniedEmailDomains: [String] = []
    public var deniedGroups: [String] = []

    public init() {}

    /// Whether a deny rule is configured.
    public var denies: Bool { !deniedEmails.isEmpty || !deniedEmailDomains.isEmpty || !deniedGroups.isEmpty }

    /// Whether an email rule is configured (list, domains or file).
    var checksEmail: Bool { !emailDomains.isEmpty || !emails.isEmpty || emailsFile != nil }

    /// Whether no rule lets anyone in (deny rules alone let nobody in: they only narrow).
    public var isEmpty: Bool { !checksEmail && groups.isEmpty && hostedDomains.isEmpty && claims.isEmpty && !anyAuthenticatedUser }
}

/// A rule for the paths under `prefix`, on top of the global one: `/admin` needs group
/// `admins`. Matched like `protect` (every reading of the path, letter case folded), so no
/// spelling reaches the path without it; such a path always needs a session.
public struct PathAccessRule: Sendable, Equatable {
    public var prefix: PathPrefix
    public var rule: AccessRule

    public init(prefix: PathPrefix, rule: AccessRule) {
        self.prefix = prefix
        self.rule = rule
    }
}
