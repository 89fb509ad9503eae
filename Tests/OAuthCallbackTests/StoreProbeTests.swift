import ProxyCore
import Testing
@testable import OAuthCallback

/// `check --online`'s store probe, on the stores that need no server (the Redis ones run in
/// test_redis_store.py against real redis-server processes).
@Suite struct StoreProbeTests {
    let loop = TestLoop.shared

    @Test func aWorkingStorePassesEveryStepAndKeepsNothing() {
        let store = MemoryStore(clock: ManualClock().read)
        let found = loop.ask { loop, done in StoreProbe.run(store, on: loop) { done($0) } }
        #expect(found == [])
        #expect(store.entryCount == 0, "the check key was left behind")
    }

    @Test func theFirstFailingCommandIsNamedWithTheStoresReason() {
        let found = loop.ask { loop, done in StoreProbe.run(FailingStore(.unavailable), on: loop) { done($0) } }
        #expect(found == [ProviderProbe.Problem(setting: "store", message:
            "SET NX (then WAIT, with store_wait_replicas) on a check key failed: store unavailable: test double")])
    }

    @Test func aStoreThatDoesNotCompareAndSetIsCaught() {
        // Replaces whatever it holds: the compare-and-set step must notice nothing.
        let found = loop.ask { loop, done in StoreProbe.run(IgnoresExpected(), on: loop) { done($0) } }
        #expect(found?.first?.message.hasPrefix("EVAL (the compare-and-set script) on a check key failed") == true, "\(found ?? [])")
    }
}

/// A store whose `replace` with an expected value never replaces (a script the server refused
/// silently, say): everything else passes to the memory store.
private final class IgnoresExpected: HeldWritesStore, @unchecked Sendable {
    init() { super.init(inner: MemoryStore(clock: ManualClock().read)) }

    override func replace(key: String, value: [UInt8], ttlSeconds: Int64, ifHolding expected: [UInt8]?, on loop: EventLoop,
                          _ completion: @escaping (Result<Bool, StoreError>) -> Void) {
        super.replace(key: key, value: value, ttlSeconds: ttlSeconds, ifHolding: expected.map { _ in [] }, on: loop, completion)
    }
}
