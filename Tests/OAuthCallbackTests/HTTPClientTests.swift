import Foundation
import ProxyCore
import Synchronization
import Testing
@testable import OAuthCallback
#if canImport(Glibc)
import Glibc
#endif

// The outbound client against a real loopback HTTPS server (Fixtures/https_server.py) with a
// throwaway CA, on a real event loop thread. Serialized: one test changes the process
// environment (proxy variables), and the timing tests should not compete for the 2 cores.
@Suite(.serialized, .timeLimit(.minutes(1)))
struct HTTPClientTests {
    private let server: HTTPSFixture

    init() throws {
        server = try HTTPSFixture.shared.get()
    }

    // MARK: Success

    @Test func getJSONWithTheTestCASucceeds() async throws {
        let env = try ClientLoop(CurlClient(caFile: server.caFile))
        defer { env.shutdown() }
        let outcome = await env.fetch(OutboundRequest(url: server.url("/json")))
        let response = try outcome.result.get()
        #expect(response.status == 200)
        #expect(response.header("content-type") == "application/json")
        let json = try #require(JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any])
        #expect(json["ok"] as? Bool == true)
        #expect(json["method"] as? String == "GET")
        #expect(outcome.onLoopThread)
    }

    @Test func formPostArrivesByteExactWithItsHeaders() async throws {
        let env = try ClientLoop(CurlClient(caFile: server.caFile))
        defer { env.shutdown() }
        let fields = [("grant_type", "authorization_code"), ("code", "4/0Ab&c=d e+f%é"),
                      ("redirect_uri", "com.example.app:/oauth2redirect"), ("code_verifier", String(repeating: "v", count: 2000))]
        let request = OutboundRequest.form(url: server.url("/echo"), fields: fields, headers: [("X-Request-Id", "r-1")])
        let outcome = await env.fetch(request)
        let echo = try Echo(outcome.result.get())
        #expect(echo.method == "POST")
        #expect(echo.body == Array(FormEncoding.encode(fields).utf8))
        #expect(echo.header("Content-Type") == ["application/x-www-form-urlencoded"])
        #expect(echo.header("Accept") == ["application/json"])
        #expect(echo.header("Content-Length") == ["\(echo.body.count)"])
        #expect(echo.header("User-Agent") == ["callback-proxy"])
        #expect(echo.header("X-Request-Id") == ["r-1"])
        // A body over 1 KiB would otherwise make libcurl wait for `100 Continue`.
        #expect(echo.header("Expect") == [])
        #expect(echo.header("Transfer-Encoding") == [])
        #expect(outcome.onLoopThread)
    }

    @Test func binaryBodyWithNULBytesIsSentWholeWithItsMethod() async throws {
        let env = try ClientLoop(CurlClient(caFile: server.caFile, userAgent: "idp-client/1"))
        defer { env.shutdown() }
        let body: [UInt8] = [0, 1, 0, 255, 13, 10, 0] + Array("tail".utf8)
        let outcome = await env.fetch(OutboundRequest(method: "PUT", url: server.url("/echo"),
                                                      headers: [("Content-Type", "application/octet-stream")], body: body))
        let echo = try Echo(outcome.result.get())
        #expect(echo.method == "PUT")
        #expect(echo.body == body)
        #expect(echo.header("User-Agent") == ["idp-client/1"])
    }

    @Test func errorStatusIsAResponseNotAFailure() async throws {
        let env = try ClientLoop(CurlClient(caFile: server.caFile))
        defer { env.shutdown() }
        let response = try await env.fetch(OutboundRequest(url: server.url("/status/503"))).result.get()
        #expect(response.status == 503)
    }

    // MARK: Failures and their kinds

    @Test func serverCertificateFromAnotherCAFailsAsACertificateProblem() async throws {
        let env = try ClientLoop(CurlClient(caFile: server.otherCAFile))
        defer { env.shutdown() }
        let error = try #require(await env.fetch(OutboundRequest(url: server.url("/json"))).result.failureValue)
        #expect(error.kind == .certificate, "\(error)")
    }

    @Test func withoutACAFileTheSystemStoreDoesNotTrustTheTestCA() async throws {
        let env = try ClientLoop(CurlClient())
        defer { env.shutdown() }
        let error = try #require(await env.fetch(OutboundRequest(url: server.url("/json"))).result.failureValue)
        #expect(error.kind == .certificate, "\(error)")
    }

    @Test func refusedConnectionFailsWithConnect() async throws {
        let env = try ClientLoop(CurlClient(caFile: server.caFile))
        defer { env.shutdown() }
        let port = try unusedPort()
        let outcome = await env.fetch(OutboundRequest(url: "https://127.0.0.1:\(port)/token?code=SECRET"))
        let error = try #require(outcome.result.failureValue)
        #expect(error.kind == .connect, "\(error)")
        #expect(!error.detail.contains("SECRET"))
        #expect(outcome.onLoopThread)
    }

    @Test func slowResponseFailsWithTimeoutWhenItsTimeIsUp() async throws {
        let env = try ClientLoop(CurlClient(caFile: server.caFile))
        defer { env.shutdown() }
        let outcome = await env.fetch(OutboundRequest(url: server.url("/slow?ms=3000"), timeout: 500_000_000))
        let error = try #require(outcome.result.failureValue)
        #expect(error.kind == .timeout, "\(error)")
        #expect(outcome.elapsed >= 0.45 && outcome.elapsed < 1.0, "took \(outcome.elapsed) s")
    }

    @Test(arguments: [false, true])
    func bodyOverTheCapFailsWithProtocolError(chunked: Bool) async throws {
        let env = try ClientLoop(CurlClient(caFile: server.caFile, maxResponseBytes: 4096))
        defer { env.shutdown() }
        let mode = chunked ? "&chunked=1" : ""
        let atCap = try await env.fetch(OutboundRequest(url: server.url("/big?n=4096\(mode)"))).result.get()
        #expect(atCap.body.count == 4096)
        let error = try #require(await env.fetch(OutboundRequest(url: server.url("/big?n=4097\(mode)"))).result.failureValue)
        #expect(error.kind == .protocolError, "\(error)")
    }

    @Test func invalidHeaderIsRefusedBeforeAnythingIsSent() async throws {
        let env = try ClientLoop(CurlClient(caFile: server.caFile))
        defer { env.shutdown() }
        let request = OutboundRequest(url: server.url("/echo"), headers: [("X-Injected", "a\r\nEvil: 1")])
        let outcome = await env.fetch(request)
        #expect(outcome.result.failureValue?.kind == .internalError)
        #expect(outcome.onLoopThread)
    }

    // MARK: Connections and concurrency

    @Test func sequentialRequestsReuseOneConnection() async throws {
        let env = try ClientLoop(CurlClient(caFile: server.caFile))
        defer { env.shutdown() }
        var connections: Set<Int> = []
        for _ in 0..<10 {
            let response = try await env.fetch(OutboundRequest(url: server.url("/count"))).result.get()
            let json = try #require(JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any])
            connections.insert(try #require(json["connection"] as? Int))
        }
        #expect(connections.count == 1, "connections used: \(connections)")
    }

    @Test func fiftyConcurrentRequestsCompleteWhileTheLoopStaysResponsive() async throws {
        let env = try ClientLoop(CurlClient(caFile: server.caFile))
        defer { env.shutdown() }
        let timer = TimerProbe()
        let loop = env.loop
        let start = Date()
        // Due 500 ms in, while every request waits on the server's 1.5 s sleep. A client that
        // blocked its loop for one request would hold the timer back by a second or more; the
        // allowance covers 50 TLS handshakes done on the loop on a busy 2-core machine.
        loop.execute {
            timer.scheduledAt.store(loop.nowNanoseconds + 500_000_000, ordering: .relaxed)
            loop.scheduleTimer(after: 500_000_000) {
                timer.firedAt.store(EventLoop.monotonicNow(), ordering: .relaxed)
            }
        }
        let url = server.url("/slow?ms=1500")
        let outcomes = await withTaskGroup(of: Outcome.self) { group in
            for _ in 0..<50 {
                group.addTask { await env.fetch(OutboundRequest(url: url)) }
            }
            return await group.reduce(into: []) { $0.append($1) }
        }
        let elapsed = Date().timeIntervalSince(start)
        #expect(outcomes.count == 50)
        let succeeded = outcomes.filter { $0.result.successValue?.status == 200 }.count
        #expect(succeeded == 50, "\(outcomes.compactMap { $0.result.failureValue })")
        let onLoop = outcomes.filter(\.onLoopThread).count
        #expect(onLoop == 50)
        // One after the other would take 75 s.
        #expect(elapsed < 5, "took \(elapsed) s")
        let fired = timer.firedAt.load(ordering: .relaxed)
        let due = timer.scheduledAt.load(ordering: .relaxed)
        #expect(fired != 0)
        let lateMS = (Double(fired) - Double(due)) / 1e6
        #expect(lateMS < 400, "timer fired \(lateMS) ms late")
    }

    // MARK: Retries

    @Test func nonIdempotentPostIsSentExactlyOnceEvenWithAnIdleConnectionAround() async throws {
        let env = try ClientLoop(CurlClient(caFile: server.caFile))
        defer { env.shutdown() }
        // Leaves a kept-alive connection in the cache: libcurl would re-send a request whose
        // reused connection dies unanswered, so the POST must not ride on it.
        _ = try await env.fetch(OutboundRequest(url: server.url("/json"))).result.get()
        let path = "/close-before-response/once-\(UUID().uuidString)"
        let request = OutboundRequest.form(url: server.url(path), fields: [("code", "abc")])
        #expect(!request.idempotent)
        let error = try #require(await env.fetch(request).result.failureValue)
        #expect(error.kind == .protocolError, "\(error)")
        #expect(try server.timesRequested(path) == 1)
    }

    @Test func idempotentRequestThatGotNoAnswerIsRetriedOnce() async throws {
        let env = try ClientLoop(CurlClient(caFile: server.caFile))
        defer { env.shutdown() }
        let path = "/close-before-response/twice-\(UUID().uuidString)"
        let request = OutboundRequest(method: "POST", url: server.url(path), body: Array("a=b".utf8), idempotent: true)
        let error = try #require(await env.fetch(request).result.failureValue)
        #expect(error.kind == .protocolError, "\(error)")
        #expect(error.detail.contains("retry"), "\(error)")
        #expect(try server.timesRequested(path) == 2)
    }

    // MARK: Loop thread and environment

    @Test func completionsRunOnTheLoopThreadAndNeverBeforeFetchReturns() async throws {
        let env = try ClientLoop(CurlClient(caFile: server.caFile))
        defer { env.shutdown() }
        let port = try unusedPort()
        let requests = [
            OutboundRequest(url: server.url("/json")),
            OutboundRequest(url: server.url("/status/404")),
            OutboundRequest(url: "https://127.0.0.1:\(port)/"),
            OutboundRequest(url: server.url("/json"), headers: [("Bad Name", "x")]),
            OutboundRequest(url: "ftp://127.0.0.1/"),
        ]
        for request in requests {
            let (onLoop, afterReturn, result) = await withCheckedContinuation { continuation in
                let client = env.client
                let loop = env.loop
                let probe = env
                // Issued from the loop thread itself: a completion run inside fetch would see
                // `returned == false`.
                loop.execute {
                    let returned = ReturnFlag()
                    client.fetch(request, on: loop) { result in
                        continuation.resume(returning: (probe.isLoopThread(), returned.value, result))
                    }
                    returned.value = true
                }
            }
            #expect(onLoop, "\(request.url)")
            #expect(afterReturn, "\(request.url)")
            if request.url.hasPrefix("ftp:") { #expect(result.failureValue?.kind == .protocolError) }
        }
    }

    @Test func proxyEnvironmentIsHonouredAndNoProxyBypassesIt() async throws {
        let env = try ClientLoop(CurlClient(caFile: server.caFile))
        defer { env.shutdown() }
        let proxyPort = try unusedPort()
        let names = ["https_proxy", "HTTPS_PROXY", "no_proxy", "NO_PROXY"]
        let saved = names.map { name in (name, getenv(name).map { String(cString: $0) }) }
        defer {
            for (name, value) in saved {
                if let value { setenv(name, value, 1) } else { unsetenv(name) }
            }
        }
        unsetenv("HTTPS_PROXY")
        unsetenv("NO_PROXY")
        setenv("https_proxy", "http://127.0.0.1:\(proxyPort)", 1)
        setenv("no_proxy", "127.0.0.1", 1)
        // Same server, two names: the IP is exempt, `localhost` must go through the (dead) proxy.
        let direct = try await env.fetch(OutboundRequest(url: server.url("/json"))).result.get()
        #expect(direct.status == 200)
        let viaProxy = try #require(await env.fetch(OutboundRequest(url: "https://localhost:\(server.port)/json")).result.failureValue)
        #expect(viaProxy.kind == .connect, "\(viaProxy)")
        #expect(viaProxy.detail.contains("\(proxyPort)"), "\(viaProxy)")
    }
}

// MARK: - Harness

/// What one fetch produced, and where and when.
private struct Outcome: Sendable {
    var result: Result<OutboundResponse, OutboundError>
    var onLoopThread: Bool
    var elapsed: Double
}

private extension Result {
    var failureValue: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }

    var successValue: Success? {
        if case .success(let value) = self { return value }
        return nil
    }
}

/// A client and an event loop on its own thread; knows that thread's id (captured in setup).
private final class ClientLoop: Sendable {
    let client: CurlClient
    let thread: EventLoopThread
    private let loopThreadID = Atomic<UInt>(0)

    var loop: EventLoop { thread.loop }

    init(_ client: CurlClient) throws {
        self.client = client
        let box = LoopThreadIDBox()
        thread = try EventLoopThread(setup: { _ in box.id.store(UInt(pthread_self()), ordering: .releasing) })
        while box.id.load(ordering: .acquiring) == 0 { usleep(1_000) }
        loopThreadID.store(box.id.load(ordering: .acquiring), ordering: .relaxed)
    }

    func isLoopThread() -> Bool {
        pthread_equal(pthread_t(loopThreadID.load(ordering: .relaxed)), pthread_self()) != 0
    }

    func fetch(_ request: OutboundRequest) async -> Outcome {
        let start = EventLoop.monotonicNow()
        return await withCheckedContinuation { continuation in
            client.fetch(request, on: loop) { result in
                let elapsed = Double(EventLoop.monotonicNow() - start) / 1e9
                continuation.resume(returning: Outcome(result: result, onLoopThread: self.isLoopThread(), elapsed: elapsed))
            }
        }
    }

    /// The client's close runs on the loop before the loop's stop (tasks run in order).
    func shutdown() {
        client.close()
        thread.stop()
        thread.join()
    }
}

private final class LoopThreadIDBox: Sendable {
    let id = Atomic<UInt>(0)
}

private final class TimerProbe: Sendable {
    let scheduledAt = Atomic<UInt64>(0)
    let firedAt = Atomic<UInt64>(0)
}

/// Set on the loop thread and read there: no synchronisation needed.
private final class ReturnFlag: @unchecked Sendable {
    var value = false
}

/// The `/echo` route's view of the request.
private struct Echo {
    var method: String
    var headers: [(String, String)]
    var body: [UInt8]

    init(_ response: OutboundResponse) throws {
        let json = try #require(JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any])
        method = try #require(json["method"] as? String)
        let pairs = try #require(json["headers"] as? [[String]])
        headers = pairs.map { ($0[0], $0[1]) }
        let encoded = try #require(json["body"] as? String)
        body = Array(try #require(Data(base64Encoded: encoded)))
    }

    func header(_ name: String) -> [String] {
        headers.filter { $0.0.lowercased() == name.lowercased() }.map(\.1)
    }
}

/// A loopback port nothing listens on (bound, then released).
private func unusedPort() throws -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw FixtureError("socket failed") }
    defer { close(fd) }
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
    addr.sin_port = 0
    var len = socklen_t(MemoryLayout<sockaddr_in>.size)
    let ok = withUnsafeMutablePointer(to: &addr) { p in
        p.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa in
            bind(fd, sa, len) == 0 && getsockname(fd, sa, &len) == 0
        }
    }
    guard ok else { throw FixtureError("bind failed") }
    return Int(UInt16(bigEndian: addr.sin_port))
}

private struct FixtureError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// A throwaway CA, a server certificate for 127.0.0.1/localhost signed by it, an unrelated
/// second CA, and the loopback HTTPS server using them. Made once per test process; the
/// server exits when this process does (it watches its stdin).
private final class HTTPSFixture: @unchecked Sendable {
    static let shared = Result { try HTTPSFixture() }

    let caFile: String
    let otherCAFile: String
    let port: Int
    // Kept for the lifetime of the process: closing our end of stdin stops the server.
    private let process: Process
    private let stdin: Pipe

    private init() throws {
        let dir = FileManager.default.temporaryDirectory
            .appendingPathComponent("curl-client-tests-\(getpid())-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        func path(_ name: String) -> String { "\(dir)/\(name)" }
        try Self.makeCA(path("ca"))
        try Self.makeCA(path("other-ca"))
        try Self.openssl(["req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                          "-keyout", path("server.key"), "-out", path("server.csr"), "-subj", "/CN=127.0.0.1"])
        try "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n"
            .write(toFile: path("server.ext"), atomically: true, encoding: .utf8)
        try Self.openssl(["x509", "-req", "-in", path("server.csr"), "-CA", path("ca.pem"), "-CAkey", path("ca.key"),
                          "-CAcreateserial", "-days", "2", "-extfile", path("server.ext"), "-out", path("server.pem")])
        caFile = path("ca.pem")
        otherCAFile = path("other-ca.pem")

        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("Fixtures/https_server.py").path
        process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", script, path("server.pem"), path("server.key")]
        stdin = Pipe()
        let stdout = Pipe()
        process.standardInput = stdin
        process.standardOutput = stdout
        try process.run()
        var line = Data()
        while !line.contains(UInt8(ascii: "\n")) {
            let chunk = stdout.fileHandleForReading.availableData
            guard !chunk.isEmpty else { throw FixtureError("https_server.py exited before printing its port") }
            line.append(chunk)
        }
        guard let port = Int(String(decoding: line, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)) else {
            throw FixtureError("https_server.py printed no port")
        }
        self.port = port
    }

    func url(_ pathAndQuery: String) -> String { "https://127.0.0.1:\(port)\(pathAndQuery)" }

    /// How often the server saw `path`, asked with a blocking request of its own (not the
    /// client under test).
    func timesRequested(_ path: String) throws -> Int {
        let output = try Self.run("/usr/bin/env", ["curl", "-sS", "--cacert", caFile, url("/stats")])
        let stats = try #require(JSONSerialization.jsonObject(with: output) as? [String: Int])
        return stats[path] ?? 0
    }

    private static func makeCA(_ base: String) throws {
        try openssl(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                     "-keyout", "\(base).key", "-out", "\(base).pem", "-days", "2", "-subj", "/CN=CallbackProxy test CA \(UUID().uuidString)",
                     "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign"])
    }

    private static func openssl(_ arguments: [String]) throws {
        _ = try run("/usr/bin/env", ["openssl"] + arguments)
    }

    @discardableResult
    private static func run(_ executable: String, _ arguments: [String]) throws -> Data {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let stdout = Pipe()
        process.standardOutput = stdout
        process.standardError = FileHandle.nullDevice
        try process.run()
        let data = stdout.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw FixtureError("\(arguments.first ?? executable) exited with \(process.terminationStatus)")
        }
        return data
    }
}
