import Testing
@testable import ProxyCore

@Suite struct UpstreamBalancerTests {
    static let second: UInt64 = 1_000_000_000

    static func group(_ servers: [(port: UInt16, weight: Int, backup: Bool)], health: UpstreamHealthSettings = .init()) -> UpstreamGroup {
        let list = servers.map {
            UpstreamServer(target: UpstreamTarget(address: .ipv4(host: "127.0.0.1", port: $0.port)), weight: $0.weight, backup: $0.backup)
        }
        return UpstreamGroup(servers: list, resolvers: list.map { _ in nil }, health: health,
                             log: Logger(level: .error), metrics: MetricsRegistry())
    }

    static func picks(_ b: UpstreamBalancer, _ n: Int, now: UInt64 = 100 * second) -> [Int] {
        (0..<n).map { _ in b.pick(now: now, excluding: 0) ?? -1 }
    }

    @Test func weightsInterleaveRatherThanBurst() {
        let b = UpstreamBalancer(group: Self.group([(1, 5, false), (2, 1, false), (3, 1, false)]), capacity: 8, tls: nil)
        // nginx's smooth weighted round robin for 5:1:1 — a a b a c a a, repeated.
        #expect(Self.picks(b, 14) == [0, 0, 1, 0, 2, 0, 0, 0, 0, 1, 0, 2, 0, 0])
    }

    @Test func backupsOnlyWhenNoOtherMayAndTriedServersAreSkipped() {
        let g = Self.group([(1, 1, false), (2, 1, false), (3, 1, true)])
        let b = UpstreamBalancer(group: g, capacity: 8, tls: nil)
        #expect(!Self.picks(b, 6).contains(2))
        // A request that tried 0 goes to 1; one that tried both primaries, to the backup.
        #expect(b.pick(now: 100 * Self.second, excluding: 0b001) == 1)
        #expect(b.pick(now: 100 * Self.second, excluding: 0b011) == 2)
        #expect(b.pick(now: 100 * Self.second, excluding: 0b111) == nil)
    }

    @Test func passiveHealthTakesAServerOutForFailTimeoutAfterMaxFails() {
        var health = UpstreamHealthSettings()
        health.maxFails = 2
        health.failTimeout = 10 * Self.second
        let g = Self.group([(1, 1, false), (2, 1, false)], health: health)
        let b = UpstreamBalancer(group: g, capacity: 8, tls: nil)
        let t0 = 100 * Self.second
        g.failed(1, .status, "answered 503", now: t0)
        #expect(Set(Self.picks(b, 4, now: t0)) == [0, 1], "one failure of two allowed")
        g.failed(1, .connect, "refused", now: t0 + Self.second)
        #expect(Self.picks(b, 4, now: t0 + Self.second) == [0, 0, 0, 0])
        #expect(g.states(now: t0 + Self.second)[1].problem == "connect: refused")
        // Back after fail_timeout.
        #expect(Set(Self.picks(b, 4, now: t0 + 12 * Self.second)) == [0, 1])
        // Failures further apart than fail_timeout never add up.
        g.failed(1, .status, "answered 503", now: t0 + 20 * Self.second)
        g.failed(1, .status, "answered 503", now: t0 + 31 * Self.second)
        #expect(Set(Self.picks(b, 4, now: t0 + 31 * Self.second)) == [0, 1])
    }

    @Test func oneServerIsNeverTakenOutByPassiveHealth() {
        let g = Self.group([(1, 1, false)])
        let b = UpstreamBalancer(group: g, capacity: 8, tls: nil)
        for _ in 0..<5 { g.failed(0, .status, "answered 503", now: 100 * Self.second) }
        #expect(g.countsStatus(503) == false)
        #expect(b.pick(now: 100 * Self.second, excluding: 0) == 0)
    }

    @Test func everyServerOutLeavesNoneToPick() {
        let g = Self.group([(1, 1, false), (2, 1, true)])
        let b = UpstreamBalancer(group: g, capacity: 8, tls: nil)
        let now = 100 * Self.second
        g.failed(0, .connect, "refused", now: now)
        g.failed(1, .connect, "refused", now: now)
        #expect(b.pick(now: now, excluding: 0) == nil)
        #expect(!g.anyAvailable(now: now))
    }
}
