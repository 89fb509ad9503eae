import Testing
#if canImport(Glibc)
import Glibc
#endif
@testable import ProxyCore

/// X-Accel-Redirect without sockets: where the app's URI points (`AccelTarget`), which of its
/// fields go with the file (`AccelKeptField`), the request fields that tell Rack::Sendfile about
/// it (`mappingFields`), and, through a real exchange with no client socket, the whole
/// replacement.
@Suite struct AccelRedirectTests {
    static let locations = [PathPrefix(bytes: Array("/_files".utf8)), PathPrefix(bytes: Array("/_files/exports".utf8)),
                            PathPrefix(bytes: Array("/private".utf8))]

    func resolve(_ value: String) -> AccelTarget {
        Array(value.utf8).withUnsafeBytes { AccelTarget.resolve($0, Self.locations) }
    }

    func file(_ location: Int, _ relative: String) -> AccelTarget {
        .file(location: location, relative: Array(relative.utf8))
    }

    // MARK: Where the URI points

    @Test func aURIUnderALocationNamesTheFileUnderItsRoot() {
        #expect(resolve("/_files/a.txt") == file(0, "a.txt"))
        #expect(resolve("/_files/ab/cd/key") == file(0, "ab/cd/key"))
        #expect(resolve("/private/x.pdf") == file(2, "x.pdf"))
        // The longest location wins, as nginx's prefix locations.
        #expect(resolve("/_files/exports/e.csv") == file(1, "e.csv"))
        #expect(resolve("/_files/exportsx/e.csv") == file(0, "exportsx/e.csv"))
    }

    @Test func escapesAreDecodedOnceAndTheQueryAndSpacesAroundAreIgnored() {
        #expect(resolve("/_files/my%20file.txt") == file(0, "my file.txt"))
        #expect(resolve("/_files/caf%C3%A9.txt") == file(0, "café.txt"))
        // Rack escapes `%` itself: `%2541` is the name `%41`, not `A`.
        #expect(resolve("/_files/%2541") == file(0, "%41"))
        #expect(resolve("/_files/a.txt?disposition=inline") == file(0, "a.txt"))
        #expect(resolve(" /_files/a.txt ") == file(0, "a.txt"))
        // An escaped letter of the location still spells it; an escaped `/` never does.
        #expect(resolve("/%5Ffiles/a.txt") == file(0, "a.txt"))
        #expect(resolve("/_files%2Fa.txt") == .unmapped)
    }

    @Test(arguments: [
        "/_files", "/_files/", "/_files/sub/", "/_files//a.txt", "/_files/../etc/passwd", "/_files/a/../../etc/passwd",
        "/_files/%2e%2e/etc/passwd", "/_files/%2E%2E/x", "/_files/.env", "/_files/sub/.git/config", "/_files/./a.txt",
        "/_files/a%2Fb", "/_files/a%00b", "/_files/a%zz", "/_files/a%2",
    ])
    func aPathTheRootMayNotServeIsRefused(value: String) {
        #expect(resolve(value) == .refused)
    }

    @Test(arguments: [
        "/etc/passwd", "/files/a.txt", "/_filesx/a.txt", "/_FILES/a.txt", "@files", "_files/a.txt", "", "?x=1",
        "//_files/a.txt", "http://app/_files/a.txt", "/",
    ])
    func aURIUnderNoLocationIsUnmapped(value: String) {
        #expect(resolve(value) == .unmapped)
    }

    // MARK: The app's fields

    @Test func theFieldsNginxKeepsAreKeptAndNoOthers() {
        func kind(_ name: String) -> AccelKeptField? {
            let bytes = Array(name.utf8)
            return bytes.withUnsafeBytes { AccelKeptField.of($0, ByteRange(start: 0, count: bytes.count)) }
        }
        #expect(kind("Content-Type") == .contentType && kind("content-type") == .contentType)
        #expect(kind("Content-Disposition") == .representation)
        for name in ["Cache-Control", "EXPIRES", "Set-Cookie"] { #expect(kind(name) == .always, "\(name)") }
        for name in ["Content-Length", "Transfer-Encoding", "ETag", "Last-Modified", "X-Accel-Redirect", "Vary",
                     "Content-Encoding", "Content-Range", "Accept-Ranges", "Location", "Set_Cookie", "Content-Typo"] {
            #expect(kind(name) == nil, "\(name)")
        }
    }

    // MARK: What steers Rack::Sendfile

    @Test func theMappingIsRacksListOfRootAndLocationPairs() {
        var s = AccelRedirectSettings()
        s.locations = [.init(prefix: Self.locations[0], root: "/srv/app/storage"),
                       .init(prefix: Self.locations[1], root: "/srv/exports/")]
        #expect(s.mappingFields == "X-Sendfile-Type: X-Accel-Redirect\r\n"
                + "X-Accel-Mapping: /srv/app/storage/=/_files/, /srv/exports/=/_files/exports/\r\n")
    }

    @Test func aLocationOrRootTheMappingCannotCarryIsAProblem() throws {
        #expect(AccelRedirectSettings.problem(location: PathPrefix(bytes: [UInt8(ascii: "/")]))?.contains("every path") == true)
        #expect(AccelRedirectSettings.problem(location: PathPrefix(bytes: Array("/a,b".utf8))) != nil)
        #expect(AccelRedirectSettings.problem(location: Self.locations[0]) == nil)
        #expect(AccelRedirectSettings.problem(root: "/tmp/a,b")?.contains("X-Accel-Mapping") == true)
        #expect(AccelRedirectSettings.problem(root: "/tmp/a=b")?.contains("X-Accel-Mapping") == true)
        #expect(AccelRedirectSettings.problem(root: "/tmp/a b")?.contains("X-Accel-Mapping") == true)
        for root in ["/srv/app(1)", "/srv/a+b", "/srv/a*", "/srv/[x]", "/srv/a|b", "/srv/$HOME"] {
            #expect(AccelRedirectSettings.problem(root: root)?.contains("regular expression") == true, "\(root)")
        }
        #expect(AccelRedirectSettings.problem(root: "storage")?.contains("absolute") == true)
        #expect(AccelRedirectSettings.problem(root: "/tmp") == nil)
    }

    // MARK: Through an exchange

    struct PassThrough: HTTPPhases {}

    /// A root with one file, and the exchange configured for it.
    func exchange(_ body: (EmbeddedExchange, String) throws -> Void) throws {
        var template = Array("/tmp/accel-test.XXXXXX".utf8CString)
        let root = String(cString: try #require(mkdtemp(&template)))
        let fd = open(root + "/a.txt", O_CREAT | O_WRONLY, 0o644)
        _ = write(fd, "file a\n", 7)
        close(fd)
        defer { unlink(root + "/a.txt"); rmdir(root) }
        var config = ProxyConfig()
        config.accelRedirect.locations = [.init(prefix: Self.locations[0], root: root)]
        try body(try EmbeddedExchange(phases: PassThrough(), config: config), root)
    }

    @Test func theAppsAnswerIsReplacedByTheFileAndTheMappingWentUp() throws {
        try exchange { x, root in
            x.send("GET /download HTTP/1.1\r\nHost: a\r\nX-Accel-Mapping: /=/_files/\r\nX_Sendfile_Type: X-Sendfile\r\n\r\n")
            let request = try #require(x.upstreamRequest())
            #expect(request.contains("\r\nX-Sendfile-Type: X-Accel-Redirect\r\nX-Accel-Mapping: \(root)/=/_files/\r\n"))
            #expect(request.components(separatedBy: "X-Accel-Mapping:").count == 2)
            #expect(!request.contains("X_Sendfile_Type") && !request.contains("X-Sendfile\r\n"))
            #expect(x.upstreamResponds("HTTP/1.1 200 OK\r\nX-Accel-Redirect: /_files/a.txt\r\nContent-Length: 0\r\n"
                                       + "ETag: \"app\"\r\nContent-Disposition: attachment\r\nX-Other: 1\r\n\r\n"))
            let answer = x.receive()
            #expect(answer.hasPrefix("HTTP/1.1 200 OK\r\n"))
            #expect(answer.hasSuffix("\r\n\r\nfile a\n"))
            #expect(answer.contains("\r\nContent-Length: 7\r\n"))
            #expect(answer.contains("\r\nContent-Type: text/plain; charset=utf-8\r\n"))
            #expect(answer.contains("\r\nContent-Disposition: attachment\r\n"))
            #expect(!answer.contains("X-Accel-Redirect") && !answer.contains("X-Other") && !answer.contains("\"app\""))
        }
    }

    @Test func aMissingFileIsA404AndAnUnmappedURIA502() throws {
        try exchange { x, _ in
            x.send("GET /download HTTP/1.1\r\nHost: a\r\n\r\n")
            _ = try #require(x.upstreamRequest())
            #expect(x.upstreamResponds("HTTP/1.1 200 OK\r\nX-Accel-Redirect: /_files/b.txt\r\nContent-Length: 0\r\n\r\n"))
            let answer = x.receive()
            #expect(answer.hasPrefix("HTTP/1.1 404 "))
            #expect(!answer.contains("X-Accel-Redirect"))
        }
        try exchange { x, _ in
            x.send("GET /download HTTP/1.1\r\nHost: a\r\n\r\n")
            _ = try #require(x.upstreamRequest())
            #expect(x.upstreamResponds("HTTP/1.1 200 OK\r\nX-Accel-Redirect: /srv/app/a.txt\r\nContent-Length: 0\r\n\r\n"))
            #expect(x.receive().hasPrefix("HTTP/1.1 502 "))
        }
    }

    @Test func aClientAskingForTheLocationGetsA404AndTheAppNothing() throws {
        try exchange { x, _ in
            x.send("GET /_files%2Fa.txt HTTP/1.1\r\nHost: a\r\n\r\n")
            #expect(!x.proxied)
            #expect(x.receive().hasPrefix("HTTP/1.1 404 "))
            #expect(x.upstreamRequest(seconds: 0.2) == nil)
        }
    }
}
