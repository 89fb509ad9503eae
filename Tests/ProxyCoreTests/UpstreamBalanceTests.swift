import Testing
@testable import ProxyCore

/// `least_conn` and `hash …` (round robin, backups and health: `UpstreamBalancerTests`).
@Suite struct UpstreamBalanceTests {
    static let now: UInt64 = 100_000_000_000

    static func balancer(_ weights: [Int], backups: Set<Int> = [], _ balance: UpstreamBalance) -> UpstreamBalancer {
        let servers = weights.enumerated().map {
            UpstreamServer(target: UpstreamTarget(address: .ipv4(host: "127.0.0.1", port: UInt16(3000 + $0.offset))),
                           weight: $0.element, backup: backups.contains($0.offset))
        }
        var settings = UpstreamGroupSettings(name: "g", servers: servers)
        settings.balance = balance
        let group = UpstreamGroup(settings, resolvers: servers.map { _ in nil }, log: Logger(level: .error), metrics: MetricsRegistry())
        return UpstreamBalancer(group: group, capacity: 8, tls: nil)
    }

    static func setInFlight(_ b: UpstreamBalancer, _ counts: [Int]) {
        for (i, n) in counts.enumerated() { b.group.servers[i].inFlight.store(n, ordering: .relaxed) }
    }

    @Test func leastConnectionsPicksTheFewestInFlightForTheWeight() {
        let b = Self.balancer([1, 1, 1], .leastConnections)
        Self.setInFlight(b, [5, 2, 7])
        #expect(b.pick(now: Self.now, excluding: 0) == 1)
        // Weight 3 with 6 in flight (2 per unit) beats weight 1 with 3.
        let w = Self.balancer([1, 3], .leastConnections)
        Self.setInFlight(w, [3, 6])
        #expect(w.pick(now: Self.now, excluding: 0) == 1)
        Self.setInFlight(w, [1, 6])
        #expect(w.pick(now: Self.now, excluding: 0) == 0)
        // A server already tried is passed over even when it has the fewest.
        #expect(b.pick(now: Self.now, excluding: 0b010) == 0)
    }

    @Test func leastConnectionsTiesGoRoundRobin() {
        let b = Self.balancer([1, 1, 1], .leastConnections)
        Self.setInFlight(b, [4, 4, 9])
        let picks = (0..<6).map { _ in b.pick(now: Self.now, excluding: 0)! }
        #expect(Set(picks) == [0, 1])
        #expect(picks.filter { $0 == 0 }.count == 3)
    }

    @Test func leastConnectionsCountsAttachedConnectionsUntilParkedOrClosed() throws {
        let b = Self.balancer([1, 1], .leastConnections)
        #expect(b.pools[0].inFlight === b.group.servers[0])
        // Round robin keeps no count (no atomics on its requests).
        #expect(Self.balancer([1, 1], .roundRobin).pools[0].inFlight == nil)
    }

    @Test func hashSendsAKeyToTheSameServerEveryTime() {
        let b = Self.balancer([1, 1, 1, 1], .hash(.clientAddress))
        for k in 0..<200 {
            let key = HashRing.hash(Array("client-\(k)".utf8))
            let first = b.pick(now: Self.now, excluding: 0, key: key)
            #expect(first != nil)
            #expect((0..<5).allSatisfy { _ in b.pick(now: Self.now, excluding: 0, key: key) == first })
        }
    }

    @Test func hashSharesFollowTheWeights() {
        let b = Self.balancer([1, 1, 2], .hash(.header("x-session")))
        var counts = [0, 0, 0]
        for k in 0..<40_000 { counts[b.pick(now: Self.now, excluding: 0, key: HashRing.hash(Array("s\(k)".utf8)))!] += 1 }
        // Expected 10,000 : 10,000 : 20,000; within 15 % with 100 points per weight.
        #expect(abs(counts[0] - 10_000) < 1_500 && abs(counts[1] - 10_000) < 1_500 && abs(counts[2] - 20_000) < 3_000,
                "\(counts)")
    }

    @Test func aServerGoingOutMovesOnlyItsOwnKeys() {
        let b = Self.balancer([1, 1, 1, 1], .hash(.clientAddress))
        let keys = (0..<4_000).map { HashRing.hash(Array("k\($0)".utf8)) }
        let before = keys.map { b.pick(now: Self.now, excluding: 0, key: $0)! }
        // Server 2 tried (as if it failed): its keys go elsewhere, everyone else's stay.
        let after = keys.map { b.pick(now: Self.now, excluding: 0b100, key: $0)! }
        for (x, y) in zip(before, after) {
            if x == 2 { #expect(y != 2) } else { #expect(x == y) }
        }
        #expect(before.contains(2))
    }

    @Test func hashWithoutAKeyOrWithBackupsFallsBackToRoundRobin() {
        let b = Self.balancer([1, 1, 1], backups: [2], .hash(.clientAddress))
        let picks = (0..<4).map { _ in b.pick(now: Self.now, excluding: 0, key: nil)! }
        #expect(picks == [0, 1, 0, 1])
        // Backups own no points: a key reaches the backup only when both primaries are tried.
        let key = HashRing.hash(Array("x".utf8))
        #expect(b.pick(now: Self.now, excluding: 0, key: key) != 2)
        #expect(b.pick(now: Self.now, excluding: 0b011, key: key) == 2)
    }

    @Test(arguments: [
        ("round_robin", UpstreamBalance.roundRobin), ("least_conn", .leastConnections),
        ("hash client_address", .hash(.clientAddress)), ("hash header X-Session", .hash(.header("x-session"))),
        ("hash  header  X-A", .hash(.header("x-a"))),
    ])
    func balanceForms(_ text: String, _ expected: UpstreamBalance) {
        #expect(UpstreamBalance.parse(text) == expected)
    }

    @Test(arguments: ["", "least", "hash", "hash header", "hash header X:Y", "hash cookie x", "round_robin x", "hash client_address x"])
    func balanceFormsRefused(_ text: String) {
        #expect(UpstreamBalance.parse(text) == nil)
    }
}
