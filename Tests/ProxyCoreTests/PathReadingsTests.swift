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
        return Array(path.utf8).withUnsafeBytes { foldingCase ? p.matchesFoldingCase($0) : p.matches($0) }
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

    static func matchesFoldingCase(_ prefix: String, _ path: String) -> Bool {
        matches(prefix, path, foldingCase: true)
    }

    @Test func foldingCaseFoldsASCIILettersOnlyAndKeepsSegmentBoundaries() {
        #expect(Self.matchesFoldingCase("/public", "/Public"))
        #expect(Self.matchesFoldingCase("/public", "/PUBLIC/A.CSS"))
        #expect(Self.matchesFoldingCase("/Public", "/public"))
        #expect(Self.matchesFoldingCase("/api/v1", "/API/V1/x"))
        #expect(!Self.matchesFoldingCase("/public", "/PUBLICADMIN"))
        #expect(!Self.matchesFoldingCase("/public", "/Public.admin"))
        #expect(!Self.matchesFoldingCase("/public", "/PUB"))
        // '@' (0x40) and '`' (0x60), '~' (0x7E) and '^' (0x5E) differ by the case bit but are not letters.
        #expect(!Self.matchesFoldingCase("/a@b", "/a`b"))
        #expect(!Self.matchesFoldingCase("/a~b", "/a^b"))
        #expect(Self.matchesFoldingCase("/", "/ANY"))
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
