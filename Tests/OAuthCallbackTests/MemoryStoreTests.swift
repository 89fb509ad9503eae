import Dispatch
import ProxyCore
import Synchronization
import Testing
#if canImport(Glibc)
import Glibc
#endif
@testable import OAuthCallback

@Suite struct MemoryStoreTests {
    let loop = TestLoop.shared
    let clock = ManualClock()

    func store(_ limits: MemoryStore.Limits = MemoryStore.Limits()) -> MemoryStore {
        MemoryStore(limits: limits, clock: clock.read)
    }

    // MARK: Operations through a real loop

    @Test func setIfAbsentStoresOnlyTheFirstValue() {
        let store = store()
        #expect(loop.ask { store.setIfAbsent(key: "k", value: [1], ttlSeconds: 60, on: $0, $1) } == .success(true))
        #expect(loop.ask { store.setIfAbsent(key: "k", value: [2], ttlSeconds: 60, on: $0, $1) } == .success(false))
        #expect(loop.ask { store.get(key: "k", on: $0, $1) } == .success([1]))
    }

    @Test func completionRunsOnTheLoopThreadAndOnlyAfterTheCallReturned() {
        let store = store()
        let returned = Atomic<Bool>(false)
        let answer = loop.call { (loop, done: @escaping @Sendable (Bool) -> Void) in
            store.setIfAbsent(key: "k", value: [1], ttlSeconds: 60, on: loop) { _ in
                done(returned.load(ordering: .sequentiallyConsistent))
            }
            returned.store(true, ordering: .sequentiallyConsistent)
        }
        #expect(answer?.onLoopThread == true)
        #expect(answer?.value == true, "the completion ran inside setIfAbsent")
        #expect(answer?.calls == 1)
    }

    @Test func getAndDeleteHandsOutAValueOnce() {
        let store = store()
        _ = loop.ask { store.set(key: "relay:1", value: [7, 8], ttlSeconds: 60, on: $0, $1) }
        #expect(loop.ask { store.getAndDelete(key: "relay:1", on: $0, $1) } == .success([7, 8]))
        #expect(loop.ask { store.getAndDelete(key: "relay:1", on: $0, $1) } == .success(nil))
        #expect(store.entryCount == 0)
        #expect(store.byteCount == 0)
    }

    @Test func setReplacesTheValueAndTheTTL() {
        let store = store()
        _ = loop.ask { store.set(key: "s", value: [1], ttlSeconds: 10, on: $0, $1) }
        clock.advance(seconds: 5)
        _ = loop.ask { store.set(key: "s", value: [2, 2], ttlSeconds: 10, on: $0, $1) }
        clock.advance(seconds: 9)   // 14 s after the first set, 9 s after the second
        #expect(loop.ask { store.get(key: "s", on: $0, $1) } == .success([2, 2]))
        #expect(store.entryCount == 1)
        #expect(store.byteCount == 1 + 2 + MemoryStore.entryOverhead)
    }

    @Test func replaceChangesOnlyALiveEntry_andWithAnExpectedValueOnlyThatOne() {
        let store = store()
        func replace(_ value: [UInt8], ttl: Int64 = 10, ifHolding expected: [UInt8]?) -> Result<Bool, StoreError>? {
            loop.ask { store.replace(key: "s", value: value, ttlSeconds: ttl, ifHolding: expected, on: $0, $1) }
        }
        #expect(replace([1], ifHolding: nil) == .success(false), "never creates an entry")
        #expect(replace([1], ifHolding: [0]) == .success(false))
        #expect(store.entryCount == 0)
        _ = loop.ask { store.set(key: "s", value: [1, 2], ttlSeconds: 10, on: $0, $1) }
        #expect(replace([9], ifHolding: [1, 3]) == .success(false), "holds something else")
        #expect(loop.ask { store.get(key: "s", on: $0, $1) } == .success([1, 2]))
        #expect(replace([3], ttl: 20, ifHolding: [1, 2]) == .success(true))
        clock.advance(seconds: 15)
        #expect(loop.ask { store.get(key: "s", on: $0, $1) } == .success([3]), "with the new TTL")
        #expect(replace([4], ifHolding: nil) == .success(true))
        clock.advance(seconds: 11)
        #expect(replace([5], ifHolding: nil) == .success(false), "an expired entry is not live")
        #expect(loop.ask { store.get(key: "s", on: $0, $1) } == .success(nil))
    }

    @Test func deleteReportsWhetherALiveEntryWasThere() {
        let store = store()
        _ = loop.ask { store.set(key: "d", value: [1], ttlSeconds: 10, on: $0, $1) }
        #expect(loop.ask { store.delete(key: "d", on: $0, $1) } == .success(true))
        #expect(loop.ask { store.delete(key: "d", on: $0, $1) } == .success(false))
        #expect(loop.ask { store.get(key: "d", on: $0, $1) } == .success(nil))
    }

    // MARK: TTL

    @Test func anEntryIsForgottenExactlyWhenItsTTLRunsOut() {
        let store = store()
        #expect(loop.ask { store.setIfAbsent(key: "k", value: [1], ttlSeconds: 10, on: $0, $1) } == .success(true))
        clock.advance(nanoseconds: 9_999_999_999)
        #expect(loop.ask { store.get(key: "k", on: $0, $1) } == .success([1]))
        #expect(loop.ask { store.setIfAbsent(key: "k", value: [2], ttlSeconds: 10, on: $0, $1) } == .success(false))
        clock.advance(nanoseconds: 1)
        #expect(loop.ask { store.get(key: "k", on: $0, $1) } == .success(nil))
        #expect(loop.ask { store.setIfAbsent(key: "k", value: [3], ttlSeconds: 10, on: $0, $1) } == .success(true))
    }

    @Test func expiredEntriesAreNotHandedOutByAnyRead() {
        let store = store()
        _ = loop.ask { store.set(key: "a", value: [1], ttlSeconds: 1, on: $0, $1) }
        _ = loop.ask { store.set(key: "b", value: [1], ttlSeconds: 1, on: $0, $1) }
        clock.advance(seconds: 1)
        #expect(loop.ask { store.getAndDelete(key: "a", on: $0, $1) } == .success(nil))
        #expect(loop.ask { store.delete(key: "b", on: $0, $1) } == .success(false))
    }

    @Test func deadEntriesAreSweptALittleOnEveryOperationWithoutBeingRead() {
        let store = store()
        for i in 0..<40 {
            _ = loop.ask { store.set(key: "old:\(i)", value: [1], ttlSeconds: 1, on: $0, $1) }
        }
        #expect(store.entryCount == 40)
        clock.advance(seconds: 2)
        _ = loop.ask { store.get(key: "unrelated", on: $0, $1) }
        #expect(store.entryCount == 40 - MemoryStore.sweepBudget)
        _ = loop.ask { store.get(key: "unrelated", on: $0, $1) }
        _ = loop.ask { store.get(key: "unrelated", on: $0, $1) }
        #expect(store.entryCount == 0)
        #expect(store.byteCount == 0)
    }

    // MARK: Bounds

    @Test func aFullStoreRefusesNewKeysInsteadOfEvictingLiveOnes() {
        let store = store(MemoryStore.Limits(maxEntries: 3, maxBytes: 1 << 20))
        for key in ["replay:a", "replay:b", "replay:c"] {
            #expect(loop.ask { store.setIfAbsent(key: key, value: [1], ttlSeconds: 60, on: $0, $1) } == .success(true))
        }
        let refused = loop.ask { store.setIfAbsent(key: "replay:d", value: [1], ttlSeconds: 60, on: $0, $1) }
        #expect(refused?.failureCode == .capacityExceeded)
        #expect(refused?.failureRetryable == true)
        #expect(loop.ask { store.set(key: "replay:e", value: [1], ttlSeconds: 60, on: $0, $1) }?.failureCode == .capacityExceeded)
        // Every earlier key is still there: a replay is still recognised as one.
        for key in ["replay:a", "replay:b", "replay:c"] {
            #expect(loop.ask { store.setIfAbsent(key: key, value: [1], ttlSeconds: 60, on: $0, $1) } == .success(false))
        }
        #expect(store.entryCount == 3)
    }

    @Test func aFullStoreAcceptsNewKeysOnceOldOnesHaveExpired() {
        let store = store(MemoryStore.Limits(maxEntries: 2, maxBytes: 1 << 20))
        _ = loop.ask { store.set(key: "short", value: [1], ttlSeconds: 5, on: $0, $1) }
        _ = loop.ask { store.set(key: "long", value: [1], ttlSeconds: 60, on: $0, $1) }
        #expect(loop.ask { store.setIfAbsent(key: "new", value: [1], ttlSeconds: 60, on: $0, $1) }?.failureCode == .capacityExceeded)
        clock.advance(seconds: 5)
        #expect(loop.ask { store.setIfAbsent(key: "new", value: [1], ttlSeconds: 60, on: $0, $1) } == .success(true))
        #expect(loop.ask { store.get(key: "long", on: $0, $1) } == .success([1]))
        #expect(store.entryCount == 2)
    }

    @Test func replacingAnEntryInAFullStoreNeedsNoNewSlot() {
        let store = store(MemoryStore.Limits(maxEntries: 1, maxBytes: 1 << 20))
        _ = loop.ask { store.set(key: "session:1", value: [1], ttlSeconds: 60, on: $0, $1) }
        #expect(loop.ask { store.set(key: "session:1", value: [2], ttlSeconds: 60, on: $0, $1) }?.isSuccess == true)
        #expect(loop.ask { store.get(key: "session:1", on: $0, $1) } == .success([2]))
    }

    @Test func theByteBoundCountsKeysValuesAndOverhead() {
        let overhead = MemoryStore.entryOverhead
        // Room for exactly two entries with a 1-byte key and a 100-byte value.
        let store = store(MemoryStore.Limits(maxEntries: 100, maxBytes: 2 * (1 + 100 + overhead)))
        let value = [UInt8](repeating: 0xAB, count: 100)
        #expect(loop.ask { store.set(key: "a", value: value, ttlSeconds: 60, on: $0, $1) }?.isSuccess == true)
        #expect(loop.ask { store.set(key: "b", value: value, ttlSeconds: 60, on: $0, $1) }?.isSuccess == true)
        #expect(loop.ask { store.set(key: "c", value: [1], ttlSeconds: 60, on: $0, $1) }?.failureCode == .capacityExceeded)
        // Growing an entry past the bound is refused too, and leaves the old value in place.
        #expect(loop.ask { store.set(key: "a", value: value + [1], ttlSeconds: 60, on: $0, $1) }?.failureCode == .capacityExceeded)
        #expect(loop.ask { store.get(key: "a", on: $0, $1) } == .success(value))
        #expect(store.byteCount == 2 * (1 + 100 + overhead))
    }

    @Test func aValueLargerThanTheWholeStoreIsRefused() {
        let store = store(MemoryStore.Limits(maxEntries: 100, maxBytes: 4_096))
        let huge = [UInt8](repeating: 0, count: 4_096)
        #expect(loop.ask { store.set(key: "big", value: huge, ttlSeconds: 60, on: $0, $1) }?.failureCode == .capacityExceeded)
        #expect(store.entryCount == 0)
        #expect(store.byteCount == 0)
    }

    @Test func memoryStaysBoundedUnderAFloodOfDistinctKeys() {
        let limits = MemoryStore.Limits(maxEntries: 1_000, maxBytes: 1 << 20)
        var table = MemoryStore.Table(limits: limits)
        var refused = 0
        for i in 0..<5_000 {
            if case .failure = table.setIfAbsent(key: "replay:\(i)", value: [1], ttlSeconds: 600, now: 0) { refused += 1 }
        }
        #expect(table.entries.count == 1_000)
        #expect(refused == 4_000)
        #expect(table.heapCount == 1_000)
    }

    @Test func rewritingOneKeyDoesNotGrowTheExpiryHeapWithoutBound() {
        var table = MemoryStore.Table(limits: MemoryStore.Limits())
        for i in 0..<10_000 {
            _ = table.set(key: "session:1", value: [UInt8(truncatingIfNeeded: i)], ttlSeconds: 600, now: UInt64(i))
        }
        #expect(table.entries.count == 1)
        #expect(table.heapCount <= 2 * 1 + 1_024 + 1)
    }

    // MARK: Arguments

    static let badKeysAndTTLs: [(key: String, ttl: Int64)] = [
        ("", 60),
        (String(repeating: "k", count: 513), 60),
        ("k", 0),
        ("k", -1),
        ("k", 30 * 24 * 3_600 + 1),
    ]

    @Test(arguments: badKeysAndTTLs)
    func rejectsKeysAndTTLsOutsideTheirRange(key: String, ttl: Int64) {
        let store = store()
        #expect(loop.ask { store.set(key: key, value: [1], ttlSeconds: ttl, on: $0, $1) }?.failureCode == .invalidArgument)
        #expect(loop.ask { store.setIfAbsent(key: key, value: [1], ttlSeconds: ttl, on: $0, $1) }?.failureCode == .invalidArgument)
        #expect(store.entryCount == 0)
    }

    @Test func invalidArgumentsAreNotWorthRetrying() {
        #expect(StoreError(.invalidArgument, "x").retryable == false)
        #expect(StoreError(.unavailable, "x").retryable == true)
        #expect(StoreError(.capacityExceeded, "x").retryable == true)
        #expect(StoreError(.timeout, "x").retryable == true)
    }

    // MARK: Concurrency

    @Test func concurrentSetIfAbsentOnTwoLoopsAdmitsExactlyOne() throws {
        let store = store()
        let other = try TestLoop()
        defer { other.stop() }
        let winners = Atomic<Int>(0)
        let finished = DispatchSemaphore(value: 0)
        let attempts = 200
        for i in 0..<attempts {
            let target = i % 2 == 0 ? loop.loop : other.loop
            target.execute {
                store.setIfAbsent(key: "race", value: [1], ttlSeconds: 60, on: target) { result in
                    if case .success(true) = result { winners.add(1, ordering: .relaxed) }
                    finished.signal()
                }
            }
        }
        for _ in 0..<attempts {
            guard finished.wait(timeout: .now() + .seconds(5)) == .success else {
                Issue.record("a completion never ran")
                return
            }
        }
        #expect(winners.load(ordering: .relaxed) == 1)
    }
}

extension Result where Failure == StoreError {
    var failureCode: StoreError.Code? {
        if case .failure(let error) = self { return error.code }
        return nil
    }

    var failureRetryable: Bool? {
        if case .failure(let error) = self { return error.retryable }
        return nil
    }

    var isSuccess: Bool {
        if case .success = self { return true }
        return false
    }
}

// MARK: - Shared test support (used by the store, replay guard and pipeline suites)

/// Monotonic nanoseconds that move only when a test says so.
final class ManualClock: Sendable {
    private let nanoseconds = Atomic<UInt64>(1_000_000_000_000)

    var now: UInt64 { nanoseconds.load(ordering: .sequentiallyConsistent) }

    var read: @Sendable () -> UInt64 { { self.now } }

    func advance(nanoseconds delta: UInt64) {
        nanoseconds.add(delta, ordering: .sequentiallyConsistent)
    }

    func advance(seconds: UInt64) {
        advance(nanoseconds: seconds * 1_000_000_000)
    }
}

/// A real event loop on its own thread. `call` runs an operation on the loop, waits for its
/// completion (bounded: a completion that never comes fails the test instead of hanging it),
/// and reports whether that completion ran on the loop's thread and how often it ran.
final class TestLoop: Sendable {
    static let shared: TestLoop = {
        do { return try TestLoop() } catch { fatalError("cannot start a test loop: \(error)") }
    }()

    let thread: EventLoopThread
    private let threadID: ThreadIDBox

    var loop: EventLoop { thread.loop }

    init() throws {
        let box = ThreadIDBox()
        threadID = box
        thread = try EventLoopThread(setup: { _ in box.id.withLock { $0 = pthread_self() } })
        // Wait until the setup ran, so `isLoopThread` is never asked too early.
        let ready = DispatchSemaphore(value: 0)
        thread.loop.execute { ready.signal() }
        _ = ready.wait(timeout: .now() + .seconds(5))
    }

    func stop() {
        thread.stop()
        thread.join()
    }

    var isLoopThread: Bool {
        guard let id = threadID.id.withLock({ $0 }) else { return false }
        return pthread_equal(id, pthread_self()) != 0
    }

    struct Answer<T: Sendable>: Sendable {
        var value: T
        var onLoopThread: Bool
        var calls: Int
    }

    /// Runs `operation` on the loop; it must call the completion it is given.
    func call<T: Sendable>(timeout seconds: Int = 5,
                           _ operation: @escaping @Sendable (EventLoop, @escaping @Sendable (T) -> Void) -> Void) -> Answer<T>? {
        let box = AnswerBox<T>()
        let done = DispatchSemaphore(value: 0)
        let loop = self.loop
        loop.execute {
            operation(loop) { value in
                let first = box.record(value, onLoopThread: self.isLoopThread)
                if first { done.signal() }
            }
        }
        guard done.wait(timeout: .now() + .seconds(seconds)) == .success else {
            Issue.record("the completion did not run within \(seconds) s")
            return nil
        }
        // A second, late call would be a bug: let the loop drain what is queued, then count.
        let drained = DispatchSemaphore(value: 0)
        loop.execute { loop.execute { drained.signal() } }
        _ = drained.wait(timeout: .now() + .seconds(seconds))
        return box.answer
    }

    /// `call`, for operations whose completion takes the value directly; nil (and a recorded
    /// issue) unless the completion ran exactly once, on the loop's thread.
    func ask<T: Sendable>(_ operation: @escaping @Sendable (EventLoop, @escaping @Sendable (T) -> Void) -> Void) -> T? {
        guard let answer = call(operation) else { return nil }
        if !answer.onLoopThread { Issue.record("the completion ran off the loop thread") }
        if answer.calls != 1 { Issue.record("the completion ran \(answer.calls) times") }
        return answer.onLoopThread && answer.calls == 1 ? answer.value : nil
    }
}

private final class ThreadIDBox: Sendable {
    let id = Mutex<pthread_t?>(nil)
}

private final class AnswerBox<T: Sendable>: Sendable {
    private let state = Mutex<TestLoop.Answer<T>?>(nil)

    /// True for the first call.
    func record(_ value: T, onLoopThread: Bool) -> Bool {
        state.withLock { answer in
            if answer == nil {
                answer = TestLoop.Answer(value: value, onLoopThread: onLoopThread, calls: 1)
                return true
            }
            answer!.calls += 1
            return false
        }
    }

    var answer: TestLoop.Answer<T>? { state.withLock { $0 } }
}
