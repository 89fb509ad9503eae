import Testing
import CProxyLinux
#if canImport(Glibc)
import Glibc
#endif
@testable import ProxyCore

/// Static files without sockets: which path names which file (`StaticPath`), what the kernel
/// lets `StaticFile.open` reach under a real directory (symlinks in and out, directories,
/// FIFOs), and every conditional, range and encoding rule (`StaticConditions`).
@Suite struct StaticFilesTests {
    // MARK: Paths

    func relative(_ path: String) -> String? {
        Array(path.utf8).withUnsafeBytes { StaticPath.relative($0) }.map { String(decoding: $0, as: UTF8.self) }
    }

    @Test func aPathNamesTheFileUnderTheRootWithoutItsLeadingSlash() {
        #expect(relative("/robots.txt") == "robots.txt")
        #expect(relative("/assets/application-3f2a.css") == "assets/application-3f2a.css")
        #expect(relative("/packs/js/app.js.map") == "packs/js/app.js.map")
        #expect(relative("/my%20file.png") == "my file.png")
        #expect(relative("/caf%C3%A9.txt") == "café.txt")
    }

    @Test(arguments: [
        "/", "", "assets/x.css", "/assets/", "/assets//x.css",
        "/.env", "/.git/config", "/assets/.hidden", "/.well-known/security.txt", "/a/./b", "/a/../b", "/..",
        "/%2Egit/config", "/a/%2e%2e/b", "/a%2Fb", "/a%00b", "/a%zzb", "/a%2",
    ])
    func directoriesDotfilesAndUnreadablePathsNameNoFile(path: String) {
        #expect(relative(path) == nil)
    }

    @Test func aPathLongerThanTheLimitNamesNoFile() {
        #expect(relative("/" + String(repeating: "a", count: StaticPath.maxLength)) == nil)
        #expect(relative("/" + String(repeating: "a", count: StaticPath.maxLength - 1)) != nil)
    }

    @Test func theContentTypeComesFromTheExtension() {
        func type(_ p: String) -> String { String(describing: StaticMediaType.of(Array(p.utf8))) }
        #expect(type("index.html") == "text/html; charset=utf-8")
        #expect(type("assets/APP.CSS") == "text/css; charset=utf-8")
        #expect(type("packs/app.mjs") == "text/javascript; charset=utf-8")
        #expect(type("app.js.map") == "application/json")
        #expect(type("fonts/x.woff2") == "font/woff2")
        #expect(type("favicon.ico") == "image/vnd.microsoft.icon")
        #expect(type("m.wasm") == "application/wasm")
        #expect(type("README") == "application/octet-stream")
        #expect(type("dir.d/README") == "application/octet-stream")
        #expect(type("x.exe") == "application/octet-stream")
        #expect(type("x.") == "application/octet-stream")
    }

    // MARK: Opening under a real root

    /// A root with a file, a directory, a FIFO, a symlink inside and two out of it.
    final class Tree {
        let base: String
        let root: String
        let fd: Int32
        init() {
            var template = Array("/tmp/static-tests-XXXXXX".utf8CString)
            base = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
            root = base + "/public"
            mkdir(root, 0o755)
            mkdir(root + "/assets", 0o755)
            Tree.write(root + "/assets/app.css", "body{}")
            Tree.write(base + "/secret.txt", "secret")
            mkfifo(root + "/fifo", 0o644)
            symlink("app.css", root + "/assets/inside.css")
            symlink("../secret.txt", root + "/out-relative.txt")
            symlink(base + "/secret.txt", root + "/out-absolute.txt")
            fd = CProxyLinux_open_directory(root)
        }
        deinit {
            close(fd)
            for p in ["/public/assets/app.css", "/public/assets/inside.css", "/public/out-relative.txt",
                      "/public/out-absolute.txt", "/public/fifo", "/secret.txt"] { unlink(base + p) }
            rmdir(root + "/assets"); rmdir(root); rmdir(base)
        }
        static func write(_ path: String, _ text: String) {
            let f = Glibc.open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
            _ = text.withCString { Glibc.write(f, $0, strlen($0)) }
            close(f)
        }
        func open(_ relative: String, beneath: Bool = true) -> StaticFile? {
            StaticFile.open(Array(relative.utf8), under: fd, beneath: beneath)
        }
    }

    @Test func aRegularFileOpensWithItsSize() throws {
        let t = Tree()
        let f = try #require(t.open("assets/app.css"))
        #expect(f.size == 6)
        #expect(f.fd >= 0)
        f.close()
        #expect(f.fd == -1)
        f.close()  // idempotent
    }

    @Test func missingFilesDirectoriesAndFIFOsAreNotOpened() {
        let t = Tree()
        #expect(t.open("assets/missing.css") == nil)
        #expect(t.open("assets") == nil)
        #expect(t.open("fifo") == nil)
        #expect(t.open("assets/app.css/x") == nil)
    }

    @Test func aSymlinkInsideTheRootIsFollowedOneOutOfItOnlyWhenAllowed() {
        let t = Tree()
        #expect(t.open("assets/inside.css")?.size == 6)
        #expect(t.open("out-relative.txt") == nil)
        #expect(t.open("out-absolute.txt") == nil)
        #expect(t.open("out-relative.txt", beneath: false)?.size == 6)
        #expect(t.open("out-absolute.txt", beneath: false)?.size == 6)
    }

    @Test func theRootIsCheckedForCheck() {
        let t = Tree()
        #expect(StaticSettings.problem(root: t.root) == nil)
        #expect(StaticSettings.problem(root: "public")?.contains("absolute") == true)
        #expect(StaticSettings.problem(root: t.root + "/assets/app.css")?.contains("is not a directory") == true)
        #expect(StaticSettings.problem(root: t.base + "/none")?.contains("cannot open") == true)
    }

    // MARK: Conditions and ranges

    static let etag = StaticConditions.etag(mtime: 0x5f5e100, size: 0x400)
    static let lastModified = Array("Sat, 03 Mar 1973 09:46:40 GMT".utf8)

    func answer(size: UInt64 = 1024, get: Bool = true, inm: String? = nil, ims: String? = nil, range: String? = nil,
                ifRange: String? = nil) -> StaticConditions.Answer {
        var f = StaticConditions.Fields()
        f.ifNoneMatch = inm.map { Array($0.utf8) }
        f.ifModifiedSince = ims.map { Array($0.utf8) }
        f.range = range.map { Array($0.utf8) }
        f.ifRange = ifRange.map { Array($0.utf8) }
        return StaticConditions.answer(size: size, etag: Self.etag, lastModified: Self.lastModified, isGet: get, f)
    }

    @Test func theETagIsNginxsMtimeAndSizeInHex() {
        #expect(String(decoding: Self.etag, as: UTF8.self) == "\"5f5e100-400\"")
    }

    @Test func ifNoneMatchAnswers304ForOurTagWeakOrStrongOrStar() {
        #expect(answer(inm: "\"5f5e100-400\"") == .notModified)
        #expect(answer(inm: "W/\"5f5e100-400\"") == .notModified)
        #expect(answer(inm: "\"other\", \"5f5e100-400\"") == .notModified)
        #expect(answer(inm: "*") == .notModified)
        #expect(answer(get: false, inm: "*") == .notModified)
        #expect(answer(inm: "\"other\"") == .whole)
        #expect(answer(inm: "\"5f5e100-401\"") == .whole)
    }

    @Test func ifModifiedSinceAnswers304OnlyForOurDateAndNotBesideIfNoneMatch() {
        #expect(answer(ims: "Sat, 03 Mar 1973 09:46:40 GMT") == .notModified)
        #expect(answer(ims: "Sat, 03 Mar 1973 09:46:41 GMT") == .whole)
        #expect(answer(ims: "yesterday") == .whole)
        // If-None-Match present and not matching: the date is not read (RFC 9110 §13.2.2).
        #expect(answer(inm: "\"other\"", ims: "Sat, 03 Mar 1973 09:46:40 GMT") == .whole)
    }

    @Test(arguments: [
        ("bytes=0-99", StaticConditions.Answer.part(first: 0, last: 99)),
        ("bytes=100-", .part(first: 100, last: 1023)),
        ("bytes=-100", .part(first: 924, last: 1023)),
        ("bytes=-5000", .part(first: 0, last: 1023)),
        ("bytes=1000-5000", .part(first: 1000, last: 1023)),
        ("bytes=1023-1023", .part(first: 1023, last: 1023)),
        ("BYTES= 5-9 ", .part(first: 5, last: 9)),
        ("bytes=1024-", .unsatisfiable),
        ("bytes=2000-3000", .unsatisfiable),
        ("bytes=-0", .unsatisfiable),
        ("bytes=0-1,5-9", .whole),
        ("bytes=9-5", .whole),
        ("bytes=a-b", .whole),
        ("items=0-9", .whole),
        ("bytes=", .whole),
        ("bytes=-", .whole),
        ("bytes=99999999999999999999-", .whole),
    ])
    func oneRangeIsAnsweredSeveralGetTheWholeFile(range: String, expected: StaticConditions.Answer) {
        #expect(answer(range: range) == expected)
    }

    @Test func aRangeOfAnEmptyFileIsUnsatisfiable() {
        #expect(answer(size: 0, range: "bytes=0-") == .unsatisfiable)
        #expect(answer(size: 0, range: "bytes=-10") == .unsatisfiable)
    }

    @Test func headAndConditionalRequestsIgnoreRange() {
        #expect(answer(get: false, range: "bytes=0-9") == .whole)
        #expect(answer(inm: "\"5f5e100-400\"", range: "bytes=0-9") == .notModified)
    }

    @Test func ifRangeHonoursTheRangeOnlyForOurStrongTagOrExactDate() {
        #expect(answer(range: "bytes=0-9", ifRange: "\"5f5e100-400\"") == .part(first: 0, last: 9))
        #expect(answer(range: "bytes=0-9", ifRange: "Sat, 03 Mar 1973 09:46:40 GMT") == .part(first: 0, last: 9))
        #expect(answer(range: "bytes=0-9", ifRange: "W/\"5f5e100-400\"") == .whole)
        #expect(answer(range: "bytes=0-9", ifRange: "\"old\"") == .whole)
    }

    // MARK: Precompressed siblings

    func codings(_ header: String?) -> [ContentCoding] {
        guard let header else { return StaticConditions.codings(accepting: nil) }
        return Array(header.utf8).withUnsafeBytes { StaticConditions.codings(accepting: $0) }
    }

    @Test func siblingsAreTriedInTheClientsOrderBrotliFirstOnTies() {
        #expect(codings(nil) == [])
        #expect(codings("gzip, deflate, br") == [.brotli, .gzip])
        #expect(codings("gzip") == [.gzip])
        #expect(codings("br") == [.brotli])
        #expect(codings("gzip;q=1, br;q=0.5") == [.gzip, .brotli])
        #expect(codings("br;q=0, gzip") == [.gzip])
        #expect(codings("identity") == [])
        #expect(codings("*") == [.brotli, .gzip])
        #expect(codings("*;q=0") == [])
    }
}
