import Testing
@testable import ProxyCore

/// RFC 3986 §5.4's dot-segment examples (as absolute paths), §6.2.2's normalizations, and the
/// spellings outside testers used to walk past `protect`/`skip`.
@Suite struct PathCanonicalizerTests {
    struct Case: Sendable, CustomTestStringConvertible {
        let input: String
        /// nil: refused.
        let canonical: String?
        var testDescription: String { input }
        init(_ input: String, _ canonical: String?) { self.input = input; self.canonical = canonical }
    }

    static let cases: [Case] = [
        // Canonical already.
        Case("/", "/"), Case("/admin", "/admin"), Case("/a/b/", "/a/b/"), Case("/a.b/c-d_e~f", "/a.b/c-d_e~f"),
        // RFC 3986 §5.4.1/§5.4.2, as absolute paths.
        Case("/b/c/./g", "/b/c/g"), Case("/b/c/.", "/b/c/"), Case("/b/c/./", "/b/c/"),
        Case("/b/c/..", "/b/"), Case("/b/c/../", "/b/"), Case("/b/c/../g", "/b/g"),
        Case("/b/c/../..", "/"), Case("/b/c/../../", "/"), Case("/b/c/../../g", "/g"),
        Case("/b/c/g.", "/b/c/g."), Case("/b/c/.g", "/b/c/.g"), Case("/b/c/g..", "/b/c/g.."),
        Case("/b/c/..g", "/b/c/..g"), Case("/b/c/./../g", "/b/g"), Case("/b/c/./g/.", "/b/c/g/"),
        Case("/b/c/g/./h", "/b/c/g/h"), Case("/b/c/g/../h", "/b/c/h"),
        Case("/b/c/g;x=1/./y", "/b/c/g;x=1/y"), Case("/b/c/g;x=1/../y", "/b/c/y"),
        Case("/a/b/c/./../../g", "/a/g"),
        // §6.2.2.1/§6.2.2.2: hex upper-cased, unreserved decoded, reserved kept encoded.
        Case("/%61dmin", "/admin"), Case("/adm%69n/users", "/admin/users"), Case("/%7Euser", "/~user"),
        Case("/%7euser", "/~user"), Case("/a%2fb", "/a%2Fb"), Case("/a%2Fb", "/a%2Fb"),
        Case("/%2Fadmin", "/%2Fadmin"), Case("/api%2fprivate", "/api%2Fprivate"),
        Case("/api/queues/%2F/q", "/api/queues/%2F/q"), Case("/x%3bjsessionid", "/x%3Bjsessionid"),
        Case("/caf%c3%a9", "/caf%C3%A9"), Case("/%252e%252e/admin", "/%252e%252e/admin"),
        // Empty segments merged (nginx's merge_slashes).
        Case("//admin", "/admin"), Case("///a//b//", "/a/b/"), Case("/a//", "/a/"),
        // Dot-segments, plain and encoded.
        Case("/./admin", "/admin"), Case("/x/../admin", "/admin"), Case("/x/%2e%2e/admin", "/admin"),
        Case("/x/%2E%2E/admin", "/admin"), Case("/x/.%2e/admin", "/admin"), Case("/x/%2e/admin", "/x/admin"),
        Case("/public/../admin", "/admin"), Case("/public/%2e%2e/admin", "/admin"),
        Case("/public/..%2fadmin", "/public/..%2Fadmin"), Case("/public/..;/admin", "/public/..;/admin"),
        Case("/a/b/..", "/a/"), Case("/a/...", "/a/..."),
        // Refused: above the root, NUL, malformed escapes, overlong UTF-8.
        Case("/..", nil), Case("/../admin", nil), Case("/a/../../admin", nil), Case("/%2e%2e/admin", nil),
        Case("/x%00", nil), Case("/%00/../admin", nil), Case("/%", nil), Case("/%4", nil), Case("/%zz", nil),
        Case("/a%g1", nil), Case("/%c0%ae%c0%ae/admin", nil), Case("/%C1%9C", nil), Case("/%e0%80%ae", nil),
        Case("/%f0%80%80%ae", nil),
    ]

    @Test(arguments: cases)
    func canonicalForm(_ c: Case) {
        switch PathCanonicalizer.canonical(c.input) {
        case .success(let s): #expect(s == c.canonical, "\(c.input)")
        case .failure(let r): #expect(c.canonical == nil, "\(c.input) refused: \(r.text)")
        }
    }

    @Test func canonicalPathsAreLeftInPlace() {
        var out: [UInt8] = []
        var bytes = Array("/assets/app-3f9.css".utf8)
        let outcome = bytes.withUnsafeMutableBytes { PathCanonicalizer.canonicalize(UnsafeRawBufferPointer($0), into: &out) }
        #expect(outcome == .canonical([]))
        #expect(out.isEmpty)
    }

    @Test func anEmptyPathIsTheRoot() {
        var out: [UInt8] = []
        let outcome = PathCanonicalizer.canonicalize(UnsafeRawBufferPointer(start: nil, count: 0), into: &out)
        #expect(outcome == .rewritten([]))
        #expect(out == Array("/".utf8))
    }

    @Test(arguments: ["/a/b", "/%61/..", "//x//./y/../z/", "/q%2fr/%7e", "/a;b/c\\d."])
    func canonicalizingTwiceChangesNothing(_ path: String) throws {
        let once = try PathCanonicalizer.canonical(path).get()
        #expect(try PathCanonicalizer.canonical(once).get() == once)
    }

    @Test func traitsNameWhatServersReadDifferently() {
        #expect(PathCanonicalizer.traitsOf(Array("/a/b".utf8)) == [])
        #expect(PathCanonicalizer.traitsOf(Array("/a%2Fb".utf8)) == [.escapes])
        #expect(PathCanonicalizer.traitsOf(Array("/a;b".utf8)) == [.semicolon])
        #expect(PathCanonicalizer.traitsOf(Array("/a\\b".utf8)) == [.backslash])
        #expect(PathCanonicalizer.traitsOf(Array("/admin./x".utf8)) == [.trailingDot])
    }

    @Test func theRefusalNamesTheRule() {
        #expect(PathCanonicalizer.canonical("/../etc") == .failure(.aboveRoot))
        #expect(PathCanonicalizer.canonical("/a%00") == .failure(.nul))
        #expect(PathCanonicalizer.canonical("/%c0%ae") == .failure(.overlong))
        #expect(PathCanonicalizer.canonical("/%2") == .failure(.malformedEscape))
    }
}
