import Foundation
import ProxyCore
import Testing
@testable import OAuthCallback
#if canImport(Glibc)
import Glibc
#endif

// The Sentinel-managed store: its URL and the sentinels' answers read without sockets, then the
// store against real `redis-server` processes, one of them run with --sentinel (the failover
// itself, with a replica and three sentinels, is IntegrationTests/integration/test_redis_sentinel.py).
@Suite(.serialized, .timeLimit(.minutes(2)))
struct RedisSentinelTests {
    // MARK: The URL

    @Test func parsesSentinelURLs() throws {
        let full = try RedisSentinelURL(parsing: "redis+sentinel://app:p%40ss@10.0.0.1,10.0.0.2:26380,[::1]/cbp/2")
        #expect(full == RedisSentinelURL(sentinels: [.init(host: "10.0.0.1", port: 26379), .init(host: "10.0.0.2", port: 26380),
                                                     .init(host: "::1", port: 26379)],
                                         masterName: "cbp", username: "app", password: "p@ss", database: 2))
        #expect(full.description == "redis+sentinel://app:***@10.0.0.1:26379,10.0.0.2:26380,[::1]:26379/cbp/2")
        let bare = try RedisSentinelURL(parsing: "redis+sentinel://:pw@sentinel.internal/mymaster")
        #expect(bare == RedisSentinelURL(sentinels: [.init(host: "sentinel.internal", port: 26379)], masterName: "mymaster",
                                         password: "pw"))
        #expect(try RedisSentinelURL(parsing: "redis+sentinel://h:1/m/").database == 0)
        let tls = try RedisSentinelURL(parsing: "rediss+sentinel://10.0.0.1/cbp")
        #expect(tls.tls && tls.description == "rediss+sentinel://10.0.0.1:26379/cbp/0")
    }

    @Test(arguments: [
        ("redis://h/m", "must start with redis+sentinel:// or rediss+sentinel://"),
        ("redis+sentinel://h", "missing /MASTER"),
        ("redis+sentinel://h/", "missing /MASTER"),
        ("redis+sentinel://h1,,h2/m", "an empty sentinel address"),
        ("redis+sentinel:///m", "an empty sentinel address"),
        ("redis+sentinel://h:0/m", "sentinel 'h:0': port must be 1...65535"),
        ("redis+sentinel://h/m/x", "database must be a number"),
        ("redis+sentinel://h/m/1/2", "the path is /MASTER or /MASTER/DB"),
        ("redis+sentinel://:hunter2@h:99999/m", "port must be 1...65535"),
    ])
    func refusesBadSentinelURLsSayingWhyWithoutThePassword(text: String, why: String) {
        #expect {
            _ = try RedisSentinelURL(parsing: text)
        } throws: { error in
            let detail = (error as? StoreError)?.detail ?? ""
            return detail.contains(why) && !detail.contains("hunter2")
        }
    }

    // MARK: The sentinels' answers

    @Test func readsTheMastersAddressAndRefusesAnythingElse() throws {
        #expect(try RedisSentinel.address(.array([.string(Array("127.0.0.1".utf8)), .string(Array("6380".utf8))])).get()
                == .ipv4(host: "127.0.0.1", port: 6380))
        #expect(try RedisSentinel.address(.array([.string(Array("::1".utf8)), .string(Array("6380".utf8))])).get()
                == .ipv6(host: "::1", port: 6380))
        let refused: [(RedisReply, String)] = [
            (.null, "does not know this master"),
            (.array([]), "does not know this master"),
            (.array([.string(Array("redis.internal".utf8)), .string(Array("6379".utf8))]), "not an IP address"),
            (.array([.string(Array("127.0.0.1".utf8)), .string(Array("0".utf8))]), "not an IP address"),
            (.error("NOAUTH Authentication required."), "refused: NOAUTH"),
            (.status("OK"), "something other than an address"),
        ]
        for (reply, why) in refused {
            guard case .failure(let error) = RedisSentinel.address(reply) else {
                Issue.record("\(reply) was taken as an address")
                continue
            }
            #expect(error.code == .unavailable && error.detail.contains(why), "\(reply): \(error.detail)")
        }
    }

    @Test func readsTheRoleAndTheErrorsThatMeanNotTheMaster() {
        #expect(RedisSentinel.role(.array([.string(Array("master".utf8)), .integer(0), .array([])])) == "master")
        #expect(RedisSentinel.role(.array([.string(Array("slave".utf8)), .string(Array("127.0.0.1".utf8))])) == "slave")
        #expect(RedisSentinel.role(.error("ERR unknown command")) == "unknown")
        for message in ["READONLY You can't write against a read only replica.", "MASTERDOWN Link with MASTER is down",
                        "LOADING Redis is loading the dataset in memory"] {
            #expect(RedisSentinel.meansNotMaster(message), "\(message)")
        }
        for message in ["OOM command not allowed", "ERR wrong number of arguments", "NOAUTH Authentication required."] {
            #expect(!RedisSentinel.meansNotMaster(message), "\(message)")
        }
    }

    // MARK: Against real servers

    @Test func findsTheMasterThroughTheSentinelsPassingOverADeadOne() async throws {
        let master = try RedisServer()
        defer { master.stop() }
        let sentinel = try SentinelServer(monitoring: master.port)
        defer { sentinel.stop() }
        let env = try StoreLoop(try Self.store(sentinels: [RedisServer.freePort(), sentinel.port]))
        defer { env.shutdown() }
        let first = await env.setIfAbsent("replay:s", [1], ttl: 60)
        #expect(try first.value.get() == true)
        #expect(first.elapsed < 0.5 && !first.insideCall && first.onLoopThread)
        #expect(master.cli("EXISTS", "cbp:replay:s").hasPrefix("1"))
        #expect(try await env.getAndDelete("replay:s").value.get() == [1])
        #expect(env.store.sentinel?.master == "127.0.0.1:\(master.port)")
        #expect(env.store.sentinel?.failovers == 0)
    }

    @Test func aSentinelThatDoesNotKnowTheMasterFailsEveryCallAtOnce() async throws {
        let master = try RedisServer()
        defer { master.stop() }
        let sentinel = try SentinelServer(monitoring: master.port)
        defer { sentinel.stop() }
        let log = try LogCapture()
        let env = try StoreLoop(try Self.store(sentinels: [sentinel.port], master: "other"), logger: log.logger)
        defer { env.shutdown() }
        for i in 0..<5 {
            let outcome = await env.setIfAbsent("k\(i)", [1], ttl: 60)
            #expect(outcome.value.redisFailure == .unavailable)
            #expect(outcome.elapsed < 0.5, "call \(i) took \(outcome.elapsed) s")
        }
        #expect(log.text().contains("does not know this master"), "\(log.text())")
        #expect(master.cli("DBSIZE").hasPrefix("0"))
    }

    /// The master is turned into a replica behind the sentinel's back (as after a failover the
    /// sentinel has not published yet): the write it refuses drops the connection, and since
    /// the sentinel still names it, ROLE keeps the store off it until it is a master again.
    @Test func aMasterDemotedToAReplicaIsDroppedAndNeverWrittenTo() async throws {
        let master = try RedisServer()
        defer { master.stop() }
        let other = try RedisServer()
        defer { other.stop() }
        let sentinel = try SentinelServer(monitoring: master.port)
        defer { sentinel.stop() }
        let log = try LogCapture()
        let env = try StoreLoop(try Self.store(sentinels: [sentinel.port]), logger: log.logger)
        defer { env.shutdown() }
        #expect(try await env.setIfAbsent("before", [0], ttl: 60).value.get() == true)

        master.cli("REPLICAOF", "127.0.0.1", "\(other.port)")
        for _ in 0..<200 where !master.cli("ROLE").hasPrefix("slave") { usleep(10_000) }
        for i in 0..<10 {
            let outcome = await env.setIfAbsent("during\(i)", [1], ttl: 60)
            #expect(outcome.value.redisFailure != nil, "write \(i) reached a replica")
            #expect(outcome.elapsed < 1.5, "call \(i) took \(outcome.elapsed) s")
            try await Task.sleep(for: .milliseconds(30))
        }
        let text = log.text()
        #expect(text.contains("READONLY"), "\(text)")
        #expect(text.contains("is not the master (ROLE slave)"), "\(text)")
        #expect(other.cli("DBSIZE").hasPrefix("0"))

        master.cli("REPLICAOF", "NO", "ONE")
        #expect(try await env.recovers())
        #expect(master.cli("EXISTS", "cbp:after").hasPrefix("1"))
        // The same address verified again: not a failover.
        #expect(env.store.sentinel?.failovers == 0)
    }

    @Test func aNewMasterAddressCountsAsAFailover() async throws {
        let first = try RedisServer()
        defer { first.stop() }
        let second = try RedisServer()
        defer { second.stop() }
        let sentinel = try SentinelServer(monitoring: first.port)
        defer { sentinel.stop() }
        let log = try LogCapture()
        let env = try StoreLoop(try Self.store(sentinels: [sentinel.port]), logger: log.logger)
        defer { env.shutdown() }
        #expect(try await env.setIfAbsent("one", [1], ttl: 60).value.get() == true)

        // What a failover leaves the sentinels saying; the old master is gone.
        sentinel.cli("SENTINEL", "REMOVE", SentinelServer.masterName)
        sentinel.cli("SENTINEL", "MONITOR", SentinelServer.masterName, "127.0.0.1", "\(second.port)", "1")
        first.kill()
        #expect(try await env.recovers())
        #expect(second.cli("EXISTS", "cbp:after").hasPrefix("1"))
        #expect(env.store.sentinel?.master == "127.0.0.1:\(second.port)")
        #expect(env.store.sentinel?.failovers == 1)
        #expect(log.text().contains("redis master changed"))
    }

    /// The master's certificate is checked against the address the sentinel announces: the
    /// "server" certificate carries IP:127.0.0.1, "othername" does not.
    @Test(arguments: [("server", true), ("othername", false)])
    func overTLSTheMastersCertificateIsCheckedAgainstTheAnnouncedAddress(certificate: String, accepted: Bool) async throws {
        let pki = try TestPKI()
        let master = try RedisServer(tls: pki.serverTLS(certificate), cliTLS: pki.cliArguments)
        defer { master.stop() }
        let sentinel = try SentinelServer(monitoring: master.port, tls: pki.serverTLS("server"))
        defer { sentinel.stop() }
        let log = try LogCapture()
        let env = try StoreLoop(try Self.store(sentinels: [sentinel.port], tls: pki.trust), logger: log.logger)
        defer { env.shutdown() }
        let outcome = await env.setIfAbsent("tls", [1], ttl: 60)
        if accepted {
            #expect(try outcome.value.get() == true)
            #expect(master.cli("EXISTS", "cbp:tls").hasPrefix("1"))
        } else {
            #expect(outcome.value.redisFailure == .unavailable)
            #expect(log.text().contains("IP address mismatch"), "\(log.text())")
        }
    }

    static func store(sentinels: [Int], master: String = SentinelServer.masterName,
                      tls: UpstreamTLSSettings? = nil) throws -> RedisStore {
        let url = RedisSentinelURL(sentinels: sentinels.map { .init(host: "127.0.0.1", port: $0) }, masterName: master,
                                   tls: tls != nil)
        var config = RedisStore.Configuration(RedisSpec(.sentinel(url, RedisSpec.Sentinels())))
        config.backoffMax = 200_000_000
        if let tls { config.tls = try RedisStore.tlsClient(for: RedisURL(host: "127.0.0.1", tls: true), tls) }
        return RedisStore(config)
    }
}

/// `redis-server --sentinel` watching one master (quorum 1, and a down-after long enough that it
/// never starts a failover of its own during a test).
final class SentinelServer: @unchecked Sendable {
    static let masterName = "cbp"
    let port = RedisServer.freePort()
    private let dir: String
    private var server: RedisServer!

    /// `tls`: the master speaks TLS only; the sentinel reaches it with this certificate.
    init(monitoring masterPort: Int, tls: RedisServerTLS? = nil) throws {
        dir = NSTemporaryDirectory() + "sentinel-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        // Sentinel rewrites its configuration file: a fresh one each time.
        let conf = """
        port \(port)
        bind 127.0.0.1
        dir \(dir)
        sentinel monitor \(Self.masterName) 127.0.0.1 \(masterPort) 1
        sentinel down-after-milliseconds \(Self.masterName) 60000

        """ + (tls.map { "tls-replication yes\ntls-cert-file \($0.cert)\ntls-key-file \($0.key)\ntls-ca-cert-file \($0.ca)\n" } ?? "")
        try conf.write(toFile: dir + "/sentinel.conf", atomically: true, encoding: .utf8)
        server = try RedisServer(port: port, commandLine: [dir + "/sentinel.conf", "--sentinel"])
    }

    @discardableResult
    func cli(_ args: String...) -> String { server.cli(args) }

    func stop() {
        server.stop()
        try? FileManager.default.removeItem(atPath: dir)
    }
}
