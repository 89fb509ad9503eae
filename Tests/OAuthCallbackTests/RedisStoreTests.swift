import Foundation
import ProxyCore
import Synchronization
import Testing
@testable import OAuthCallback
#if canImport(Glibc)
import Glibc
#endif

// The Redis store against a real `redis-server` (Debian's) on a free loopback port, driven by
// a real event loop thread. Serialized: the timing tests (fail-fast, timeouts) should not
// compete for the 2 cores, and some tests kill and restart their server.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct RedisStoreTests {
    // MARK: Operations

    @Test func setIfAbsentIsTrueOnceThenFalseOnTheLoopAndNeverInsideTheCall() async throws {
        let redis = try RedisServer()
        defer { redis.stop() }
        let env = try StoreLoop(redis.store())
        defer { env.shutdown() }
        let first = await env.setIfAbsent("replay:a", [1, 2, 3], ttl: 60)
        let second = await env.setIfAbsent("replay:a", [9], ttl: 60)
        #expect(try first.value.get() == true)
        #expect(try second.value.get() == false)
        for outcome in [first, second] {
            #expect(outcome.onLoopThread)
            #expect(!outcome.insideCall)
        }
        // The first value and its TTL are left alone.
        #expect(try await env.get("replay:a").value.get() == [1, 2, 3])
        let ttl = Int(redis.cli("TTL", "cbp:replay:a").trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
        #expect(ttl > 50 && ttl <= 60)
    }

    @Test func entriesExpireAfterTheirTTL() async throws {
        let redis = try RedisServer()
        defer { redis.stop() }
        let env = try StoreLoop(redis.store())
        defer { env.shutdown() }
        #expect(try await env.setIfAbsent("state:x", Array("v".utf8), ttl: 1).value.get() == true)
        try await env.set("session:y", Array("s".utf8), ttl: 1).value.get()
        #expect(try await env.get("state:x").value.get() == Array("v".utf8))
        try await Task.sleep(for: .milliseconds(1_200))
        #expect(try await env.get("state:x").value.get() == nil)
        #expect(try await env.get("session:y").value.get() == nil)
        #expect(try await env.setIfAbsent("state:x", Array("w".utf8), ttl: 1).value.get() == true)
    }

    @Test func getAndDeleteReturnsTheValueOnceThenNil() async throws {
        let redis = try RedisServer()
        defer { redis.stop() }
        let env = try StoreLoop(redis.store())
        defer { env.shutdown() }
        try await env.set("relay:c", Array("payload".utf8), ttl: 60).value.get()
        let first = await env.getAndDelete("relay:c")
        #expect(try first.value.get() == Array("payload".utf8))
        #expect(first.onLoopThread && !first.insideCall)
        #expect(try await env.getAndDelete("relay:c").value.get() == nil)
        #expect(try await env.get("relay:c").value.get() == nil)
    }

    @Test func setReplacesAndDeleteReportsWhetherALiveEntryWasThere() async throws {
        let redis = try RedisServer()
        defer { redis.stop() }
        let env = try StoreLoop(redis.store())
        defer { env.shutdown() }
        try await env.set("session:s", [1], ttl: 60).value.get()
        try await env.set("session:s", [2], ttl: 60).value.get()
        #expect(try await env.get("session:s").value.get() == [2])
        #expect(try await env.delete("session:s").value.get() == true)
        #expect(try await env.delete("session:s").value.get() == false)
    }

    @Test func replaceChangesOnlyALiveEntry_andWithAnExpectedValueOnlyThatOne() async throws {
        let redis = try RedisServer()
        defer { redis.stop() }
        let env = try StoreLoop(redis.store())
        defer { env.shutdown() }
        // Never creates: a session deleted meanwhile stays deleted, with or without `expected`.
        #expect(try await env.replace("session:s", [1], ttl: 60, ifHolding: nil).value.get() == false)
        #expect(try await env.replace("session:s", [1], ttl: 60, ifHolding: [0]).value.get() == false)
        #expect(try await env.get("session:s").value.get() == nil)
        try await env.set("session:s", [1, 0, 2], ttl: 60).value.get()
        // Another value than expected (a record rewritten since it was read): left alone.
        #expect(try await env.replace("session:s", [9], ttl: 60, ifHolding: [1, 0, 3]).value.get() == false)
        #expect(try await env.replace("session:s", [9], ttl: 60, ifHolding: [1]).value.get() == false)
        #expect(try await env.get("session:s").value.get() == [1, 0, 2])
        // The expected bytes, NUL included: replaced, with the new TTL.
        let outcome = await env.replace("session:s", [3, 0], ttl: 30, ifHolding: [1, 0, 2])
        #expect(try outcome.value.get() == true)
        #expect(outcome.onLoopThread && !outcome.insideCall)
        #expect(try await env.get("session:s").value.get() == [3, 0])
        let ttl = Int(redis.cli("TTL", "cbp:session:s").trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
        #expect(ttl > 20 && ttl <= 30)
        #expect(try await env.replace("session:s", [4], ttl: 60, ifHolding: nil).value.get() == true)
        #expect(try await env.get("session:s").value.get() == [4])
    }

    @Test func binaryValuesWithNULBytesRoundTrip() async throws {
        let redis = try RedisServer()
        defer { redis.stop() }
        let env = try StoreLoop(redis.store())
        defer { env.shutdown() }
        let value: [UInt8] = [0, 0, 1, 255, 0, 13, 10, 0x24, 0x2A, 0] + (0...255).map { UInt8($0) }
        try await env.set("bin:a", value, ttl: 60).value.get()
        #expect(try await env.get("bin:a").value.get() == value)
        #expect(try await env.setIfAbsent("bin:b", value, ttl: 60).value.get() == true)
        #expect(try await env.getAndDelete("bin:b").value.get() == value)
        try await env.set("bin:empty", [], ttl: 60).value.get()
        #expect(try await env.get("bin:empty").value.get() == [])
    }

    @Test func theKeyPrefixIsApplied() async throws {
        let redis = try RedisServer()
        defer { redis.stop() }
        let env = try StoreLoop(redis.store())
        defer { env.shutdown() }
        try await env.set("replay:k1", [1], ttl: 60).value.get()
        let custom = try StoreLoop(redis.store(prefix: "tenant7:"))
        defer { custom.shutdown() }
        try await custom.set("replay:k1", [2], ttl: 60).value.get()
        let keys = Set(redis.cli("KEYS", "*").split(separator: "\n").map { String($0) })
        #expect(keys == ["cbp:replay:k1", "tenant7:replay:k1"])
        #expect(try await env.get("replay:k1").value.get() == [1])
        #expect(try await custom.get("replay:k1").value.get() == [2])
    }

    @Test func invalidArgumentsFailWithoutReachingRedisAndNeverInsideTheCall() async throws {
        let redis = try RedisServer()
        defer { redis.stop() }
        let env = try StoreLoop(redis.store())
        defer { env.shutdown() }
        let empty = await env.get("")
        #expect(empty.value.redisFailure == .invalidArgument)
        #expect(!empty.insideCall && empty.onLoopThread)
        #expect(await env.set("k", [1], ttl: 0).value.redisFailure == .invalidArgument)
        #expect(await env.setIfAbsent(String(repeating: "k", count: 513), [1], ttl: 5).value.redisFailure == .invalidArgument)
    }

    // MARK: AUTH and SELECT

    @Test func authenticatesWithAPasswordAndSelectsTheDatabase() async throws {
        let redis = try RedisServer(password: "s3cr3t-pw")
        defer { redis.stop() }
        let env = try StoreLoop(redis.store(password: "s3cr3t-pw", database: 3))
        defer { env.shutdown() }
        #expect(try await env.setIfAbsent("replay:p", [7], ttl: 60).value.get() == true)
        #expect(redis.cli("-n", "3", "EXISTS", "cbp:replay:p").hasPrefix("1"))
        #expect(redis.cli("-n", "0", "EXISTS", "cbp:replay:p").hasPrefix("0"))
    }

    @Test func authenticatesAsAnACLUser() async throws {
        let redis = try RedisServer(password: "admin-pw")
        defer { redis.stop() }
        // Exactly the commands docs/operations.md lists for an ACL user (one server).
        #expect(redis.cli("ACL", "SETUSER", "proxy", "on", ">proxy-pw", "~cbp:*",
                          "+get", "+set", "+getdel", "+del", "+eval", "+select").hasPrefix("OK"))
        let env = try StoreLoop(redis.store(username: "proxy", password: "proxy-pw"))
        defer { env.shutdown() }
        #expect(try await env.setIfAbsent("replay:u", [1], ttl: 60).value.get() == true)
        #expect(try await env.replace("replay:u", [2], ttl: 60, ifHolding: [1]).value.get() == true)
        #expect(try await env.replace("replay:u", [3], ttl: 60, ifHolding: nil).value.get() == true)
        #expect(try await env.get("replay:u").value.get() == [3])
        #expect(try await env.getAndDelete("replay:u").value.get() == [3])
        #expect(try await env.delete("replay:u").value.get() == false)
        // The ACL user's key pattern holds: outside the prefix it is refused (fail closed).
        let other = try StoreLoop(redis.store(username: "proxy", password: "proxy-pw", prefix: "other:"))
        defer { other.shutdown() }
        #expect(await other.get("x").value.redisFailure == .unavailable)
    }

    @Test func aWrongPasswordFailsEveryOperationUnavailableWithoutLeakingIt() async throws {
        let redis = try RedisServer(password: "right-pw")
        defer { redis.stop() }
        let log = try LogCapture()
        let secret = "Wr0ng-Passw0rd-xyz"
        let env = try StoreLoop(redis.store(password: secret), logger: log.logger)
        defer { env.shutdown() }
        var errors: [StoreError] = []
        for _ in 0..<3 {
            let outcomes = [await env.setIfAbsent("a", [1], ttl: 5).value.map { _ in () },
                            await env.get("a").value.map { _ in () },
                            await env.getAndDelete("a").value.map { _ in () },
                            await env.set("a", [1], ttl: 5).value.map { _ in () },
                            await env.delete("a").value.map { _ in () }]
            for outcome in outcomes {
                guard case .failure(let error) = outcome else {
                    Issue.record("an operation succeeded with a wrong password")
                    continue
                }
                #expect(error.code == .unavailable)
                errors.append(error)
            }
            try await Task.sleep(for: .milliseconds(60))
        }
        let text = log.text() + errors.map(\.description).joined(separator: "\n")
        #expect(!text.isEmpty)
        #expect(!text.contains(secret))
        #expect(!text.contains("right-pw"))
        #expect(log.text().contains("redis store unavailable"))
    }

    // MARK: Failures

    @Test func redisKilledFailsFastThenServiceReturnsOnItsOwn() async throws {
        let redis = try RedisServer()
        defer { redis.stop() }
        let log = try LogCapture()
        let env = try StoreLoop(redis.store(), logger: log.logger)
        defer { env.shutdown() }
        #expect(try await env.setIfAbsent("k0", [0], ttl: 60).value.get() == true)

        redis.kill()
        // The in-flight connection notices the EOF; every call fails fast, none hangs.
        var worst = 0.0
        for i in 0..<20 {
            let outcome = await env.setIfAbsent("k\(i + 1)", [1], ttl: 60)
            #expect(outcome.value.redisFailure == .unavailable)
            #expect(!outcome.insideCall && outcome.onLoopThread)
            worst = max(worst, outcome.elapsed)
            try await Task.sleep(for: .milliseconds(25))
        }
        #expect(worst < 0.2, "slowest failure took \(worst) s")

        try redis.start()
        let back = EventLoop.monotonicNow()
        #expect(try await env.recovers())
        print("redis store: recovered \(Double(EventLoop.monotonicNow() - back) / 1e6) ms after restart; slowest fail-fast \(worst * 1e3) ms")
        #expect(log.text().contains("redis store unavailable"))
        #expect(log.text().contains("redis store reconnected"))
    }

    @Test func redisDownFromTheStartFailsUnavailableAtOnce() async throws {
        let port = RedisServer.freePort()
        let store = RedisStore(RedisStore.Configuration(RedisSpec(.single(RedisURL(host: "127.0.0.1", port: port)))))
        let env = try StoreLoop(store)
        defer { env.shutdown() }
        for _ in 0..<5 {
            let outcome = await env.get("k")
            #expect(outcome.value.redisFailure == .unavailable)
            #expect(outcome.elapsed < 0.2)
            #expect(!outcome.insideCall)
        }
    }

    @Test func aStalledRedisTimesOutAtTheConfiguredTimeoutThenRecovers() async throws {
        let redis = try RedisServer()
        defer { redis.stop() }
        let env = try StoreLoop(redis.store(timeoutMilliseconds: 300))
        defer { env.shutdown() }
        #expect(try await env.setIfAbsent("warm", [1], ttl: 60).value.get() == true)
        let sleeper = redis.cliInBackground("DEBUG", "SLEEP", "2")
        try await Task.sleep(for: .milliseconds(150))   // let the server start sleeping
        let outcome = await env.get("warm")
        #expect(outcome.value.redisFailure == .timeout)
        #expect(outcome.elapsed >= 0.29 && outcome.elapsed < 0.6, "timed out after \(outcome.elapsed) s")
        #expect(outcome.onLoopThread && !outcome.insideCall)
        sleeper.waitUntilExit()
        let back = EventLoop.monotonicNow()
        var recovered = false
        while EventLoop.monotonicNow() - back < 5_000_000_000 {
            if case .success(let v) = await env.get("warm").value, v == [1] {
                recovered = true
                break
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(recovered)
    }

    // MARK: Load

    @Test func aThousandConcurrentSetIfAbsentFromOneLoopComplete() async throws {
        let redis = try RedisServer()
        defer { redis.stop() }
        let env = try StoreLoop(redis.store())
        defer { env.shutdown() }
        let started = EventLoop.monotonicNow()
        let results = await env.batch(count: 1_000) { store, loop, i, done in
            // 900 distinct keys, and 100 calls racing for one key.
            let key = i < 900 ? "load:\(i)" : "load:contended"
            store.setIfAbsent(key: key, value: Array("v\(i)".utf8), ttlSeconds: 60, on: loop) { done($0) }
        }
        let elapsed = Double(EventLoop.monotonicNow() - started) / 1e9
        #expect(results.count == 1_000)
        #expect(results.allSatisfy { $0.onLoop && !$0.inside })
        let values = results.map { try? $0.result.get() }
        #expect(values[..<900].allSatisfy { $0 == true })
        #expect(values[900...].filter { $0 == true }.count == 1)
        #expect(values[900...].filter { $0 == false }.count == 99)
        print("redis store: 1000 concurrent setIfAbsent in \(elapsed * 1e3) ms")
    }

    // MARK: TLS (rediss://)

    /// Each host form: a name (sent as SNI, checked against DNS SANs) and an IP address
    /// (checked against IP SANs).
    @Test(arguments: ["localhost", "127.0.0.1"])
    func aRedissStoreWorksEndToEndWithAPassword(host: String) async throws {
        let pki = try TestPKI()
        let redis = try RedisServer(password: "tls-pw", tls: pki.serverTLS("server"), cliTLS: pki.cliArguments)
        defer { redis.stop() }
        let log = try LogCapture()
        let env = try StoreLoop(redis.store(password: "tls-pw", database: 2, host: host, tls: pki.trust), logger: log.logger)
        defer { env.shutdown() }
        #expect(try await env.setIfAbsent("replay:t", [1, 0, 2], ttl: 60).value.get() == true)
        #expect(try await env.setIfAbsent("replay:t", [9], ttl: 60).value.get() == false)
        #expect(try await env.get("replay:t").value.get() == [1, 0, 2])
        try await env.set("session:t", Array("s".utf8), ttl: 60).value.get()
        #expect(try await env.getAndDelete("session:t").value.get() == Array("s".utf8))
        #expect(try await env.delete("replay:t").value.get() == true)
        #expect(try await env.setIfAbsent("replay:ttl", [1], ttl: 60).value.get() == true)
        let ttl = Int(redis.cli("-n", "2", "TTL", "cbp:replay:ttl").trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
        #expect(ttl > 50 && ttl <= 60)
        // Many commands in flight at once cross the TLS stream in order.
        let results = await env.batch(count: 300) { store, loop, i, done in
            store.setIfAbsent(key: "load:\(i % 200)", value: [UInt8(i % 256)], ttlSeconds: 60, on: loop) { done($0) }
        }
        #expect(results.compactMap { try? $0.result.get() }.filter { $0 }.count == 200)
        #expect(!log.text().contains("tls-pw"))
        #expect(!log.text().contains("redis store unavailable"))
    }

    @Test func aServerCertificateFromAnotherCAIsRefused() async throws {
        let pki = try TestPKI()
        let redis = try RedisServer(tls: pki.serverTLS("server"), cliTLS: pki.cliArguments)
        defer { redis.stop() }
        // Trusting only an unrelated CA, and trusting the system store: both refuse the server.
        for trust in [UpstreamTLSSettings(caFile: pki.path("wrongca.pem")), UpstreamTLSSettings()] {
            let log = try LogCapture()
            let env = try StoreLoop(redis.store(host: "localhost", tls: trust), logger: log.logger)
            defer { env.shutdown() }
            for _ in 0..<3 {
                let outcome = await env.setIfAbsent("replay:x", [1], ttl: 60)
                #expect(outcome.value.redisFailure == .unavailable)
                #expect(outcome.onLoopThread && !outcome.insideCall)
                #expect(outcome.elapsed < 0.5)
            }
            #expect(log.text().contains("redis store unavailable"))
            #expect(log.text().contains("certificate verify failed"), "\(log.text())")
        }
        #expect(redis.cli("DBSIZE").hasPrefix("0"))
    }

    @Test(arguments: [("localhost", "hostname mismatch"), ("127.0.0.1", "IP address mismatch")])
    func aCertificateForAnotherNameIsRefused(host: String, reason: String) async throws {
        let pki = try TestPKI()
        let redis = try RedisServer(tls: pki.serverTLS("othername"), cliTLS: pki.cliArguments)
        defer { redis.stop() }
        let log = try LogCapture()
        let env = try StoreLoop(redis.store(host: host, tls: pki.trust), logger: log.logger)
        defer { env.shutdown() }
        #expect(await env.get("k").value.redisFailure == .unavailable)
        #expect(await env.set("k", [1], ttl: 5).value.redisFailure == .unavailable)
        #expect(log.text().contains(reason), "\(log.text())")
    }

    @Test func aPlainClientAgainstATLSPortAndATLSClientAgainstAPlainPortFailCleanly() async throws {
        let pki = try TestPKI()
        let tlsRedis = try RedisServer(tls: pki.serverTLS("server"), cliTLS: pki.cliArguments)
        defer { tlsRedis.stop() }
        let plain = try StoreLoop(tlsRedis.store(timeoutMilliseconds: 500))
        defer { plain.shutdown() }
        for _ in 0..<3 {
            let outcome = await plain.get("k")
            #expect(outcome.value.redisFailure == .unavailable || outcome.value.redisFailure == .timeout)
            #expect(outcome.elapsed < 1)
        }
        let plainRedis = try RedisServer()
        defer { plainRedis.stop() }
        let log = try LogCapture()
        let tls = try StoreLoop(plainRedis.store(timeoutMilliseconds: 500, tls: pki.trust), logger: log.logger)
        defer { tls.shutdown() }
        for _ in 0..<3 {
            let outcome = await tls.get("k")
            #expect(outcome.value.redisFailure == .unavailable || outcome.value.redisFailure == .timeout)
            #expect(outcome.elapsed < 1)
        }
        #expect(log.text().contains("TLS handshake with 127.0.0.1 did not finish within 500 ms"), "\(log.text())")
        #expect(plainRedis.cli("DBSIZE").hasPrefix("0"))
    }

    @Test func aRedissStoreReconnectsAfterTheServerRestarts() async throws {
        let pki = try TestPKI()
        let redis = try RedisServer(tls: pki.serverTLS("server"), cliTLS: pki.cliArguments)
        defer { redis.stop() }
        let log = try LogCapture()
        let env = try StoreLoop(redis.store(host: "localhost", tls: pki.trust), logger: log.logger)
        defer { env.shutdown() }
        #expect(try await env.setIfAbsent("before", [1], ttl: 60).value.get() == true)
        redis.kill()
        for _ in 0..<5 {
            let outcome = await env.get("before")
            #expect(outcome.value.redisFailure == .unavailable)
            #expect(outcome.elapsed < 0.2)
            try await Task.sleep(for: .milliseconds(20))
        }
        try redis.start()
        #expect(try await env.recovers())
        #expect(log.text().contains("redis store reconnected"))
    }

    @Test func mutualTLSSendsTheClientCertificateAndWithoutItTheServerRefuses() async throws {
        let pki = try TestPKI()
        var serverTLS = pki.serverTLS("server")
        serverTLS.requireClientCertificate = true
        let redis = try RedisServer(tls: serverTLS, cliTLS: pki.cliArguments)
        defer { redis.stop() }
        var withCertificate = pki.trust
        withCertificate.clientCertFile = pki.path("client.pem")
        withCertificate.clientKeyFile = pki.path("client.key")
        let mutual = try StoreLoop(redis.store(host: "localhost", tls: withCertificate))
        defer { mutual.shutdown() }
        #expect(try await mutual.setIfAbsent("m", [1], ttl: 60).value.get() == true)
        #expect(try await mutual.get("m").value.get() == [1])
        let anonymous = try StoreLoop(redis.store(timeoutMilliseconds: 500, host: "localhost", tls: pki.trust))
        defer { anonymous.shutdown() }
        let refused = await anonymous.get("m")
        #expect(refused.value.redisFailure == .unavailable || refused.value.redisFailure == .timeout)
    }

    @Test func aMissingCAFileIsASetUpErrorNamingTheFile() throws {
        let url = try RedisURL(parsing: "rediss://localhost/0")
        do {
            _ = try RedisStore.tlsClient(for: url, UpstreamTLSSettings(caFile: "/nonexistent/redis-ca.pem"))
            Issue.record("a missing CA file was accepted")
        } catch {
            #expect(error.file == "/nonexistent/redis-ca.pem")
        }
    }

    // MARK: URL

    @Test func parsesRedisURLs() throws {
        let full = try RedisURL(parsing: "redis://app%40x:p%3Ass@redis.internal:6380/4")
        #expect(full == RedisURL(host: "redis.internal", port: 6380, username: "app@x", password: "p:ss", database: 4))
        #expect(!full.description.contains("p:ss") && !full.description.contains("p%3Ass"))
        #expect(full.description == "redis://app@x:***@redis.internal:6380/4")
        #expect(try RedisURL(parsing: "redis://:pw@10.0.0.1") == RedisURL(host: "10.0.0.1", password: "pw"))
        #expect(try RedisURL(parsing: "redis://localhost") == RedisURL(host: "localhost"))
        #expect(try RedisURL(parsing: "redis://[::1]:7000/2") == RedisURL(host: "::1", port: 7000, database: 2))
        let secure = try RedisURL(parsing: "rediss://:pw@redis.internal/1")
        #expect(secure == RedisURL(host: "redis.internal", port: 6379, password: "pw", database: 1, tls: true))
        #expect(secure.description == "rediss://:***@redis.internal:6379/1")
        #expect(try RedisURL(parsing: "redis://h").tls == false)
        for bad in ["http://x", "redisss://x", "rediss://", "redis://", "redis://h:0", "redis://h:99999", "redis://h/x", "redis://:%zz@h"] {
            #expect(throws: StoreError.self) { try RedisURL(parsing: bad) }
        }
        do {
            _ = try RedisURL(parsing: "redis://u:topsecret@h:notaport")
        } catch {
            #expect(!error.description.contains("topsecret"))
        }
    }
}

// MARK: - Harness

/// A throwaway CA, an unrelated CA, and certificates made with the openssl CLI in a temporary
/// directory: "server" (localhost and 127.0.0.1), "othername" (other.test only), "client".
final class TestPKI {
    let root: String

    init() throws {
        root = NSTemporaryDirectory() + "redis-pki-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        try ca("ca", "Redis Test CA")
        try ca("wrongca", "Unrelated CA")
        try issue("server", sans: "DNS:localhost,IP:127.0.0.1", usage: "serverAuth")
        try issue("othername", sans: "DNS:other.test", usage: "serverAuth")
        try issue("client", sans: nil, usage: "clientAuth")
    }

    deinit { try? FileManager.default.removeItem(atPath: root) }

    func path(_ name: String) -> String { root + "/" + name }

    /// The store's trust: this PKI's CA only.
    var trust: UpstreamTLSSettings { UpstreamTLSSettings(caFile: path("ca.pem")) }

    func serverTLS(_ name: String) -> RedisServerTLS {
        RedisServerTLS(cert: path("\(name).pem"), key: path("\(name).key"), ca: path("ca.pem"))
    }

    var cliArguments: [String] {
        ["--tls", "--cacert", path("ca.pem"), "--cert", path("client.pem"), "--key", path("client.key"), "--sni", "localhost"]
    }

    private func ca(_ name: String, _ cn: String) throws {
        try key(name)
        try run("req", "-x509", "-new", "-key", path("\(name).key"), "-out", path("\(name).pem"), "-days", "2",
                "-subj", "/CN=\(cn)", "-addext", "basicConstraints=critical,CA:TRUE",
                "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    }

    private func issue(_ name: String, sans: String?, usage: String) throws {
        try key(name)
        try run("req", "-new", "-key", path("\(name).key"), "-out", path("\(name).csr"), "-subj", "/CN=\(name)")
        var ext = "extendedKeyUsage=\(usage)\n"
        if let sans { ext += "subjectAltName=\(sans)\n" }
        try ext.write(toFile: path("\(name).ext"), atomically: true, encoding: .utf8)
        try run("x509", "-req", "-in", path("\(name).csr"), "-CA", path("ca.pem"), "-CAkey", path("ca.key"),
                "-CAcreateserial", "-out", path("\(name).pem"), "-days", "2", "-extfile", path("\(name).ext"))
    }

    private func key(_ name: String) throws {
        try run("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", path("\(name).key"))
    }

    private func run(_ args: String...) throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        p.arguments = args
        p.currentDirectoryURL = URL(fileURLWithPath: root)
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        p.waitUntilExit()
        guard p.terminationStatus == 0 else { throw POSIXError(.EINVAL) }
    }
}

extension Result where Failure == StoreError {
    var redisFailure: StoreError.Code? {
        if case .failure(let error) = self { return error.code }
        return nil
    }
}

/// How a test `redis-server` serves TLS (its only port is then the TLS one).
struct RedisServerTLS {
    var cert: String
    var key: String
    /// Trusted for client certificates (redis-server requires one even when it asks for none).
    var ca: String
    var requireClientCertificate = false
}

/// A `redis-server` subprocess on a free loopback port; `stop()` kills it.
final class RedisServer: @unchecked Sendable {
    let port: Int
    let password: String?
    let tls: RedisServerTLS?
    /// For `redis-cli` against a TLS server: the CA and client certificate it uses.
    let cliTLS: [String]
    /// Set: the whole command line instead of ours (a sentinel: its configuration file, `--sentinel`).
    private let commandLine: [String]?
    private var process: Process?

    init(password: String? = nil, tls: RedisServerTLS? = nil, cliTLS: [String] = []) throws {
        self.port = Self.freePort()
        self.password = password
        self.tls = tls
        self.cliTLS = cliTLS
        commandLine = nil
        try start()
    }

    /// A server configured by `commandLine` alone, which must make it listen on `port`.
    init(port: Int, commandLine: [String]) throws {
        self.port = port
        password = nil
        tls = nil
        cliTLS = []
        self.commandLine = commandLine
        try start()
    }

    func start() throws {
        var args = commandLine ?? ["--port", "\(port)", "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                                   "--enable-debug-command", "yes", "--loglevel", "warning"]
        if let password { args += ["--requirepass", password] }
        if let tls {
            args += ["--port", "0", "--tls-port", "\(port)", "--tls-cert-file", tls.cert, "--tls-key-file", tls.key,
                     "--tls-ca-cert-file", tls.ca, "--tls-auth-clients", tls.requireClientCertificate ? "yes" : "no"]
        }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/redis-server")
        p.arguments = args
        // A replica's full sync writes dump.rdb to the working directory: never the checkout's.
        p.currentDirectoryURL = URL(fileURLWithPath: NSTemporaryDirectory())
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        process = p
        for _ in 0..<200 {
            if cli("PING").hasPrefix("PONG") { return }
            usleep(10_000)
        }
        throw POSIXError(.ETIMEDOUT)
    }

    /// SIGKILL: a crash, not a clean shutdown.
    func kill() {
        guard let p = process else { return }
        Glibc.kill(p.processIdentifier, SIGKILL)
        p.waitUntilExit()
        process = nil
    }

    func stop() { kill() }

    private func cliProcess(_ args: [String]) -> Process {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/redis-cli")
        var full = ["-p", "\(port)"] + cliTLS
        if let password { full += ["--no-auth-warning", "-a", password] }
        p.arguments = full + args
        return p
    }

    @discardableResult
    func cli(_ args: String...) -> String { cli(args) }

    @discardableResult
    func cli(_ args: [String]) -> String {
        let p = cliProcess(args)
        let pipe = Pipe()
        p.standardOutput = pipe
        p.standardError = FileHandle.nullDevice
        guard (try? p.run()) != nil else { return "" }
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return String(decoding: data, as: UTF8.self)
    }

    func cliInBackground(_ args: String...) -> Process {
        let p = cliProcess(args)
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try? p.run()
        return p
    }

    func store(username: String? = nil, password: String? = nil, database: Int = 0, prefix: String = "cbp:",
               timeoutMilliseconds: UInt64 = 1_000, host: String = "127.0.0.1",
               tls: UpstreamTLSSettings? = nil) throws -> RedisStore {
        let url = RedisURL(host: host, port: port, database: database, tls: tls != nil)
        let spec = RedisSpec(.single(url), auth: RedisAuth(username: username, password: password.map(Secret.init)))
        var config = RedisStore.Configuration(spec, keyPrefix: prefix, commandTimeout: timeoutMilliseconds * 1_000_000)
        config.backoffMax = 500_000_000
        if let tls { config.tls = try RedisStore.tlsClient(for: url, tls) }
        return RedisStore(config)
    }

    static func freePort() -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        addr.sin_port = 0
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, len) }
        }
        _ = withUnsafeMutablePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) }
        }
        return Int(UInt16(bigEndian: addr.sin_port))
    }
}

/// A logger writing into a temporary file, read back by the test.
final class LogCapture: Sendable {
    let logger: Logger
    private let path: String
    private let fd: Int32

    init() throws {
        path = NSTemporaryDirectory() + "redis-store-log-\(UUID().uuidString)"
        fd = open(path, O_CREAT | O_WRONLY | O_APPEND, 0o600)
        guard fd >= 0 else { throw POSIXError(.EIO) }
        logger = Logger(level: .debug, format: .json, fd: fd)
    }

    func text() -> String { (try? String(contentsOfFile: path, encoding: .utf8)) ?? "" }

    deinit {
        close(fd)
        unlink(path)
    }
}

struct StoreOutcome<T: Sendable>: Sendable {
    let value: T
    let onLoopThread: Bool
    let insideCall: Bool
    let elapsed: Double
}

struct BatchItem<T: Sendable>: Sendable {
    let result: T
    let onLoop: Bool
    let inside: Bool
}

/// Flags shared between a call and its completion, on the loop's thread only.
final class CallFlags: @unchecked Sendable {
    var inside = true
}

/// A store on a real loop thread; each call is made on the loop (the Store contract).
final class StoreLoop: Sendable {
    let store: RedisStore
    let thread: EventLoopThread
    private let loopThreadID = Atomic<UInt>(0)

    var loop: EventLoop { thread.loop }

    init(_ store: RedisStore, logger: Logger? = nil) throws {
        if let logger {
            self.store = RedisStore(store.configuration, logger: logger)
        } else {
            self.store = store
        }
        let box = StoreLoopThreadID()
        thread = try EventLoopThread(setup: { _ in box.id.store(UInt(pthread_self()), ordering: .releasing) })
        while box.id.load(ordering: .acquiring) == 0 { usleep(1_000) }
        loopThreadID.store(box.id.load(ordering: .acquiring), ordering: .relaxed)
    }

    func isLoopThread() -> Bool {
        pthread_equal(pthread_t(loopThreadID.load(ordering: .relaxed)), pthread_self()) != 0
    }

    func call<T: Sendable>(_ op: @escaping @Sendable (RedisStore, EventLoop, @escaping (T) -> Void) -> Void) async -> StoreOutcome<T> {
        let loop = self.loop
        let store = self.store
        let start = EventLoop.monotonicNow()
        return await withCheckedContinuation { continuation in
            loop.execute {
                let flags = CallFlags()
                op(store, loop) { value in
                    let elapsed = Double(EventLoop.monotonicNow() - start) / 1e9
                    continuation.resume(returning: StoreOutcome(value: value, onLoopThread: self.isLoopThread(),
                                                           insideCall: flags.inside, elapsed: elapsed))
                }
                flags.inside = false
            }
        }
    }

    /// Issues `count` calls in one loop task, then waits for all their completions.
    func batch<T: Sendable>(count: Int, _ op: @escaping @Sendable (RedisStore, EventLoop, Int, @escaping (T) -> Void) -> Void) async -> [BatchItem<T>] {
        let loop = self.loop
        let store = self.store
        return await withCheckedContinuation { continuation in
            loop.execute {
                let flags = CallFlags()
                var items = [BatchItem<T>?](repeating: nil, count: count)
                var left = count
                for i in 0..<count {
                    op(store, loop, i) { value in
                        items[i] = BatchItem(result: value, onLoop: self.isLoopThread(), inside: flags.inside)
                        left -= 1
                        if left == 0 { continuation.resume(returning: items.map { $0! }) }
                    }
                }
                flags.inside = false
            }
        }
    }

    func setIfAbsent(_ key: String, _ value: [UInt8], ttl: Int64) async -> StoreOutcome<Result<Bool, StoreError>> {
        await call { store, loop, done in store.setIfAbsent(key: key, value: value, ttlSeconds: ttl, on: loop, done) }
    }

    func set(_ key: String, _ value: [UInt8], ttl: Int64) async -> StoreOutcome<Result<Void, StoreError>> {
        await call { store, loop, done in store.set(key: key, value: value, ttlSeconds: ttl, on: loop, done) }
    }

    func get(_ key: String) async -> StoreOutcome<Result<[UInt8]?, StoreError>> {
        await call { store, loop, done in store.get(key: key, on: loop, done) }
    }

    func getAndDelete(_ key: String) async -> StoreOutcome<Result<[UInt8]?, StoreError>> {
        await call { store, loop, done in store.getAndDelete(key: key, on: loop, done) }
    }

    func delete(_ key: String) async -> StoreOutcome<Result<Bool, StoreError>> {
        await call { store, loop, done in store.delete(key: key, on: loop, done) }
    }

    func replace(_ key: String, _ value: [UInt8], ttl: Int64, ifHolding expected: [UInt8]?) async -> StoreOutcome<Result<Bool, StoreError>> {
        await call { store, loop, done in store.replace(key: key, value: value, ttlSeconds: ttl, ifHolding: expected, on: loop, done) }
    }

    /// Whether a write succeeds again within 5 s (after the server came back).
    func recovers() async throws -> Bool {
        let start = EventLoop.monotonicNow()
        while EventLoop.monotonicNow() - start < 5_000_000_000 {
            if case .success(true) = await setIfAbsent("after", [2], ttl: 60).value { return true }
            try await Task.sleep(for: .milliseconds(20))
        }
        return false
    }

    /// The store's close runs on the loop before the loop's stop (tasks run in order).
    func shutdown() {
        store.close()
        thread.stop()
        thread.join()
    }
}

final class StoreLoopThreadID: Sendable {
    let id = Atomic<UInt>(0)
}
