import Testing
@testable import ProxyCore

/// The budget of QUIC work without progress (`QUICWorkGuard`): which packets cost, what earns
/// units back, and that the budget refills with time.
@Suite struct QUICWorkGuardTests {
    static let second: UInt64 = 1_000_000_000
    let limits = GlitchBudget.Limits(burst: 10, perSecond: 5)

    /// One packet: `progress` bytes delivered or acknowledged in it (nil: nothing moved).
    func packet(_ g: inout QUICWorkGuard, progress: Int? = nil, at now: UInt64 = 1) -> QUICWorkGuard.Glitch? {
        g.packetBegins()
        if let progress { g.progress(bytes: progress) }
        return g.packetEnds(now: now)
    }

    @Test func packetsThatBringNothingSpendTheBurstThenEndTheConnection() {
        var g = QUICWorkGuard(limits: limits, now: 1)
        for _ in 0..<10 { #expect(packet(&g) == nil) }
        #expect(packet(&g) == .emptyPacket)
        #expect(g.exhausted == .emptyPacket)
    }

    @Test func packetsThatMoveDataForwardAreFreeHoweverMany() {
        var g = QUICWorkGuard(limits: limits, now: 1)
        for _ in 0..<10_000 { #expect(packet(&g, progress: 30) == nil) }
        // Handshake data is progress too (it carries no stream bytes).
        for _ in 0..<100 { #expect(packet(&g, progress: 0) == nil) }
        #expect(g.exhausted == nil)
    }

    @Test func theBudgetRefillsWithTime() {
        var g = QUICWorkGuard(limits: limits, now: 1)
        for _ in 0..<10 { #expect(packet(&g, at: 1) == nil) }
        // Half a second later: 2.5 units back, so two more packets, not three.
        let later = 1 + Self.second / 2
        #expect(packet(&g, at: later) == nil)
        #expect(packet(&g, at: later) == nil)
        #expect(packet(&g, at: later) == .emptyPacket)
    }

    @Test func theRefillStopsAtTheBurst() {
        var g = QUICWorkGuard(limits: limits, now: 1)
        // An hour of quiet buys no more than the burst.
        let later = 1 + 3600 * Self.second
        for _ in 0..<10 { #expect(packet(&g, at: later) == nil) }
        #expect(packet(&g, at: later) == .emptyPacket)
    }

    @Test func packetsOutOfOrderAfterALossEarnTheirUnitsBackWhenTheGapFills() {
        // A lossy upload: 9 packets arrive after a lost one, each carrying 1200 bytes that cannot
        // be delivered yet (they cost), then the retransmission delivers all 10 packets' bytes.
        var g = QUICWorkGuard(limits: limits, now: 1)
        for _ in 0..<4 {
            for _ in 0..<9 { #expect(packet(&g) == nil) }
            #expect(packet(&g, progress: 10 * 1200) == nil)
        }
        #expect(g.exhausted == nil)
        // Without the refund, the second loss would already have emptied the budget.
        var without = QUICWorkGuard(limits: limits, now: 1)
        for _ in 0..<2 {
            for _ in 0..<9 { _ = packet(&without) }
            _ = packet(&without, progress: 10)
        }
        #expect(without.exhausted == .emptyPacket)
    }

    @Test func dataEarnsNoMoreThanTheBurst() {
        var g = QUICWorkGuard(limits: limits, now: 1)
        #expect(packet(&g, progress: 1 << 30) == nil)  // a gigabyte delivered
        for _ in 0..<10 { #expect(packet(&g) == nil) }
        #expect(packet(&g) == .emptyPacket)
    }

    @Test func resetsAndConnectionIDsCostEvenInAPacketThatMadeProgress() {
        var g = QUICWorkGuard(limits: limits, now: 1)
        g.packetBegins()
        g.progress(bytes: 100)
        for _ in 0..<10 { g.charge(.streamReset, now: 1) }
        #expect(g.packetEnds(now: 1) == nil)
        g.packetBegins()
        g.progress(bytes: 100)
        g.charge(.connectionID, now: 1)
        #expect(g.packetEnds(now: 1) == .connectionID)
    }

    /// ngtcp2 issues up to seven spare IDs when the handshake completes (eight, its pool, less the
    /// handshake's own), to a client that allows eight (aioquic, ngtcp2's client): an honest
    /// connection's IDs cost nothing. Each replacement for an ID the client retired costs a unit.
    @Test func theHandshakesSpareConnectionIDsAreFreeAndEachReplacementCosts() {
        var g = QUICWorkGuard(limits: limits, now: 1)
        for _ in 0..<7 { g.connectionIDIssued(now: 1) }
        #expect(g.charged == 0)
        g.connectionIDIssued(now: 1)
        g.connectionIDIssued(now: 1)
        #expect(g.charged == 2)
        for _ in 0..<8 { g.connectionIDIssued(now: 1) }
        #expect(g.exhausted == nil)  // ten units: the burst
        g.connectionIDIssued(now: 1)
        #expect(g.exhausted == .connectionID)
    }

    @Test func theFirstGlitchToFindTheBudgetEmptyIsTheOneReported() {
        var g = QUICWorkGuard(limits: limits, now: 1)
        g.packetBegins()
        for _ in 0..<11 { g.charge(.streamReset, now: 1) }
        #expect(g.packetEnds(now: 1) == .streamReset)
        #expect(g.exhausted == .streamReset)
    }
}
