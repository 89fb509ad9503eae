import ProxyCore
import Synchronization
import Testing
@testable import OAuthCallback

@Suite struct ReplayGuardTests {
    let loop = TestLoop.shared
    let clock = ManualClock()
    let code = "4/0AX4XfWhSECRETCODE-replay"

    func admit(_ guardian: ReplayGuard, provider: String = "google", code: String? = nil) -> Result<Void, CallbackFailure>? {
        let code = code ?? self.code
        return loop.ask { guardian.admit(provider: provider, code: code, on: $0, $1) }
    }

    /// True only for an answer that admitted the code (not for a missing answer).
    func admitted(_ answer: Result<Void, CallbackFailure>?) -> Bool {
        if case .success? = answer { return true }
        return false
    }

    @Test func theFirstArrivalOfACodeIsAdmitted() {
        let guardian = ReplayGuard(store: MemoryStore(clock: clock.read), windowSeconds: 600)
        #expect(admitted(admit(guardian)))
    }

    @Test func aSecondArrivalOfTheSameCodeIsRefusedAsAReplay() throws {
        let guardian = ReplayGuard(store: MemoryStore(clock: clock.read), windowSeconds: 600)
        #expect(admitted(admit(guardian)))
        let failure = try #require(admit(guardian)?.failure)
        #expect(failure.source == .client)
        #expect(failure.code == "replayed_code")
        #expect(failure.status == 400)
        #expect(!failure.logDetail.contains(code))
        #expect(!failure.userMessage.contains(code))
    }

    @Test func theSameCodeFromAnotherProviderIsADifferentCode() {
        let guardian = ReplayGuard(store: MemoryStore(clock: clock.read), windowSeconds: 600)
        #expect(admitted(admit(guardian, provider: "google")))
        #expect(admitted(admit(guardian, provider: "facebook")))
        #expect(admit(guardian, provider: "facebook")?.failure?.code == "replayed_code")
    }

    @Test func aCodeIsRememberedForTheWholeWindowAndForgottenAfter() {
        let guardian = ReplayGuard(store: MemoryStore(clock: clock.read), windowSeconds: 600)
        #expect(admitted(admit(guardian)))
        clock.advance(seconds: 599)
        #expect(admit(guardian)?.failure?.code == "replayed_code")
        clock.advance(seconds: 1)
        #expect(admitted(admit(guardian)))
    }

    @Test func aStoreFailureRefusesTheSignInAsRetryable() throws {
        let guardian = ReplayGuard(store: FailingStore(.unavailable), windowSeconds: 600)
        let failure = try #require(admit(guardian)?.failure)
        #expect(failure.source == .internal)
        #expect(failure.code == "store_unavailable")
        #expect(failure.retryable)
        #expect(failure.status == 503)
    }

    @Test func aFullStoreRefusesTheSignInRatherThanForgettingCodes() throws {
        let store = MemoryStore(limits: MemoryStore.Limits(maxEntries: 1, maxBytes: 1 << 20), clock: clock.read)
        let guardian = ReplayGuard(store: store, windowSeconds: 600)
        #expect(admitted(admit(guardian, code: "first")))
        let failure = try #require(admit(guardian, code: "second")?.failure)
        #expect(failure.code == "store_unavailable")
        #expect(failure.retryable)
        #expect(admit(guardian, code: "first")?.failure?.code == "replayed_code")
    }

    @Test func theStoreSeesAHashedKeyWithTheWindowAsTTLAndNeverTheCode() throws {
        let store = RecordingStore(inner: MemoryStore(clock: clock.read))
        #expect(admitted(admit(ReplayGuard(store: store, windowSeconds: 321))))
        let writes = store.writes
        try #require(writes.count == 1)
        #expect(writes[0].key == ReplayGuard.key(provider: "google", code: code))
        #expect(writes[0].ttlSeconds == 321)
        #expect(!writes[0].key.contains(code))
        #expect(!writes[0].value.contains(Array(code.utf8)))
    }

    @Test func theKeyIsANamespacedSHA256OfProviderAndCode() {
        let key = ReplayGuard.key(provider: "google", code: "abc")
        var input = Array("google".utf8)
        input.append(0)
        input += Array("abc".utf8)
        #expect(key == "replay:" + ReplayGuard.hex(SHA256.hash(input)))
        #expect(key.utf8.count == "replay:".utf8.count + 64)
        #expect(key.dropFirst("replay:".count).allSatisfy { "0123456789abcdef".contains($0) })
    }

    @Test func theProviderCodeBoundaryCannotBeShifted() {
        #expect(ReplayGuard.key(provider: "ab", code: "c") != ReplayGuard.key(provider: "a", code: "bc"))
    }

    @Test func hexMatchesAKnownSHA256() {
        // SHA-256("abc"), FIPS 180-2 appendix B.1.
        #expect(ReplayGuard.hex(SHA256.hash(Array("abc".utf8)))
            == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    }
}

extension Result {
    var failure: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}

// MARK: - Store doubles (also used by the pipeline suite)

/// A store whose every operation fails, as an unreachable Redis would.
final class FailingStore: Store {
    let code: StoreError.Code
    let calls = Atomic<Int>(0)

    init(_ code: StoreError.Code) { self.code = code }

    private func fail<T>(_ loop: EventLoop, _ completion: @escaping (Result<T, StoreError>) -> Void) {
        calls.add(1, ordering: .relaxed)
        nonisolated(unsafe) let completion = completion
        let error = StoreError(code, "test double")
        loop.execute { completion(.failure(error)) }
    }

    func setIfAbsent(key: String, value: [UInt8], ttlSeconds: Int64, on loop: EventLoop,
                     _ completion: @escaping (Result<Bool, StoreError>) -> Void) { fail(loop, completion) }
    func getAndDelete(key: String, on loop: EventLoop, _ completion: @escaping (Result<[UInt8]?, StoreError>) -> Void) {
        fail(loop, completion)
    }
    func get(key: String, on loop: EventLoop, _ completion: @escaping (Result<[UInt8]?, StoreError>) -> Void) {
        fail(loop, completion)
    }
    func set(key: String, value: [UInt8], ttlSeconds: Int64, on loop: EventLoop,
             _ completion: @escaping (Result<Void, StoreError>) -> Void) { fail(loop, completion) }
    func replace(key: String, value: [UInt8], ttlSeconds: Int64, ifHolding expected: [UInt8]?, on loop: EventLoop,
                 _ completion: @escaping (Result<Bool, StoreError>) -> Void) { fail(loop, completion) }
    func delete(key: String, on loop: EventLoop, _ completion: @escaping (Result<Bool, StoreError>) -> Void) {
        fail(loop, completion)
    }
}

/// Passes everything to `inner` and records every call and every write.
final class RecordingStore: Store {
    struct Write: Sendable {
        var key: String
        var value: [UInt8]
        var ttlSeconds: Int64
    }

    let inner: any Store
    private let log = Mutex<(calls: Int, writes: [Write])>((0, []))

    init(inner: any Store) { self.inner = inner }

    var calls: Int { log.withLock { $0.calls } }
    var writes: [Write] { log.withLock { $0.writes } }

    private func note(_ write: Write? = nil) {
        log.withLock {
            $0.calls += 1
            if let write { $0.writes.append(write) }
        }
    }

    func setIfAbsent(key: String, value: [UInt8], ttlSeconds: Int64, on loop: EventLoop,
                     _ completion: @escaping (Result<Bool, StoreError>) -> Void) {
        note(Write(key: key, value: value, ttlSeconds: ttlSeconds))
        inner.setIfAbsent(key: key, value: value, ttlSeconds: ttlSeconds, on: loop, completion)
    }
    func getAndDelete(key: String, on loop: EventLoop, _ completion: @escaping (Result<[UInt8]?, StoreError>) -> Void) {
        note()
        inner.getAndDelete(key: key, on: loop, completion)
    }
    func get(key: String, on loop: EventLoop, _ completion: @escaping (Result<[UInt8]?, StoreError>) -> Void) {
        note()
        inner.get(key: key, on: loop, completion)
    }
    func set(key: String, value: [UInt8], ttlSeconds: Int64, on loop: EventLoop,
             _ completion: @escaping (Result<Void, StoreError>) -> Void) {
        note(Write(key: key, value: value, ttlSeconds: ttlSeconds))
        inner.set(key: key, value: value, ttlSeconds: ttlSeconds, on: loop, completion)
    }
    func replace(key: String, value: [UInt8], ttlSeconds: Int64, ifHolding expected: [UInt8]?, on loop: EventLoop,
                 _ completion: @escaping (Result<Bool, StoreError>) -> Void) {
        note(Write(key: key, value: value, ttlSeconds: ttlSeconds))
        inner.replace(key: key, value: value, ttlSeconds: ttlSeconds, ifHolding: expected, on: loop, completion)
    }
    func delete(key: String, on loop: EventLoop, _ completion: @escaping (Result<Bool, StoreError>) -> Void) {
        note()
        inner.delete(key: key, on: loop, completion)
    }
}
