import Synchronization
import Testing
@testable import ProxyCore

/// The resolver's bookkeeping with a scripted lookup: which addresses connections get, what a
/// failed lookup keeps, when pools must drop their idle connections. (The real lookup and
/// the fall-over between addresses run against sockets in IntegrationTests/integration/test_upstream_names.py.)
@Suite struct HostResolverTests {
    /// Answers from a script, one per lookup; the last one repeats.
    final class ScriptedLookup: Sendable {
        private let answers: Mutex<[Result<[SocketAddress], LookupError>]>
        let calls = Atomic<Int>(0)
        init(_ answers: [Result<[SocketAddress], LookupError>]) { self.answers = Mutex(answers) }
        func callAsFunction(_ name: String, _ port: UInt16) -> Result<[SocketAddress], LookupError> {
            calls.add(1, ordering: .relaxed)
            return answers.withLock { a in a.count > 1 ? a.removeFirst() : a[0] }
        }
    }

    let a = SocketAddress.ipv4(host: "10.0.0.1", port: 3000)
    let b = SocketAddress.ipv4(host: "10.0.0.2", port: 3000)
    let c = SocketAddress.ipv6(host: "fd00::3", port: 3000)
    let nxdomain = LookupError(name: "app", reason: "Name or service not known")

    func resolver(_ lookup: ScriptedLookup, interval: UInt64 = 0) -> HostResolver {
        HostResolver(name: "app", port: 3000, interval: interval, log: nil) { lookup($0, $1) }
    }

    @Test func resolvesWhenBuiltAndSpreadsNewConnectionsRoundRobin() {
        let lookup = ScriptedLookup([.success([a, b, c])])
        let r = resolver(lookup)
        #expect(lookup.calls.load(ordering: .relaxed) == 1)
        #expect(r.addresses == [a, b, c])
        let picks = (0..<6).map { _ in r.address(after: nil)! }
        #expect(picks == [a, b, c, a, b, c])
    }

    @Test func aFailedAddressMovesToTheNextOneAndWrapsAround() {
        let r = resolver(ScriptedLookup([.success([a, b, c])]))
        #expect(r.address(after: a) == b)
        #expect(r.address(after: b) == c)
        #expect(r.address(after: c) == a)
        // An address no longer in the list (it changed meanwhile): round robin again.
        let gone = SocketAddress.ipv4(host: "10.9.9.9", port: 3000)
        #expect([a, b, c].contains(r.address(after: gone)!))
    }

    @Test func aNameThatDoesNotResolveHasNoAddressAndSaysWhy() {
        let r = resolver(ScriptedLookup([.failure(nxdomain)]))
        #expect(r.addresses.isEmpty)
        #expect(r.address(after: nil) == nil)
        #expect(r.problem == nxdomain)
        #expect(r.count == 0)
    }

    @Test func aFailedLookupKeepsTheLastGoodAddresses() {
        let r = resolver(ScriptedLookup([.success([a, b]), .failure(nxdomain), .success([a, b])]))
        let before = r.generation
        #expect(r.refresh() == nxdomain)
        #expect(r.addresses == [a, b])
        #expect(r.problem == nxdomain)
        #expect(r.generation == before)
        #expect(r.refresh() == nil)
        #expect(r.problem == nil)
        #expect(r.generation == before)
    }

    @Test func onlyAChangedSetMovesTheGeneration() {
        let r = resolver(ScriptedLookup([.success([a]), .success([a]), .success([b]), .success([b])]))
        let g0 = r.generation
        r.refresh()
        #expect(r.generation == g0)
        r.refresh()
        #expect(r.generation == g0 + 1)
        #expect(r.addresses == [b])
        r.refresh()
        #expect(r.generation == g0 + 1)
    }

    @Test func aNameThatResolvesLaterGetsAddresses() {
        let r = resolver(ScriptedLookup([.failure(nxdomain), .success([c])]))
        #expect(r.address(after: nil) == nil)
        r.refresh()
        #expect(r.address(after: nil) == c)
        #expect(r.problem == nil)
    }

    @Test func theRefreshThreadLooksUpAgainAndStops() async throws {
        let lookup = ScriptedLookup([.success([a]), .success([b])])
        let r = resolver(lookup, interval: 20_000_000)  // 20 ms
        try r.start()
        var waited = 0
        while r.addresses != [b] && waited < 200 {
            try await Task.sleep(nanoseconds: 10_000_000)
            waited += 1
        }
        #expect(r.addresses == [b])
        r.stop()
        try await Task.sleep(nanoseconds: 50_000_000)
        let after = lookup.calls.load(ordering: .relaxed)
        try await Task.sleep(nanoseconds: 100_000_000)
        #expect(lookup.calls.load(ordering: .relaxed) == after, "no lookups after stop()")
    }

    @Test func aFailedAddressIsPassedOverForTheFailTimeout() {
        let r = resolver(ScriptedLookup([.success([a, b, c])]))
        let t0: UInt64 = 1_000_000_000_000
        #expect(r.markFailed(b, now: t0), "the first failure is news")
        #expect(!r.markFailed(b, now: t0 + 1), "a second one within the period is not (logged once)")
        let picks = (0..<6).map { _ in r.address(after: nil, now: t0 + 5)! }
        #expect(!picks.contains(b))
        #expect(Set(picks) == [a, c])
        #expect(r.address(after: a, now: t0 + 5) == c, "the next try skips it too")
        // Its period over, it takes its turn again.
        let later = t0 + 1 + HostResolver.failTimeout
        #expect(Set((0..<6).map { _ in r.address(after: nil, now: later)! }) == [a, b, c])
    }

    @Test func whenEveryAddressFailedTheRoundGoesOn() {
        let r = resolver(ScriptedLookup([.success([a, b])]))
        r.markFailed(a, now: 100)
        r.markFailed(b, now: 100)
        #expect(Set((0..<4).map { _ in r.address(after: nil, now: 200)! }) == [a, b])
        #expect(!r.markFailed(c, now: 100), "an address not in the set is ignored")
    }

    @Test func aChangedSetForgetsFailuresOfAddressesThatLeft() {
        let r = resolver(ScriptedLookup([.success([a, b]), .success([a, c]), .success([a, b])]))
        r.markFailed(b, now: 100)
        r.refresh()   // b gone
        r.refresh()   // b back: a fresh address, not a failed one
        #expect(Set((0..<4).map { _ in r.address(after: nil, now: 200)! }) == [a, b])
    }

    @Test func aPoolWithAFixedAddressAlwaysGivesThatOne() {
        let pool = UpstreamPool(target: UpstreamTarget(address: a), resolver: nil, capacity: 4, tls: nil)
        #expect(pool.address(after: nil, now: 0) == a)
        #expect(pool.address(after: a, now: 0) == nil)
        #expect(pool.maxAttempts == 1)
    }

    @Test func aPoolTriesAtMostEightAddresses() {
        let many = (1...20).map { SocketAddress.ipv4(host: "10.0.1.\($0)", port: 3000) }
        let r = resolver(ScriptedLookup([.success(many)]))
        let pool = UpstreamPool(target: UpstreamTarget(name: "app", port: 3000), resolver: r, capacity: 4, tls: nil)
        #expect(pool.maxAttempts == 8)
    }
}

/// The C library's lookup itself, on names every machine has.
@Suite struct NameLookupTests {
    @Test func localhostResolvesToALoopbackAddress() throws {
        let found = try NameLookup.addresses(of: "localhost", port: 8080).get()
        #expect(!found.isEmpty)
        #expect(found.allSatisfy { $0 == .ipv4(host: "127.0.0.1", port: 8080) || $0 == .ipv6(host: "::1", port: 8080) })
    }

    @Test func aReservedNameDoesNotResolve() {
        // RFC 6761 §6.4: .invalid never resolves.
        guard case .failure(let e) = NameLookup.addresses(of: "no-such-host.invalid", port: 80) else {
            Issue.record("no-such-host.invalid resolved")
            return
        }
        #expect(e.name == "no-such-host.invalid")
        #expect(!e.reason.isEmpty)
    }
}
