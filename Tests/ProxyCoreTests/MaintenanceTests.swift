import Foundation
import Testing
@testable import ProxyCore

/// The maintenance page: the file watched with a `stat` a second at most, then answered
/// through a real exchange with no client socket.
@Suite struct MaintenanceTests {
    static let second = Timeouts.second

    final class Scratch {
        let directory: String
        var file: String { directory + "/maintenance.html" }
        init() {
            var template = Array("/tmp/maintenance-test.XXXXXX".utf8CString)
            directory = String(cString: mkdtemp(&template)!)
        }
        deinit {
            unlink(file)
            rmdir(directory)
        }
        func write(_ text: String) { #expect(FileManager.default.createFile(atPath: file, contents: Data(text.utf8))) }
        func remove() { unlink(file) }
    }

    static func watch(_ path: String) -> MaintenanceWatch {
        MaintenanceWatch(path: path, shared: MaintenanceSwitch(log: Logger(level: .error), gauge: Gauge()))
    }

    @Test func theFileIsLookedAtAtMostOnceASecondAndReadWhenItChanges() {
        let scratch = Scratch()
        let w = Self.watch(scratch.file)
        #expect(w.current(now: 10 * Self.second) == nil)
        scratch.write("<h1>Back soon</h1>")
        // Within the second after a look, no new look: nothing per request.
        #expect(w.current(now: 10 * Self.second + Self.second / 2) == nil)
        #expect(w.current(now: 11 * Self.second) == Array("<h1>Back soon</h1>".utf8))
        scratch.write("<h1>Back at noon, longer</h1>")
        #expect(w.current(now: 12 * Self.second) == Array("<h1>Back at noon, longer</h1>".utf8))
        scratch.remove()
        #expect(w.current(now: 13 * Self.second) == nil)
    }

    @Test func aFileTooLargeTurnsMaintenanceOnWithTheProxysOwnPage() {
        let scratch = Scratch()
        scratch.write(String(repeating: "x", count: MaintenanceSettings.maxPageBytes + 1))
        let w = Self.watch(scratch.file)
        #expect(w.current(now: Self.second) == [])
    }

    @Test func aDirectoryNamedLikeTheFileIsNoMaintenance() {
        let scratch = Scratch()
        mkdir(scratch.file, 0o755)
        defer { rmdir(scratch.file) }
        #expect(Self.watch(scratch.file).current(now: Self.second) == nil)
    }

    // MARK: Through an exchange

    struct PassThrough: HTTPPhases {}

    static func exchange(_ scratch: Scratch, peer: String = "192.0.2.1") throws -> EmbeddedExchange {
        var c = ProxyConfig()
        c.maintenance.file = scratch.file
        c.maintenance.allowPaths = [try PathPrefix.parse("/up").get()]
        c.maintenance.allowClients = [CIDR.parse("10.0.0.0/8")!]
        c.maintenance.retryAfterSeconds = 120
        return try EmbeddedExchange(phases: PassThrough(), config: c, peer: peer)
    }

    @Test func aBrowserGetsThePageWithRetryAfterAndAnAPIClientAJSON503() throws {
        let scratch = Scratch()
        scratch.write("<h1>Back soon</h1>")
        let x = try Self.exchange(scratch)
        x.send("GET /users HTTP/1.1\r\nHost: a\r\nAccept: text/html\r\n\r\n")
        let page = x.receive()
        #expect(page.hasPrefix("HTTP/1.1 503 "))
        #expect(page.contains("\r\nRetry-After: 120\r\n") && page.contains("\r\nCache-Control: no-store\r\n"))
        #expect(page.hasSuffix("\r\n\r\n<h1>Back soon</h1>"))
        #expect(!x.proxied)
        x.send("GET /api/items HTTP/1.1\r\nHost: a\r\nAccept: application/json\r\n\r\n")
        let json = x.receive()
        #expect(json.hasPrefix("HTTP/1.1 503 ") && json.contains("\"status\":503") && json.contains("\r\nRetry-After: 120\r\n"))
        #expect(!json.contains("maintenance.file"), "a 5xx reason stays in the log")
    }

    @Test func aHeadRequestGetsTheHeadOnly() throws {
        let scratch = Scratch()
        scratch.write("<h1>Back soon</h1>")
        let x = try Self.exchange(scratch)
        x.send("HEAD / HTTP/1.1\r\nHost: a\r\nAccept: text/html\r\n\r\n")
        let head = x.receive()
        #expect(head.hasPrefix("HTTP/1.1 503 ") && head.hasSuffix("\r\n\r\n"))
    }

    @Test(arguments: [("/up", "192.0.2.1", true), ("/UP", "192.0.2.1", false), ("/users", "10.1.2.3", true),
                      ("/users", "192.0.2.1", false), ("/up/../users", "192.0.2.1", false)])
    func allowedPathsAndClientsAreServedAsUsual(path: String, peer: String, served: Bool) throws {
        let scratch = Scratch()
        scratch.write("<h1>Back soon</h1>")
        let x = try Self.exchange(scratch, peer: peer)
        x.send("GET \(path) HTTP/1.1\r\nHost: a\r\n\r\n")
        #expect(x.proxied == served, "\(path) from \(peer)")
    }

    @Test func withoutTheFileEverythingIsServed() throws {
        let scratch = Scratch()
        let x = try Self.exchange(scratch)
        x.send("GET /users HTTP/1.1\r\nHost: a\r\n\r\n")
        #expect(x.proxied)
    }
}
