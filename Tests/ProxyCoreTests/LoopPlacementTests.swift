import Testing
@testable import ProxyCore

@Suite struct LoopPlacementTests {
    @Test func aLoopKeepsItsConnectionUnlessAnotherHoldsFewer() {
        #expect(LoopPlacement.target(own: 0, loads: [3, 3]) == nil)
        #expect(LoopPlacement.target(own: 0, loads: [2, 3]) == nil)
        #expect(LoopPlacement.target(own: 0, loads: [4, 3]) == 1)
        #expect(LoopPlacement.target(own: 1, loads: [0, 1]) == 0)
    }

    @Test func theLeastLoadedOfSeveralIsChosen() {
        #expect(LoopPlacement.target(own: 2, loads: [5, 2, 6, 3]) == 1)
        #expect(LoopPlacement.target(own: 0, loads: [7]) == nil)
    }

    @Test func anEighthOfTheLoadIsToleratedBeforeMoving() {
        // Under load the hash evens itself out: small differences are not worth a wake-up.
        #expect(LoopPlacement.target(own: 0, loads: [80, 70]) == nil)
        #expect(LoopPlacement.target(own: 0, loads: [80, 69]) == 1)
        #expect(LoopPlacement.target(own: 0, loads: [500, 438]) == nil)
        #expect(LoopPlacement.target(own: 0, loads: [500, 437]) == 1)
    }

    /// Every way the kernel's hash could place 10 connections on 2 loops ends 5:5 — the
    /// imbalance `LoopPlacement` exists for (7:3 or worse in a third of them by the hash alone).
    @Test func anyHashPlacementOfTenConnectionsEndsEven() {
        for pattern in 0..<(1 << 10) {
            var loads = [0, 0]
            for i in 0..<10 {
                let accepted = (pattern >> i) & 1
                loads[LoopPlacement.target(own: accepted, loads: loads) ?? accepted] += 1
            }
            #expect(loads == [5, 5], "pattern \(pattern)")
        }
    }

    /// With many connections the spread stays within the tolerance wherever they arrive.
    @Test func aThousandConnectionsOnOneLoopsSocketSpreadOverFour() {
        var loads = [0, 0, 0, 0]
        for _ in 0..<1000 { loads[LoopPlacement.target(own: 0, loads: loads) ?? 0] += 1 }
        #expect(loads.reduce(0, +) == 1000)
        #expect(loads.max()! - loads.min()! <= LoopPlacement.slack(loads.max()!) + 1, "\(loads)")
    }
}
