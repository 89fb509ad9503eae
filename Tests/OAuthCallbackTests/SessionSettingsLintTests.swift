import Testing
import ProxyCore
@testable import OAuthCallback

/// `check`'s warnings about access rules that can never match (`rulesThatCannotMatch`).
@Suite struct SessionSettingsLintTests {
    static let google = ProviderSettings(name: "google", kind: .google)
    static let corp = ProviderSettings(name: "corp", kind: .oidc)

    @Test func aRuleBothAllowedAndDeniedIsNamed() {
        var s = SessionSettings()
        s.access.groups = ["staff", "ops"]
        s.access.deniedGroups = ["ops"]
        s.access.emails = ["bob@contractors.example.com", "ann@example.com"]
        s.access.deniedEmailDomains = [".example.com"]
        s.access.emailDomains = ["eu.example.com", "example.org"]
        let found = s.rulesThatCannotMatch(sessionProviders: [Self.google])
        #expect(found.count == 3, "\(found)")
        #expect(found.contains { $0.hasPrefix("oauth.session.allowed_groups: 'ops'") })
        #expect(found.contains { $0.hasPrefix("oauth.session.allowed_emails: 'bob@contractors.example.com'") })
        #expect(found.contains { $0.hasPrefix("oauth.session.allowed_email_domains: 'eu.example.com'") })
    }

    @Test func hostedDomainsWithoutAGoogleProviderLetNobodyIn() {
        var s = SessionSettings()
        s.pathRules = [PathAccessRule(prefix: try! PathPrefix.parse("/corp").get(), rule: { var r = AccessRule(); r.hostedDomains = ["corp.test"]; return r }())]
        #expect(s.rulesThatCannotMatch(sessionProviders: [Self.corp]).first?.hasPrefix("oauth.session.path_rules[0].allowed_hosted_domains") == true)
        #expect(s.rulesThatCannotMatch(sessionProviders: [Self.corp, Self.google]).isEmpty)
    }

    @Test func anExtraIssuerShadowedByABearerProviderIsNamed() {
        var corp = Self.corp
        corp.endpoints.issuer = "https://login.corp.example"
        corp.native["ios"] = NativeClient(clientID: "corp-ios", redirectURI: "com.corp:/cb")
        var s = SessionSettings()
        s.bearerProviders = ["corp"]
        s.extraJWTIssuers = [.init(issuer: "https://login.corp.example", audiences: ["corp-ios"]),
                             .init(issuer: "https://login.corp.example", audiences: ["corp-ios", "api://orders"]),
                             .init(issuer: "https://partner.example", audiences: ["corp-ios"])]
        let found = s.rulesThatCannotMatch(sessionProviders: [corp])
        #expect(found.count == 1 && found.first?.hasPrefix("oauth.session.extra_jwt_issuers[0]: its issuer is bearer_tokens provider 'corp''s") == true,
                "\(found)")
        s.bearerProviders = []
        #expect(s.rulesThatCannotMatch(sessionProviders: [corp]).isEmpty, "without bearer_tokens the provider takes no tokens")
    }

    @Test func aPathRuleUnderSkipIsNamed() {
        var s = SessionSettings()
        s.skip = [try! PathPrefix.parse("/public").get()]
        var r = AccessRule()
        r.groups = ["admins"]
        s.pathRules = [PathAccessRule(prefix: try! PathPrefix.parse("/public/admin").get(), rule: r),
                       PathAccessRule(prefix: try! PathPrefix.parse("/publications").get(), rule: r)]
        let found = s.rulesThatCannotMatch(sessionProviders: [Self.google])
        #expect(found.count == 1 && found.first?.hasPrefix("oauth.session.path_rules[0]: '/public/admin' lies under skip '/public'") == true, "\(found)")
    }

    @Test func aConsistentConfigurationHasNothingToSay() {
        var s = SessionSettings()
        s.access.emailDomains = ["example.com"]
        s.access.deniedEmails = ["bob@example.com"]
        s.access.groups = ["staff"]
        s.access.deniedGroups = ["suspended"]
        #expect(s.rulesThatCannotMatch(sessionProviders: [Self.google]).isEmpty)
    }
}
