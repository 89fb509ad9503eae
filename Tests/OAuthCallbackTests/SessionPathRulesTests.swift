import Testing
import ProxyCore
@testable import OAuthCallback

/// `protect` and `skip` decide on the canonical path and fail closed over the ways servers
/// read it: every spelling outside testers used to reach a protected route without a session.
@Suite struct SessionPathRulesTests {
    static func settings(protect: SessionSettings.PathRule, skip: [String] = []) -> SessionSettings {
        var s = SessionSettings()
        s.protect = protect
        s.skip = skip.map { try! PathPrefix.parse($0).get() }
        return s
    }

    static let admin = settings(protect: .prefixes([try! PathPrefix.parse("/admin").get(), try! PathPrefix.parse("/api/private").get()]))
    static let allButPublic = settings(protect: .all, skip: ["/public"])

    @Test(arguments: [
        "/admin", "/admin/", "/admin/users", "//admin", "/%61dmin", "/%2Fadmin", "/adm%69n/users", "/api%2fprivate",
        "/./admin", "/x/../admin", "/x/%2e%2e/admin", "/admin;jsessionid=1", "/admin%3B", "/x/..%2Fadmin",
        "/x\\..\\admin", "/admin./", "/x/%252e%252e/admin", "/x%5C..%5Cadmin", "/%2561dmin", "/x/..;/admin",
        // Case-insensitive routers (Express, ASP.NET Core, IIS) send these to /admin's handler.
        "/ADMIN", "/Admin", "/Admin/users", "/aDmIn/", "/API/private", "/api/PRIVATE/x", "/%41dmin", "/%2541dmin",
        "/ADMIN;x", "/x/../ADMIN",
    ])
    func protectedUnderAnyReading(_ path: String) {
        #expect(Self.admin.requiresSession(path), "\(path)")
    }

    @Test(arguments: ["/", "/administrator", "/ADMINS", "/admins", "/public", "/api/privates", "/x/admin", "/X/ADMIN", "/%C3%84dmin"])
    func otherPathsAreNotProtected(_ path: String) {
        #expect(!Self.admin.requiresSession(path), "\(path)")
    }

    @Test(arguments: [
        "/admin", "/public/../admin", "/public/%2e%2e/admin", "/public/..%2fadmin", "/public/..%2Fadmin",
        "/publicadmin", "/public-admin", "/public.admin", "/public/..;/admin", "/public;/../admin",
        "/public/%252e%252e/admin", "/public\\..\\admin", "/public%2F..%2Fadmin", "/PUBLIC", "/public%5C..%5Cadmin",
        "/Public/app.css", "/%50ublic/x",
    ])
    func skippedOnlyUnderEveryReading(_ path: String) {
        #expect(Self.allButPublic.requiresSession(path), "\(path)")
    }

    @Test(arguments: ["/public", "/public/", "/public/app.css", "//public/x", "/%70ublic/x", "/public/a/../b"])
    func skippedPaths(_ path: String) {
        #expect(!Self.allButPublic.requiresSession(path), "\(path)")
    }

    @Test func protectFoldsCaseWhateverCaseTheRuleIsWrittenIn() {
        let mixed = Self.settings(protect: .prefixes([try! PathPrefix.parse("/Admin").get()]))
        #expect(mixed.requiresSession("/admin/x"))
        #expect(mixed.requiresSession("/ADMIN"))
        #expect(!mixed.requiresSession("/adminx"))
    }

    @Test func skipStaysExactWhileProtectFolds() {
        let s = Self.settings(protect: .prefixes([try! PathPrefix.parse("/admin").get()]), skip: ["/admin/health"])
        #expect(!s.requiresSession("/admin/health"))
        #expect(s.requiresSession("/Admin/health"))
        #expect(s.requiresSession("/admin/HEALTH"))
    }

    @Test func aPathTheEngineRefusesCountsAsProtected() {
        #expect(Self.admin.requiresSession("/../admin"))
        #expect(Self.allButPublic.requiresSession("/public/%00"))
    }

    @Test func aSkipRouteSkipsItsMethodsOnly() {
        var s = Self.settings(protect: .all)
        s.skipRoutes = [.init(methods: [.get, .head], prefix: try! PathPrefix.parse("/api/public").get())]
        #expect(!s.requiresSession("/api/public/x", method: .get))
        #expect(!s.requiresSession("/api/public", method: .head))
        #expect(s.requiresSession("/api/public/x", method: .post))
        #expect(s.requiresSession("/api/public/x", method: .options))
        // Every reading, as for skip.
        #expect(s.requiresSession("/api/public/..%2Fadmin", method: .get))
        #expect(s.requiresSession("/API/public", method: .get))
    }
}
