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

@Suite struct HeaderListPoolTests {
    @Test func aRecycledListComesBackEmptyWithItsRoomAndTheConnectionKeepsNone() {
        let pool = HeaderListPool(limit: 2)
        var list: [HeaderField] = []
        list.reserveCapacity(16)
        list.append(HeaderField(name: ByteRange(start: 0, count: 4), value: ByteRange(start: 6, count: 1)))
        pool.recycle(&list)
        #expect(list.capacity == 0, "an idle connection holds no list")
        let again = pool.take()
        #expect(again.isEmpty && again.capacity >= 16)
        #expect(pool.take().capacity == 0, "an empty pool hands out an empty list")
    }

    @Test func beyondItsLimitListsGoBackToTheAllocator() {
        let pool = HeaderListPool(limit: 1)
        var a = [HeaderField](), b = [HeaderField]()
        a.reserveCapacity(4)
        b.reserveCapacity(4)
        pool.recycle(&a)
        pool.recycle(&b)
        #expect(a.capacity == 0 && b.capacity == 0)
        #expect(pool.take().capacity >= 4)
        #expect(pool.take().capacity == 0)
    }
}
