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
}
