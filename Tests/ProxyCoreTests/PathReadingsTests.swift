import Testing
@testable import ProxyCore

@Suite struct PathReadingsTests {
    static func readings(_ path: String) -> [String] {
        PathReadings.of(path) { $0.all } ?? []
    }

    @Test func aPlainPathHasOneReading() {
        #expect(Self.readings("/admin/users") == ["/admin/users"])
        #expect(PathReadings.of("/admin/users") { $0.others.isEmpty } == true)
    }

    @Test func encodedSlashesAreReadDecodedToo() {
        let r = Self.readings("/%2Fadmin")
        #expect(r.first == "/%2Fadmin")
        #expect(r.contains("/admin"))
        #expect(Self.readings("/public/..%2fadmin").contains("/admin"))
        #expect(Self.readings("/api%2fprivate").contains("/api/private"))
    }

    @Test func doubleEncodingIsReadTwiceDecoded() {
        #expect(Self.readings("/public/%252e%252e/admin").contains("/admin"))
        #expect(Self.readings("/%252fadmin").contains("/admin"))
    }

    @Test func pathParametersAreReadDropped() {
        #expect(Self.readings("/public/..;/admin").contains("/admin"))
        #expect(Self.readings("/admin;x=1").contains("/admin"))
        #expect(Self.readings("/admin%3Bx").contains("/admin"))
    }

    @Test func windowsReadsBackslashesAndTrailingDots() {
        #expect(Self.readings("/public\\..\\admin").contains("/admin"))
        #expect(Self.readings("/admin./x").contains("/admin/x"))
        #expect(Self.readings("/public%5C..%5Cadmin").contains("/admin"))
    }

    @Test(arguments: ["/admin%20", "/admin%09", "/admin%0A", "/admin%0d", "/admin%0B", "/admin%0C", "/admin%1F",
                      "/%09admin", "/admin%09/x", "/admin%20%09.", "/%20%09/admin"])
    func whitespaceAtEitherEndOfASegmentIsReadTrimmed(_ path: String) {
        // Spring trims segments with Java's isWhitespace (CVE-2016-5007); IIS drops trailing spaces.
        let admin = try! PathPrefix.parse("/admin").get()
        #expect(PathReadings.of(path) { r in r.any(admin.matches) } == true, "\(path): \(Self.readings(path))")
    }

    @Test func whitespaceInsideASegmentStays() {
        let admin = try! PathPrefix.parse("/admin").get()
        #expect(PathReadings.of("/ad%09min") { r in r.any(admin.matches) } == false)
    }

    @Test func aReadingThatClimbsStaysAtTheRoot() {
        #expect(Self.readings("/%2E%2E%2Fadmin").contains("/admin"))
    }

    @Test func anyAndEvery() {
        let admin = try! PathPrefix.parse("/admin").get()
        #expect(PathReadings.of("/%2Fadmin") { r in r.any(admin.matches) } == true)
        #expect(PathReadings.of("/%2Fadmin") { r in r.every(admin.matches) } == false)
        #expect(PathReadings.of("/admin/x") { r in r.every(admin.matches) } == true)
    }
}

@Suite struct PathPrefixTests {
    static func matches(_ prefix: String, _ path: String, foldingCase: Bool = false) -> Bool {
        let p = try! PathPrefix.parse(prefix).get()
        return Array(path.utf8).withUnsafeBytes { foldingCase ? p.covers($0) : p.matches($0) }
    }

    @Test func matchesOnSegmentBoundaries() {
        #expect(Self.matches("/public", "/public"))
        #expect(Self.matches("/public", "/public/"))
        #expect(Self.matches("/public", "/public/a.css"))
        #expect(!Self.matches("/public", "/publicadmin"))
        #expect(!Self.matches("/public", "/public-admin"))
        #expect(!Self.matches("/public", "/public.admin"))
        #expect(!Self.matches("/public", "/pub"))
        #expect(!Self.matches("/public", "/Public"))
    }

    static func covers(_ prefix: String, _ path: String) -> Bool {
        matches(prefix, path, foldingCase: true)
    }

    @Test func foldingCaseFoldsASCIILettersOnlyAndKeepsSegmentBoundaries() {
        #expect(Self.covers("/public", "/Public"))
        #expect(Self.covers("/public", "/PUBLIC/A.CSS"))
        #expect(Self.covers("/Public", "/public"))
        #expect(Self.covers("/api/v1", "/API/V1/x"))
        #expect(!Self.covers("/public", "/PUBLICADMIN"))
        #expect(!Self.covers("/public", "/Public-admin"))
        #expect(!Self.covers("/public", "/PUB"))
        // '@' (0x40) and '`' (0x60), '~' (0x7E) and '^' (0x5E) differ by the case bit but are not letters.
        #expect(!Self.covers("/a@b", "/a`b"))
        #expect(!Self.covers("/a~b", "/a^b"))
        #expect(Self.covers("/", "/ANY"))
    }

    @Test func coversAFormatSuffixInTheLastSegmentOnly() {
        // Rails routes /admin(.:format): /admin.json is the admin action.
        #expect(Self.covers("/admin", "/admin.json"))
        #expect(Self.covers("/admin", "/ADMIN.JSON"))
        #expect(Self.covers("/users/sign_in", "/users/sign_in.json"))
        #expect(!Self.covers("/admin", "/admin.json/x"))
        #expect(!Self.covers("/admin", "/administrator.json"))
        #expect(!Self.matches("/admin", "/admin.json"), "matches (skip's) stays exact")
    }

    @Test func aTrailingSlashIsDroppedAndTheRootMatchesAll() {
        #expect(Self.matches("/admin/", "/admin"))
        #expect(Self.matches("/admin/", "/admin/x"))
        #expect(Self.matches("/", "/anything"))
    }

    @Test func nonCanonicalPrefixesAreRefusedWithTheirCanonicalForm() {
        #expect(PathPrefix.parse("/%61dmin") == .failure(.init(text: "is not in canonical form: write it as /admin")))
        #expect(PathPrefix.parse("admin") == .failure(.init(text: "must start with /")))
        #expect(PathPrefix.parse("/../x") == .failure(.aboveRoot))
        #expect(PathPrefix.parse("//admin") == .failure(.init(text: "is not in canonical form: write it as /admin")))
    }
}
