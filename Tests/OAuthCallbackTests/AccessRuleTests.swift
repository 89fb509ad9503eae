import Testing
@testable import OAuthCallback

/// Who session mode lets in (`AccessRule.check`): the matcher alone, on the facts a verified
/// id_token gives.
@Suite struct AccessRuleTests {
    static func rule(domains: [String] = [], emails: [String] = [], groups: [String] = [], hd: [String] = []) -> AccessRule {
        var r = AccessRule()
        r.emailDomains = domains
        r.emails = emails
        r.groups = groups
        r.hostedDomains = hd
        return r
    }

    static func who(_ email: String?, verified: Bool = true, groups: [String] = [], hd: String? = nil) -> AccessSubject {
        AccessSubject(email: email, emailVerified: verified, groups: groups, hostedDomain: hd)
    }

    @Test(arguments: ["alice@example.com", "Alice@Example.COM", "ALICE@EXAMPLE.COM"])
    func anAddressInAnAllowedDomainEntersWhateverItsCase(_ email: String) {
        #expect(Self.rule(domains: ["example.com"]).check(Self.who(email)) == nil)
    }

    @Test(arguments: [
        "alice@evil-example.com", "alice@example.com.evil.test", "alice@sub.example.com", "alice@example.co",
        "alice@xample.com", "alice@example.com.", "example.com@evil.test", "alice@evil.test@example.com",
        "alice@ex\u{e4}mple.com", "alice@\u{435}xample.com",  // a-umlaut; Cyrillic е (U+0435) for e
        "alice@xn--exmple-cua.com", "@example.com", "alice@", "alice",
    ])
    func everythingElseIsRefusedAsEmail(_ email: String) {
        #expect(Self.rule(domains: ["example.com"]).check(Self.who(email)) == .email, "\(email)")
    }

    @Test func aDotDomainAllowsSubdomainsButNotTheDomainItself() {
        let r = Self.rule(domains: [".example.com"])
        #expect(r.check(Self.who("a@eu.example.com")) == nil)
        #expect(r.check(Self.who("a@x.eu.example.com")) == nil)
        #expect(r.check(Self.who("a@example.com")) == .email)
        #expect(r.check(Self.who("a@evilexample.com")) == .email)
    }

    @Test func anIDNDomainMatchesWhenWrittenAsItsALabel() {
        // Providers give internationalized domains as A-labels; the configuration holds the same.
        #expect(Self.rule(domains: ["xn--exmple-cua.com"]).check(Self.who("alice@xn--exmple-cua.com")) == nil)
        #expect(Self.rule(domains: ["xn--exmple-cua.com"]).check(Self.who("alice@ex\u{e4}mple.com")) == .email)
    }

    @Test func onlyAVerifiedAddressCounts() {
        let r = Self.rule(domains: ["example.com"], emails: ["bob@other.test"])
        #expect(r.check(Self.who("alice@example.com", verified: false)) == .unverifiedEmail)
        #expect(r.check(Self.who("bob@other.test", verified: false)) == .unverifiedEmail)
        #expect(r.check(Self.who(nil)) == .noEmail)
        #expect(r.check(Self.who("")) == .noEmail)
    }

    @Test func listedAddressesAndTheFileEnterBesideTheDomains() {
        let r = Self.rule(domains: ["example.com"], emails: ["bob@other.test"])
        #expect(r.check(Self.who("Bob@Other.TEST")) == nil)
        #expect(r.check(Self.who("carol@other.test")) == .email)
        #expect(r.check(Self.who("carol@other.test"), listed: { $0 == "carol@other.test" }) == nil)
    }

    @Test func groupsCompareExactlyAndAnyOneSuffices() {
        let r = Self.rule(groups: ["admins", "/Ops"])
        #expect(r.check(Self.who(nil, groups: ["staff", "admins"])) == nil)
        #expect(r.check(Self.who(nil, groups: ["/Ops"])) == nil)
        #expect(r.check(Self.who(nil, groups: ["Admins"])) == .group)
        #expect(r.check(Self.who(nil, groups: [])) == .group)
    }

    @Test func theHostedDomainComesFromTheTokenAndMustBeThere() {
        let r = Self.rule(hd: ["example.com"])
        #expect(r.check(Self.who("a@example.com", hd: "example.com")) == nil)
        #expect(r.check(Self.who("a@example.com", hd: "Example.COM")) == nil)
        // A consumer account at the same address has no hd claim.
        #expect(r.check(Self.who("a@example.com", hd: nil)) == .hostedDomain)
        #expect(r.check(Self.who("a@example.com", hd: "evil.test")) == .hostedDomain)
    }

    @Test func everyConfiguredKindMustHold() {
        let r = Self.rule(domains: ["example.com"], groups: ["staff"], hd: ["example.com"])
        #expect(r.check(Self.who("a@example.com", groups: ["staff"], hd: "example.com")) == nil)
        #expect(r.check(Self.who("a@example.com", groups: [], hd: "example.com")) == .group)
        #expect(r.check(Self.who("a@other.test", groups: ["staff"], hd: "example.com")) == .email)
        #expect(r.check(Self.who("a@example.com", groups: ["staff"])) == .hostedDomain)
    }

    @Test func anyAuthenticatedUserIsSaidOutright() {
        var r = AccessRule()
        #expect(r.isEmpty)
        r.anyAuthenticatedUser = true
        #expect(!r.isEmpty)
        #expect(r.check(Self.who(nil, verified: false)) == nil)
    }

    @Test func theEmailsFileSkipsCommentsBlanksAndNonAddresses() {
        let list = AllowedEmailsFile.parse("""
        # staff
        alice@example.com
          Bob@Example.COM   # contractor
        not an address

        carol@ex\u{e4}mple.com
        """)
        #expect(list == ["alice@example.com", "bob@example.com"])
    }

    // MARK: Only ASCII folds, and only the same bytes match

    @Test func theKelvinSignIsNoK() {
        // U+212A lower-cases to "k" under Unicode rules; the IdP holds the two accounts apart.
        #expect(Self.rule(emails: ["kim@partner.test"]).check(Self.who("\u{212A}im@partner.test")) == .email)
        #expect(Self.rule(domains: ["kettle.example"]).check(Self.who("tom@\u{212A}ettle.example")) == .email)
        #expect(Self.rule(hd: ["kettle.example"]).check(Self.who("a@kettle.example", hd: "\u{212A}ettle.example")) == .hostedDomain)
        #expect(Self.rule(emails: ["kim@partner.test"]).check(Self.who("KIM@partner.test")) == nil)
        #expect("\u{212A}IM".asciiLowercased() == "\u{212A}im")
    }

    @Test func canonicallyEquivalentSpellingsAreDifferentIdentifiers() {
        // Å as U+00C5 and as U+212B (Angstrom sign): equal to Swift's ==, not to an IdP.
        let composed = "\u{C5}sa@example.com", angstrom = "\u{212B}sa@example.com"
        #expect(composed == angstrom)
        #expect(Self.rule(emails: [composed]).check(Self.who(angstrom)) == .email)
        #expect(Self.rule(emails: [composed]).check(Self.who(composed)) == nil)
        #expect(Self.rule(groups: ["\u{C5}"]).check(Self.who(nil, groups: ["\u{212B}"])) == .group)
        let file = AllowedEmailsFile.parse(composed)
        #expect(file.first.map { $0.sameBytes(angstrom) } == false)
    }

    // MARK: /_oauth/auth's per-call restrictions

    @Test func perCallRestrictionsAreReadAsWritten() throws {
        let rule = try #require(try SessionLayer.perCallRule("allowed_groups=admins,%20ops&allowed_emails=Bob@Example.COM&allowed_email_domains=.Corp.test").get())
        #expect(rule.groups == ["admins", "ops"])
        #expect(rule.emails == ["bob@example.com"])
        #expect(rule.emailDomains == [".corp.test"])
        #expect(try SessionLayer.perCallRule(nil).get() == nil)
        #expect(try SessionLayer.perCallRule("").get() == nil)
    }

    @Test(arguments: [
        ("allowed_groups=admins&", PerCallRuleProblem.unreadable),
        ("allowed_groups=admins&flag", .unreadable),
        ("allowed_groups=admins&x=%ZZ", .unreadable),
        ("allowed_groups=admins&&y=1", .unreadable),
        ("allowed_groups=admins&note=a%00b", .unreadable),
        ("allowed_groups=R&D", .unreadable),
        ("allowed_groups=R&D=x", .unknownParameter("D")),
        ("allowed_group=admins", .unknownParameter("allowed_group")),
        ("allowed_groups=a&allowed_groups=b", .repeated("allowed_groups")),
        ("allowed_groups=", .empty("allowed_groups")),
        ("allowed_groups=%20,%20", .empty("allowed_groups")),
        ("allowed_emails=bob", .notAnEntry("allowed_emails")),
        ("allowed_email_domains=ex%C3%A4mple.com", .notAnEntry("allowed_email_domains")),
        ("allowed_email_domains=\u{212A}ettle.example", .unreadable),
    ])
    func aPerCallRestrictionThatCannotBeReadIsAProblem(_ query: String, _ problem: PerCallRuleProblem) {
        guard case .failure(let found) = SessionLayer.perCallRule(query) else {
            Issue.record("read \(query) as a restriction")
            return
        }
        #expect(found == problem)
    }

    // MARK: Deny beside allow

    @Test func aDenyRuleWinsOverEveryAllowRule() {
        var r = Self.rule(domains: ["example.com"], groups: ["staff"])
        r.deniedEmails = ["bob@example.com"]
        r.deniedEmailDomains = [".contractors.example.com"]
        r.deniedGroups = ["suspended"]
        #expect(r.check(Self.who("alice@example.com", groups: ["staff"])) == nil)
        #expect(r.check(Self.who("Bob@Example.COM", groups: ["staff"])) == .denied)
        #expect(r.check(Self.who("alice@example.com", groups: ["staff", "suspended"])) == .denied)
        #expect(r.check(Self.who("x@eu.contractors.example.com", groups: ["staff"])) == .denied)
        // Denied whether or not the provider vouches for the address; an address that cannot be
        // read is denied too when addresses are denied.
        #expect(r.check(Self.who("bob@example.com", verified: false, groups: ["staff"])) == .denied)
        #expect(r.check(Self.who("bob@ex\u{e4}mple.com", groups: ["staff"])) == .denied)
        #expect(r.check(Self.who("\u{212A}ob@example.com", groups: ["staff"])) == nil, "another account of the allowed domain, not bob")
    }

    @Test func denyRulesStandBesideAnyAuthenticatedUser() {
        var r = AccessRule()
        r.anyAuthenticatedUser = true
        r.deniedGroups = ["suspended"]
        #expect(r.check(Self.who(nil, verified: false)) == nil)
        #expect(r.check(Self.who(nil, groups: ["suspended"])) == .denied)
        var denyOnly = AccessRule()
        denyOnly.deniedGroups = ["x"]
        #expect(denyOnly.isEmpty && denyOnly.denies, "deny rules alone let nobody in")
    }

    // MARK: Claims

    @Test func aClaimRuleEqualsContainsOrIsOneOf() {
        let claims: [String: JSONValue] = [
            "department": .string("eng"), "level": .number("3"), "staff": .bool(true), "nothing": .null,
            "realm_access": .object(["roles": .array([.string("ops"), .string("viewer")])]), "tier": .string("gold"),
        ]
        func holds(_ path: String, _ match: ClaimRule.Match) -> Bool {
            ClaimRule(claim: path, match: match).holds(ClaimRule.value(at: path, in: claims))
        }
        #expect(holds("department", .equals("eng")))
        #expect(!holds("department", .equals("Eng")), "byte for byte")
        #expect(holds("level", .equals("3")) && holds("staff", .equals("true")))
        #expect(holds("realm_access.roles", .contains("ops")) && !holds("realm_access.roles", .contains("admin")))
        #expect(holds("department", .contains("eng")), "a single value is a one-element list")
        #expect(holds("tier", .oneOf(["silver", "gold"])) && !holds("tier", .oneOf(["silver"])))
        #expect(holds("realm_access.roles", .oneOf(["admin", "viewer"])))
        #expect(!holds("missing", .equals("x")) && !holds("nothing", .equals("null")) && !holds("realm_access", .equals("x")))
        #expect(!holds("realm_access.missing.deeper", .contains("x")))
    }

    @Test func everyClaimRuleMustHoldAndAMissingClaimRefuses() {
        var r = AccessRule()
        r.claims = [ClaimRule(claim: "department", match: .equals("eng")), ClaimRule(claim: "tier", match: .oneOf(["gold"]))]
        #expect(!r.isEmpty)
        func who(_ claims: [String: JSONValue]) -> AccessSubject {
            AccessSubject(email: nil, emailVerified: false, groups: [], hostedDomain: nil, claims: claims)
        }
        #expect(r.check(who(["department": .string("eng"), "tier": .string("gold")])) == nil)
        #expect(r.check(who(["department": .string("eng")])) == .claim)
        #expect(r.check(who(["department": .string("ops"), "tier": .string("gold")])) == .claim)
    }
}
