import ProxyCore
import Testing
@testable import OAuthCallback

// The Redis Cluster store's pure parts: key slotting, the URL, and the cluster's answers
// (CLUSTER SLOTS, MOVED/ASK) read without sockets. The store against real cluster nodes —
// keys on every primary, a migration under load, a primary killed — is
// IntegrationTests/integration/test_redis_cluster.py.
struct RedisClusterTests {
    // MARK: Slots

    @Test func crc16IsTheXmodemVariantOfTheClusterSpecification() {
        // The specification's check value.
        #expect(RedisHashSlot.crc16(Array("123456789".utf8)) == 0x31C3)
        #expect(RedisHashSlot.crc16([]) == 0)
    }

    /// Expected slots as a real `redis-cli CLUSTER KEYSLOT` (Redis 7.0.15) answered them.
    @Test(arguments: [
        ("123456789", 12739), ("foo", 12182), ("bar", 5061), ("cbp:x", 3709), ("cbp:replay:abc", 5678),
        ("cbp:session:0123456789abcdef", 6977),
        // Hash tags: the first `{`, the first `}` after it, at least one byte between.
        ("{user1000}.following", 3443), ("foo{bar}{zap}", 5061), ("a{b}c", 3300),
        ("foo{}{bar}", 8363), ("{}", 15257), ("x{}y{z}", 15453),
        ("foo{{bar}}zap", 4015), ("{", 4092), ("{a", 10276), ("}{a}", 15495),
    ])
    func keysAreSlottedAsRedisSlotsThem(key: String, slot: Int) {
        #expect(RedisHashSlot.slot(of: Array(key.utf8)) == slot)
    }

    // MARK: The URL

    @Test func parsesClusterURLs() throws {
        let full = try RedisClusterURL(parsing: "redis+cluster://app:p%40ss@10.0.0.1,10.0.0.2:7001,[::1]:7002")
        #expect(full == RedisClusterURL(seeds: [.init(host: "10.0.0.1", port: 6379), .init(host: "10.0.0.2", port: 7001),
                                                .init(host: "::1", port: 7002)], username: "app", password: "p@ss"))
        #expect(full.description == "redis+cluster://app:***@10.0.0.1:6379,10.0.0.2:7001,[::1]:7002")
        #expect(try RedisClusterURL(parsing: "redis+cluster://:pw@redis.internal/0")
                == RedisClusterURL(seeds: [.init(host: "redis.internal", port: 6379)], password: "pw"))
        #expect(try RedisClusterURL(parsing: "redis+cluster://h:1/").seeds == [.init(host: "h", port: 1)])
        let tls = try RedisClusterURL(parsing: "rediss+cluster://10.0.0.1")
        #expect(tls.tls && tls.description == "rediss+cluster://10.0.0.1:6379")
        #expect(RedisClusterURL.isCluster("rediss+cluster://h") && !RedisClusterURL.isCluster("redis+sentinel://h/m"))
    }

    @Test(arguments: [
        ("redis://h", "must start with redis+cluster:// or rediss+cluster://"),
        ("redis+cluster://h/1", "Redis Cluster has only database 0"),
        ("redis+cluster://:hunter2@h/15", "Redis Cluster has only database 0"),
        ("redis+cluster://h/x", "Redis Cluster has only database 0"),
        ("redis+cluster://h1,,h2", "an empty node address"),
        ("redis+cluster://", "an empty node address"),
        ("redis+cluster://h:0", "node 'h:0': port must be 1...65535"),
        ("redis+cluster://:hunter2@h:99999", "port must be 1...65535"),
    ])
    func refusesBadClusterURLsSayingWhyWithoutThePassword(text: String, why: String) {
        #expect {
            _ = try RedisClusterURL(parsing: text)
        } throws: { error in
            let detail = (error as? StoreError)?.detail ?? ""
            return detail.contains(why) && !detail.contains("hunter2")
        }
    }

    // MARK: Redirections

    private static let node = SocketAddress.ipv4(host: "127.0.0.1", port: 7000)

    @Test func readsMovedAndAsk() throws {
        #expect(try RedisRedirect.parse("MOVED 3999 127.0.0.1:6381", answeredBy: Self.node)?.get()
                == RedisRedirect(kind: .moved, slot: 3999, address: .ipv4(host: "127.0.0.1", port: 6381)))
        #expect(try RedisRedirect.parse("ASK 16383 10.0.0.3:7002", answeredBy: Self.node)?.get()
                == RedisRedirect(kind: .ask, slot: 16383, address: .ipv4(host: "10.0.0.3", port: 7002)))
        #expect(try RedisRedirect.parse("MOVED 0 ::1:7001", answeredBy: Self.node)?.get()
                == RedisRedirect(kind: .moved, slot: 0, address: .ipv6(host: "::1", port: 7001)))
        // An empty host: the node that answered.
        #expect(try RedisRedirect.parse("MOVED 12 :7005", answeredBy: Self.node)?.get().address == .ipv4(host: "127.0.0.1", port: 7005))
        for other in ["OOM command not allowed", "CLUSTERDOWN The cluster is down", "TRYAGAIN Multiple keys request during rehashing",
                      "ERR MOVED is not a command", "MOVEDX 1 127.0.0.1:1"] {
            #expect(RedisRedirect.parse(other, answeredBy: Self.node) == nil, "\(other)")
        }
    }

    @Test(arguments: [
        ("MOVED 3999 redis-2.internal:6379", "not an IP address and port"),
        ("ASK 3999 ?:6379", "not an IP address and port"),
        ("MOVED 3999 127.0.0.1:0", "not an IP address and port"),
        ("MOVED 3999 127.0.0.1", "not an IP address and port"),
        ("MOVED 16384 127.0.0.1:7000", "malformed redirection"),
        ("MOVED -1 127.0.0.1:7000", "malformed redirection"),
        ("MOVED 1", "malformed redirection"),
    ])
    func refusesRedirectionsItCannotFollow(message: String, why: String) {
        guard case .failure(let error)? = RedisRedirect.parse(message, answeredBy: Self.node) else {
            Issue.record("\(message) was followed")
            return
        }
        #expect(error.code == .unavailable && error.detail.contains(why), "\(error.detail)")
    }

    // MARK: The slot map

    private static func node(_ host: String, _ port: Int64) -> RedisReply {
        .array([.string(Array(host.utf8)), .integer(port), .string(Array("0123abcd".utf8)), .array([])])
    }

    @Test func readsClusterSlotsWithPrimariesFirstAndReplicasAfter() throws {
        let reply = RedisReply.array([
            .array([.integer(0), .integer(5460), Self.node("127.0.0.1", 7000), Self.node("127.0.0.1", 7003)]),
            .array([.integer(5461), .integer(10922), Self.node("127.0.0.1", 7001), Self.node("127.0.0.1", 7004)]),
            .array([.integer(10923), .integer(16383), Self.node("", 7002)]),   // "" is the node asked
        ])
        let map = try RedisSlotMap.parse(reply, answeredBy: .ipv4(host: "127.0.0.1", port: 7002)).get()
        #expect(map.primaries == [.ipv4(host: "127.0.0.1", port: 7000), .ipv4(host: "127.0.0.1", port: 7001),
                                  .ipv4(host: "127.0.0.1", port: 7002)])
        #expect(map.replicas == [.ipv4(host: "127.0.0.1", port: 7003), .ipv4(host: "127.0.0.1", port: 7004)])
        #expect(map.covered == RedisHashSlot.count && map.problems.isEmpty)
        #expect(map.primary(for: 0)?.port == 7000 && map.primary(for: 5460)?.port == 7000)
        #expect(map.primary(for: 5461)?.port == 7001 && map.primary(for: 16383)?.port == 7002)
        var moved = map
        moved.moved(slot: 5460, to: .ipv4(host: "127.0.0.1", port: 7009))
        #expect(moved.primary(for: 5460)?.port == 7009 && moved.primary(for: 5459)?.port == 7000)
        #expect(moved.primaries.count == 4)
    }

    @Test func aRangeWhosePrimaryIsAnnouncedByNameHasNoPrimary() throws {
        let reply = RedisReply.array([
            .array([.integer(0), .integer(99), Self.node("127.0.0.1", 7000)]),
            .array([.integer(100), .integer(16383), Self.node("redis-1.internal", 7001)]),
        ])
        let map = try RedisSlotMap.parse(reply, answeredBy: Self.node).get()
        #expect(map.covered == 100 && map.primary(for: 100) == nil)
        #expect(map.problems.count == 1 && map.problems[0].contains("redis-1.internal"))
    }

    @Test(arguments: [
        (RedisReply.array([]), "knows no primary for any slot"),
        (.error("ERR This instance has cluster support disabled"), "refused CLUSTER SLOTS: ERR This instance"),
        (.status("OK"), "something other than an array"),
        (.array([.array([.integer(5), .integer(4), .array([])])]), "malformed slot range"),
        (.array([.array([.integer(0), .integer(16384), .array([])])]), "malformed slot range"),
        (.array([.array([.integer(0), .integer(10)])]), "malformed slot range"),
        (.array([.array([.integer(0), .integer(10), .array([.string(Array("?".utf8)), .integer(1)])])]), "knows no primary"),
    ])
    func refusesSlotMapsThatServeNothing(reply: RedisReply, why: String) {
        guard case .failure(let error) = RedisSlotMap.parse(reply, answeredBy: Self.node) else {
            Issue.record("\(reply) was taken as a slot map")
            return
        }
        #expect(error.code == .unavailable && error.detail.contains(why), "\(error.detail)")
    }
}
