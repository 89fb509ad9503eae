import Testing
@testable import ProxyCore

/// Sources a loop wakes and times without a descriptor (`LoopSource`): timers to the
/// millisecond rather than the 100 ms sweep, re-arming without filling the heap, one wake per
/// batch. The loop is turned by hand.
@Suite struct LoopSourceTests {
    final class Probe: LoopSource {
        var fired: [UInt64] = []
        var wakes = 0
        override func onTimer() { fired.append(loop.now) }
        override func onWake() { wakes += 1 }
    }

    static let ms: UInt64 = 1_000_000

    /// Turns `loop` until `done` or `limit` nanoseconds pass.
    func turn(_ loop: EventLoop, for limit: UInt64, until done: () -> Bool = { false }) {
        let end = EventLoop.monotonicNow() + limit
        while !done() && EventLoop.monotonicNow() < end { loop.turn(longestWaitMS: 5) }
    }

    @Test func aTimerFiresToTheMillisecondNotTheSweep() throws {
        let loop = try EventLoop(index: 0)
        var delays: [UInt64] = []
        for _ in 0..<5 {
            loop.turn(longestWaitMS: 0)
            let p = Probe(loop: loop)
            let start = loop.now
            p.arm(at: start + 3 * Self.ms)
            turn(loop, for: 500 * Self.ms, until: { !p.fired.isEmpty })
            #expect(p.fired.count == 1)
            if let at = p.fired.first {
                #expect(at >= start + 3 * Self.ms, "fired early")
                delays.append(at - start)
            }
        }
        // The sweep would serve it up to 100 ms late; on a busy machine one run may be slow.
        #expect(delays.min()! < 40 * Self.ms, "delays \(delays.map { $0 / Self.ms }) ms")
    }

    @Test func aDeadlinePushedBackFiresOnceAtTheLaterOne() throws {
        let loop = try EventLoop(index: 0)
        let p = Probe(loop: loop)
        let start = loop.now
        p.arm(at: start + 5 * Self.ms)
        p.arm(at: start + 30 * Self.ms)
        turn(loop, for: 300 * Self.ms, until: { !p.fired.isEmpty })
        #expect(p.fired.count == 1)
        #expect(p.fired.first.map { $0 >= start + 30 * Self.ms } == true)
    }

    @Test func aDeadlineBroughtForwardFiresThenAndItsOldEntryDoesNothing() throws {
        let loop = try EventLoop(index: 0)
        let p = Probe(loop: loop)
        let start = loop.now
        p.arm(at: start + 60 * Self.ms)
        p.arm(at: start + 5 * Self.ms)
        turn(loop, for: 300 * Self.ms, until: { !p.fired.isEmpty })
        #expect(p.fired.first.map { $0 < start + 60 * Self.ms } == true)
        turn(loop, for: 100 * Self.ms)
        #expect(p.fired.count == 1)
        #expect(loop.pendingTimers == 0)
    }

    @Test func aDisarmedTimerDoesNotFire() throws {
        let loop = try EventLoop(index: 0)
        let p = Probe(loop: loop)
        p.arm(at: loop.now + 2 * Self.ms)
        p.disarm()
        turn(loop, for: 30 * Self.ms)
        #expect(p.fired.isEmpty)
    }

    @Test func pushingADeadlineBackOnEveryPacketKeepsOneHeapEntry() throws {
        let loop = try EventLoop(index: 0)
        let p = Probe(loop: loop)
        for i in 0..<10_000 { p.arm(at: loop.now + 50 * Self.ms + UInt64(i)) }
        #expect(loop.pendingTimers == 1)
    }

    @Test func wakesInOneBatchRunOnceAfterIt() throws {
        let loop = try EventLoop(index: 0)
        let p = Probe(loop: loop)
        p.wake()
        p.wake()
        p.wake()
        #expect(p.wakes == 0)
        loop.turn(longestWaitMS: 0)
        #expect(p.wakes == 1)
        p.wake()
        loop.turn(longestWaitMS: 0)
        #expect(p.wakes == 2)
    }
}
