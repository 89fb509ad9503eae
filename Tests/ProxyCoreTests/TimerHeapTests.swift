import Testing
@testable import ProxyCore

@Suite struct TimerHeapTests {
    @Test func timersFireInDeadlineOrderAndTiesInArmingOrder() {
        var heap = TimerHeap()
        var fired: [Int] = []
        for (i, d) in [50, 10, 30, 10, 40, 20].enumerated() {
            heap.push(deadline: UInt64(d)) { fired.append(i) }
        }
        while let t = heap.popExpired(now: 35) { t() }
        #expect(fired == [1, 3, 5, 2])
        while let t = heap.popExpired(now: 100) { t() }
        #expect(fired == [1, 3, 5, 2, 4, 0])
    }

    @Test func cancelledTimersAreDroppedAndTheRestStayOrdered() throws {
        let thread = try EventLoopThread()
        defer { thread.stop(); thread.join() }
        var heap = TimerHeap()
        var fired: [Int] = []
        var handles: [TimerHandle] = []
        for i in 0..<20 {
            let h = TimerHandle(loop: thread.loop)
            handles.append(h)
            heap.push(deadline: UInt64(100 - i), handle: h) { fired.append(i) }
        }
        // Cancel the even ones (directly: TimerHandle.cancel reports to its loop).
        for i in stride(from: 0, to: 20, by: 2) { handles[i].markCancelledForTesting() }
        heap.removeCancelled()
        #expect(heap.count == 10)
        while let t = heap.popExpired(now: 1000) { t() }
        #expect(fired == [19, 17, 15, 13, 11, 9, 7, 5, 3, 1])
    }
}
