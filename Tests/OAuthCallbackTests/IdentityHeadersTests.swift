import Testing
@testable import OAuthCallback

@Suite struct IdentityHeadersTests {
    // MARK: Stripping client-sent variants

    static let variants = [
        "X-Forwarded-User", "x-forwarded-user", "X-FORWARDED-USER", "x-FoRwArDeD-uSeR", "X_Forwarded_User",
        "X-Forwarded-Email", "x-forwarded-email", "X-FORWARDED-EMAIL", "X_Forwarded_Email", "x_forwarded_email",
        "X_FORWARDED_EMAIL", "X-Forwarded_Email", "X_Forwarded-Email", "x-forwarded_EMAIL",
        "X-Forwarded-Preferred-Username", "x_forwarded_preferred_username", "X-Forwarded-Preferred_Username",
        "X-Forwarded-Groups", "x_forwarded_groups", "X-Forwarded-Access-Token", "X_FORWARDED_ACCESS_TOKEN",
        "x-forwarded-access_token",
        "X-Auth-Request-User", "x_auth_request_user", "X-Auth-Request-Email", "X_AUTH_REQUEST_EMAIL",
        "X-Auth-Request-Preferred-Username", "X-Auth_Request-Preferred_Username", "X-Auth-Request-Groups",
        "X-Auth-Request-Access-Token", "x_auth_request_access_token",
        // Every X-Auth-Request-* name, not only those the proxy sets: gateways set others.
        "X-Auth-Request-Uid", "x_auth_request_uid", "X-Auth-Request-Redirect", "X-AUTH-REQUEST-ROLES", "X-Auth-Request-X",
    ]

    @Test(arguments: variants)
    func clientSentVariantIsAnIdentityHeader(name: String) {
        #expect(IdentityHeaders.isIdentityHeader(name))
        #expect(IdentityHeaders.isIdentityHeader(Array(name.utf8)[...]))
    }

    static let lookAlikes = [
        "X-Forwarded-Emails", "X-Forwarded-Emai", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto",
        "X-Forwarded-Port", "X-Forwarded-Prefix", "X-Forwarded-Users", "X-Forwarded-Email ", " X-Forwarded-Email",
        "X-Forwarded--Email", "X-ForwardedEmail", "XForwarded-Email", "X-Forwarded.Email", "X-Forwarded Email",
        "Forwarded", "X-Real-IP", "X-Auth-Request-", "X-Auth-Request", "X-Auth-Requests-User", "X-Email", "Email", "Cookie", "Authorization",
        "Proxy-Authorization", "X-Forwarded-Access-Tokens", "X-Forwarded-User\u{0}", "X-Forwarded-\u{0130}mail", "",
        "X", "X-",
    ]

    @Test(arguments: lookAlikes)
    func lookAlikeIsNotAnIdentityHeader(name: String) {
        #expect(!IdentityHeaders.isIdentityHeader(name))
    }

    @Test func theUserHeaderMayHoldAnyKeptClaim() {
        var s = Self.fullSession
        s.ruleClaims = ["employee_id": .number("4711"), "ext.login": .string("jdoe"), "flags": .array([])]
        #expect(IdentityHeaders.userValue(s, .claim("employee_id")) == "4711")
        #expect(IdentityHeaders.userValue(s, .claim("ext.login")) == "jdoe")
        #expect(IdentityHeaders.userValue(s, .claim("flags")) == nil, "not a string or a number: no user header")
        #expect(IdentityHeaders.userValue(s, .claim("missing")) == nil)
    }

    @Test func groupsThatHoldACommaCannotReadAsOthers() {
        // An app that splits on commas must not see `admins` in a group named `viewer,admins`.
        #expect(IdentityHeaders.groupsValue(["viewer,admins", "ops"]) == "viewer%2Cadmins,ops")
        #expect(IdentityHeaders.groupsValue(["100%", "a b"]) == "100%25,a b")
        #expect(IdentityHeaders.groupsValue(["/Admins", "staff"]) == "/Admins,staff")
    }

    @Test(arguments: ["Authorization", "authorization", "AUTHORIZATION", "aUtHoRiZaTiOn"])
    func authorizationIsStrippedOnlyWhenTheProxyPassesItsOwn(name: String) {
        #expect(!IdentityHeaders.isIdentityHeader(name))
        #expect(IdentityHeaders.isIdentityHeader(name, includingAuthorization: true))
    }

    @Test func proxyAuthorizationIsNeverTakenForAuthorization() {
        #expect(!IdentityHeaders.isIdentityHeader("Proxy-Authorization", includingAuthorization: true))
        #expect(!IdentityHeaders.isIdentityHeader("Authorizations", includingAuthorization: true))
    }

    @Test func everyNameTheProxySetsIsStripped() {
        let session = Self.fullSession
        let all = IdentityHeaders.headers(for: session, passAccessToken: true, passAuthorization: true)
            + IdentityHeaders.authRequestHeaders(for: session, passAccessToken: true)
        for name in all.map(\.0) + [IdentityHeaders.jwtAssertion] {
            #expect(IdentityHeaders.isIdentityHeader(name, includingAuthorization: true), "\(name)")
        }
        #expect(IdentityHeaders.names.count == 11)
    }

    // MARK: Producing headers

    static let fullSession = ProxySession(
        provider: "google", subject: "1234567890", email: "jane@example.com", emailVerified: true,
        name: "Jane Doe", preferredUsername: "jane", groups: ["admins", "staff"], accessToken: "ya29.token",
        issuedAt: 1_700_000_000, expiresAt: 1_700_003_600)

    static var gitea: IdentityHeaderNames {
        var n = IdentityHeaderNames()
        n.user = "X-WEBAUTH-USER"
        n.email = "X-WEBAUTH-EMAIL"
        n.userClaim = .preferredUsername
        return n
    }

    @Test func configuredNamesAndTheUserClaimShapeTheUpstreamHeaders() {
        let headers = IdentityHeaders.headers(for: Self.fullSession, passAccessToken: false, passAuthorization: false, names: Self.gitea)
        #expect(headers.map { "\($0.0): \($0.1)" } == [
            "X-WEBAUTH-USER: jane",
            "X-WEBAUTH-EMAIL: jane@example.com",
            "X-Forwarded-Preferred-Username: jane",
            "X-Forwarded-Groups: admins,staff",
        ])
        var byEmail = IdentityHeaderNames()
        byEmail.userClaim = .email
        var unverified = Self.fullSession
        unverified.emailVerified = false
        // No verified address, no user header: an app must not take an unverified address for a user.
        #expect(!IdentityHeaders.headers(for: unverified, passAccessToken: false, passAuthorization: false, names: byEmail)
            .contains { $0.0 == "X-Forwarded-User" })
    }

    @Test(arguments: ["X-WEBAUTH-USER", "x-webauth-user", "X_WEBAUTH_USER", "x_WebAuth-User", "X-WEBAUTH-EMAIL",
                      "X-Forwarded-User", "x_forwarded_email", "X-Auth-Request-User"])
    func configuredNamesAreStrippedInEverySpellingBesideTheDefaults(_ name: String) {
        let strip = IdentityHeaders.matcher(Self.gitea, includingAuthorization: false)
        #expect(Array(name.utf8).withUnsafeBytes { strip($0) }, "\(name)")
        #expect(!Array("X-WEBAUTH-USERS".utf8).withUnsafeBytes { strip($0) })
        #expect(!Array("Authorization".utf8).withUnsafeBytes { strip($0) })
    }

    @Test func upstreamHeadersUseOAuth2ProxyNamesAndValues() {
        let headers = IdentityHeaders.headers(for: Self.fullSession, passAccessToken: false, passAuthorization: false)
        #expect(headers.map { "\($0.0): \($0.1)" } == [
            "X-Forwarded-User: 1234567890",
            "X-Forwarded-Email: jane@example.com",
            "X-Forwarded-Preferred-Username: jane",
            "X-Forwarded-Groups: admins,staff",
        ])
    }

    @Test func theAccessTokenIsPassedOnlyWhenConfigured() {
        let headers = IdentityHeaders.headers(for: Self.fullSession, passAccessToken: true, passAuthorization: true)
        #expect(headers.map { "\($0.0): \($0.1)" }.suffix(2) == [
            "X-Forwarded-Access-Token: ya29.token",
            "Authorization: Bearer ya29.token",
        ])
        var tokenless = Self.fullSession
        tokenless.accessToken = nil
        let without = IdentityHeaders.headers(for: tokenless, passAccessToken: true, passAuthorization: true)
        #expect(!without.contains { $0.0 == "X-Forwarded-Access-Token" || $0.0 == "Authorization" })
    }

    @Test func forwardAuthAnswerUsesXAuthRequestNames() {
        let headers = IdentityHeaders.authRequestHeaders(for: Self.fullSession, passAccessToken: true)
        #expect(headers.map { "\($0.0): \($0.1)" } == [
            "X-Auth-Request-User: 1234567890",
            "X-Auth-Request-Email: jane@example.com",
            "X-Auth-Request-Preferred-Username: jane",
            "X-Auth-Request-Groups: admins,staff",
            "X-Auth-Request-Access-Token: ya29.token",
        ])
    }

    @Test func anUnverifiedEmailIsNeverPassedUpstream() {
        var session = Self.fullSession
        session.emailVerified = false
        let headers = IdentityHeaders.headers(for: session, passAccessToken: false, passAuthorization: false)
        #expect(!headers.contains { $0.0 == "X-Forwarded-Email" })
        #expect(!IdentityHeaders.authRequestHeaders(for: session, passAccessToken: false)
            .contains { $0.0 == "X-Auth-Request-Email" })
    }

    @Test func minimalSessionGivesOnlyTheUser() {
        let session = ProxySession(provider: "apple", subject: "001.abc", issuedAt: 0, expiresAt: 1)
        let headers = IdentityHeaders.headers(for: session, passAccessToken: true, passAuthorization: true)
        #expect(headers.map { "\($0.0): \($0.1)" } == ["X-Forwarded-User: 001.abc"])
    }

    @Test(arguments: ["jane\r\nX-Forwarded-Email: admin@example.com", "jane\n", "jane\u{0}", "a\tb", "x\u{7F}"])
    func valueThatCouldSplitAHeaderIsLeftOut(value: String) {
        var session = Self.fullSession
        session.preferredUsername = value
        session.email = value
        let headers = IdentityHeaders.headers(for: session, passAccessToken: false, passAuthorization: false)
        #expect(headers.map(\.0) == ["X-Forwarded-User", "X-Forwarded-Groups"])
    }

    @Test func utf8ValuesPassUnchanged() {
        var session = Self.fullSession
        session.preferredUsername = "jos\u{00E9}"
        let headers = IdentityHeaders.headers(for: session, passAccessToken: false, passAuthorization: false)
        #expect(headers.contains { $0 == ("X-Forwarded-Preferred-Username", "jos\u{00E9}") })
    }
}
