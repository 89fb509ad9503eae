import Testing
@testable import ProxyCore

@Suite struct BufferPoolTests {
    @Test func aTrimGivesBackOnlyWhatStayedUnusedThroughTheInterval() {
        let pool = BufferPool(limit: 512, keep: 16)
        var taken = (0..<100).map { _ in pool.take() }
        for i in taken.indices { pool.recycle(&taken[i]) }
        #expect(pool.count == 100)
        // The burst used every buffer: none was idle through this interval.
        #expect(pool.trim() == 0 && pool.count == 100)
        // Nothing taken since: all but `keep` go.
        #expect(pool.trim() == 84 && pool.count == 16)
        // Steady use of 5 at a time: the 11 never taken go, but never below `keep`.
        var five = (0..<5).map { _ in pool.take() }
        for i in five.indices { pool.recycle(&five[i]) }
        #expect(pool.trim() == 0 && pool.count == 16)
    }

    @Test func steadyUseKeepsWhatItCyclesThrough() {
        let pool = BufferPool(limit: 512, keep: 4)
        var warm = (0..<40).map { _ in pool.take() }
        for i in warm.indices { pool.recycle(&warm[i]) }
        _ = pool.trim()  // sets the low-water mark at 40
        var thirty = (0..<30).map { _ in pool.take() }
        for i in thirty.indices { pool.recycle(&thirty[i]) }
        #expect(pool.trim() == 10 && pool.count == 30, "the 10 never taken go, the 30 in use stay")
    }
}

@Suite struct RequestStatePoolTests {
    @Test func aRecycledStateComesBackWithItsFieldListsRoomAndTheConnectionKeepsNone() {
        let pool = RequestStatePool(limit: 1)
        let buffers = BufferPool()
        var state: RequestState? = pool.take()
        state!.head.headers.reserveCapacity(16)
        let first = ObjectIdentifier(state!)
        pool.recycle(&state, buffers: buffers)
        #expect(state == nil, "an idle connection holds no request state")
        let again = pool.take()
        #expect(ObjectIdentifier(again) == first && again.head.headers.capacity >= 16)
        #expect(ObjectIdentifier(pool.take()) != first, "an empty pool makes a new one")
        var a: RequestState? = RequestState(), b: RequestState? = RequestState()
        pool.recycle(&a, buffers: buffers)
        pool.recycle(&b, buffers: buffers)
        #expect(pool.count == 1, "beyond its limit a state is freed")
    }

    @Test func recyclingGivesTheBuffersBackAndDropsACollectionCutShort() {
        let pool = RequestStatePool()
        let buffers = BufferPool()
        var state: RequestState? = pool.take()
        state!.headStore = buffers.take()
        state!.upstreamHead = buffers.take()
        state!.collected.append("partial body")
        state!.collectHandler = { _, _ in }
        pool.recycle(&state, buffers: buffers)
        #expect(buffers.count == 2, "the head buffers went back to the loop's pool")
        let again = pool.take()
        #expect(again.headStore.base == nil && again.upstreamHead.base == nil)
        #expect(again.collected.base == nil && again.collectHandler == nil)
    }
}
