import Testing
import ProxyCore
@testable import OAuthCallback

/// `SessionRefresh`: when a server-side session is refreshed, and what the answer does to it —
/// pure functions of the record, the setting and the clock, so no socket and no sleeping.
@Suite struct SessionRefreshTests {
    static let now: Int64 = 1_700_000_000
    static let interval: Int64 = 900

    static func session(refreshedAgo: Int64? = 100, token: String? = "rt-1", client: String? = "web",
                        failedAgo: Int64? = nil) -> ProxySession {
        var s = ProxySession(provider: "corp", subject: "sub-1", email: "ann@example.com", emailVerified: true,
                             name: "Ann", groups: ["staff"], issuedAt: now - 3_000, expiresAt: now + 3_600)
        s.refreshedAt = refreshedAgo.map { now - $0 }
        s.refreshToken = token
        s.refreshClient = client
        s.refreshFailedAt = failedAgo.map { now - $0 }
        return s
    }

    struct Case: Sendable, CustomTestStringConvertible {
        let name: String
        let session: ProxySession
        let interval: Int64?
        let expected: SessionRefresh.Decision
        var testDescription: String { name }
    }

    static let cases: [Case] = [
        Case(name: "refresh off", session: session(refreshedAgo: 100_000), interval: nil, expected: .serve),
        Case(name: "not due", session: session(refreshedAgo: interval - 1), interval: interval, expected: .serve),
        Case(name: "due at the interval exactly", session: session(refreshedAgo: interval), interval: interval, expected: .tryLock),
        Case(name: "long overdue", session: session(refreshedAgo: 10 * interval), interval: interval, expected: .tryLock),
        Case(name: "never refreshed: counted from the sign-in", session: session(refreshedAgo: nil), interval: interval,
             expected: .tryLock),
        Case(name: "never refreshed, signed in recently", session: session(refreshedAgo: nil), interval: 3_001, expected: .serve),
        Case(name: "due without a refresh token ends", session: session(refreshedAgo: interval, token: nil), interval: interval,
             expected: .end),
        Case(name: "due without its client ends", session: session(refreshedAgo: interval, client: nil), interval: interval,
             expected: .end),
        Case(name: "not due without a refresh token is served", session: session(refreshedAgo: 10, token: nil),
             interval: interval, expected: .serve),
        Case(name: "IdP failed 30 s ago: wait", session: session(refreshedAgo: interval + 60, failedAgo: 30), interval: interval,
             expected: .serve),
        Case(name: "IdP failed 60 s ago: try again", session: session(refreshedAgo: interval + 60, failedAgo: 60),
             interval: interval, expected: .tryLock),
        Case(name: "short interval: the wait is the interval", session: session(refreshedAgo: 10, failedAgo: 2), interval: 2,
             expected: .tryLock),
        Case(name: "short interval, failed just now", session: session(refreshedAgo: 10, failedAgo: 1), interval: 2,
             expected: .serve),
    ]

    @Test(arguments: cases) func decidesWhetherASessionIsRefreshed(_ c: Case) {
        #expect(SessionRefresh.decision(c.session, interval: c.interval, now: Self.now) == c.expected)
    }

    @Test func onlyTheRequestThatTookTheLockRefreshes() {
        #expect(SessionRefresh.afterLock(true) == .tryLock)
        #expect(SessionRefresh.afterLock(false) == .serve, "another request holds it: served as it is")
        #expect(SessionRefresh.afterLock(nil) == .serve, "the store could not answer: served, tried later")
    }

    @Test func theLockAndTheRetryWaitNeverOutlastAShortInterval() {
        #expect(SessionRefresh.lockTTL(900) == 30 && SessionRefresh.lockTTL(2) == 2 && SessionRefresh.lockTTL(1) == 1)
        #expect(SessionRefresh.retryDelay(900) == 60 && SessionRefresh.retryDelay(5) == 5)
    }

    static func identity(_ claims: [String: JSONValue]?, refreshToken: String? = "rt-2", accessToken: String = "at-2",
                         idToken: String? = nil) -> RefreshedIdentity {
        RefreshedIdentity(tokens: TokenResponse(accessToken: accessToken, idToken: idToken, refreshToken: refreshToken),
                          claims: claims)
    }

    static func groups(_ claims: [String: JSONValue]) -> [String] {
        claims["groups"]?.arrayValue?.compactMap(\.stringValue) ?? []
    }

    @Test func aRenewalTakesTheNewClaimsAndTheRotatedToken() {
        var old = Self.session(failedAgo: 5)
        old.hostedDomain = "example.com"
        let claims: [String: JSONValue] = ["sub": .string("sub-1"), "email": .string("ann@example.org"),
                                           "email_verified": .string("true"), "groups": .array([.string("admins")])]
        var withClaims = old
        withClaims.ruleClaims = ["tier": .string("gold")]
        let s = SessionRefresh.renewed(withClaims, with: Self.identity(claims), now: Self.now, passAccessToken: false,
                                       keepIDToken: false, groups: Self.groups,
                                       ruleClaims: { c in c["email_verified"].map { ["email_verified": $0] } ?? [:] })
        #expect(s.refreshToken == "rt-2" && s.refreshedAt == Self.now && s.refreshFailedAt == nil)
        #expect(s.ruleClaims == ["email_verified": .string("true")], "the rules' claims are read anew, the old ones gone")
        #expect(s.email == "ann@example.org" && s.emailVerified && s.groups == ["admins"])
        #expect(s.hostedDomain == nil && s.name == nil, "claims the IdP no longer sends are gone, not kept")
        #expect(s.accessToken == nil, "kept only when passed upstream")
        #expect(s.subject == old.subject && s.expiresAt == old.expiresAt && s.issuedAt == old.issuedAt)
    }

    @Test func aRenewalWithoutClaimsOrRotationKeepsWhatItHad() {
        let old = Self.session()
        let s = SessionRefresh.renewed(old, with: Self.identity(nil, refreshToken: nil, idToken: "new.id.token"), now: Self.now,
                                       passAccessToken: true, keepIDToken: true, groups: Self.groups, ruleClaims: { _ in [:] })
        #expect(s.refreshToken == "rt-1" && s.groups == ["staff"] && s.email == old.email && s.emailVerified)
        #expect(s.accessToken == "at-2" && s.idToken == "new.id.token")
    }

    @Test func anUnverifiedOrMissingAddressIsNotVerified() {
        for verified: JSONValue? in [nil, .bool(false), .string("yes"), .string("false")] {
            var claims: [String: JSONValue] = ["email": .string("ann@example.com")]
            claims["email_verified"] = verified
            let s = SessionRefresh.renewed(Self.session(), with: Self.identity(claims), now: Self.now, passAccessToken: false,
                                           keepIDToken: false, groups: Self.groups, ruleClaims: { _ in [:] })
            #expect(!s.emailVerified, "\(String(describing: verified))")
        }
    }

    @Test func theOutcomeOfEachAnswer() {
        let failure = CallbackFailure(.idp, code: "x", userMessage: "", logDetail: "")
        #expect(SessionRefresh.outcome(.renewed(Self.identity(nil)), refused: { _ in false }) == .renewed)
        #expect(SessionRefresh.outcome(.renewed(Self.identity(nil)), refused: { _ in true }) == .refused)
        #expect(SessionRefresh.outcome(.invalidGrant, refused: { _ in Issue.record("asked"); return false }) == .ended)
        #expect(SessionRefresh.outcome(.failed(failure), refused: { _ in false }) == .ended)
        #expect(SessionRefresh.outcome(.unavailable(failure), refused: { _ in false }) == .unavailable)
    }

    @Test func afterInvalidGrantARecordRotatedByAnotherRequestSurvives() {
        var rotated = Self.session(refreshedAgo: 0)
        rotated.refreshToken = "rt-2"
        #expect(SessionRefresh.survivor(reread: rotated, usedToken: "rt-1", now: Self.now) == rotated)
        #expect(SessionRefresh.survivor(reread: Self.session(), usedToken: "rt-1", now: Self.now) == nil, "same token: ended")
        #expect(SessionRefresh.survivor(reread: nil, usedToken: "rt-1", now: Self.now) == nil, "gone: ended")
        var expired = rotated
        expired.expiresAt = Self.now
        #expect(SessionRefresh.survivor(reread: expired, usedToken: "rt-1", now: Self.now) == nil)
        var tokenless = rotated
        tokenless.refreshToken = nil
        #expect(SessionRefresh.survivor(reread: tokenless, usedToken: "rt-1", now: Self.now) == nil)
    }

    @Test func theRefreshStateRoundTripsInTheStoreRecordButNeverEntersACookie() throws {
        var s = Self.session(failedAgo: 7)
        s.refreshToken = "1//0refresh-token-never-in-a-cookie"
        #expect(SessionCookie.session(from: SessionCookie.payload(s)) == s)
        let cookie = try SessionCookie(name: "_oauth_session", keys: [[UInt8](repeating: 7, count: 32)])
        let opened = try #require(cookie.open(try cookie.seal(s), now: Self.now))
        #expect(opened.refreshToken == nil && opened.refreshClient == nil)
        #expect(opened.refreshedAt == s.refreshedAt, "the timestamps are harmless; only the token and its client are kept out")
    }
}
