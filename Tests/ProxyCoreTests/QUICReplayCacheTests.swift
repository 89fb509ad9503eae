import Testing
@testable import ProxyCore

/// The ClientHellos that brought early data, for GnuTLS's anti-replay check: a second one within
/// its window is a replay, an expired one is not, and a full cache refuses (fails closed).
@Suite struct QUICReplayCacheTests {
    @Test func theSameClientHelloWithinItsWindowIsAReplay() {
        let cache = QUICReplayCache()
        #expect(cache.add([1, 2, 3], expires: 110, now: 100))
        #expect(!cache.add([1, 2, 3], expires: 120, now: 105))
        #expect(cache.add([1, 2, 4], expires: 120, now: 105))
    }

    @Test func afterItsWindowItIsNewAgain() {
        let cache = QUICReplayCache()
        #expect(cache.add([9], expires: 110, now: 100))
        #expect(cache.add([9], expires: 130, now: 110))
        #expect(!cache.add([9], expires: 140, now: 120))
    }

    @Test func aFullCacheDropsExpiredEntriesAndRefusesWhenNoneHaveExpired() {
        let cache = QUICReplayCache()
        for i in 0..<QUICReplayCache.capacity {
            #expect(cache.add(withUnsafeBytes(of: UInt32(i)) { Array($0) }, expires: i < 10 ? 105 : 200, now: 100))
        }
        // Full, nothing expired yet: refused.
        #expect(!cache.add([0xff, 0xff, 0xff, 0xff, 0xff], expires: 300, now: 101))
        // Ten have expired: room again.
        #expect(cache.add([0xff, 0xff, 0xff, 0xff, 0xff], expires: 300, now: 106))
        #expect(cache.count == QUICReplayCache.capacity - 9)
    }
}
