import Dispatch
import ProxyCore
import Synchronization
import Testing
@testable import OAuthCallback

/// A server-side session's record written by one request while another changed it: the write
/// made from the older read must not win. Each test holds the late write back (a store that
/// queues it, a provider that answers when told), lets the other change land, then releases it
/// — the interleaving a second loop or instance produces by chance, made certain.
@Suite struct SessionRecordRaceTests {
    let loop = TestLoop.shared
    let storeClock = ManualClock()
    static let start: Int64 = 1_800_000_000

    let now = SecondsClock(SessionRecordRaceTests.start)

    func layer(store: any Store, provider: any IdentityProvider = CountingProvider(), refreshInterval: Int64? = nil) throws -> SessionLayer {
        var oauth = SessionLayerTests.settings()
        oauth.session?.idleTimeoutSeconds = 1_800
        oauth.session?.refreshIntervalSeconds = refreshInterval
        return try SessionLayer(oauth: oauth, store: store, identityProviders: ["google": provider], serverSide: true,
                                log: Logger(level: .error), clock: now.read)
    }

    /// A session record as sign-in writes it, `refreshToken` given, put straight into `store`.
    func signedIn(_ store: MemoryStore, refreshToken: String? = nil) -> [UInt8] {
        let id = [UInt8](repeating: 5, count: SessionCookie.referenceLength)
        var s = ProxySession(provider: "google", subject: "110169484474386276334", email: "jane@example.com",
                             emailVerified: true, issuedAt: Self.start, expiresAt: Self.start + 86_400)
        s.seenAt = Self.start
        s.refreshToken = refreshToken
        s.refreshClient = refreshToken.map { _ in "web" }
        s.refreshedAt = Self.start
        let record = SessionCookie.payload(s).serialized()
        _ = loop.ask { store.set(key: SessionLayer.storeKey(id), value: record, ttlSeconds: 1_800, on: $0, $1) }
        return id
    }

    func record(_ store: MemoryStore, _ id: [UInt8]) -> ProxySession? {
        let bytes = loop.ask { store.get(key: SessionLayer.storeKey(id), on: $0, $1) }
        return (try? bytes?.get()).flatMap { $0 }.flatMap { (try? JSONParser.parse($0)).flatMap(SessionCookie.session(from:)) }
    }

    func signOut(_ layer: SessionLayer, _ id: [UInt8]) throws -> Response? {
        let headers = try layer.cookie.setCookies(reference: id, maxAge: 3_600).map { (name: "Set-Cookie", value: $0) }
        let jar = SessionLayerTests().setCookies(Response(status: 200, headers: headers))
        return loop.ask { loop, done in layer.signOut(cookies: jar, rd: "/bye", on: loop) { done($0) } }
    }

    @Test func aTouchFromBeforeASignOutDoesNotBringTheSessionBack() throws {
        let memory = MemoryStore(clock: storeClock.read)
        let held = HeldWritesStore(inner: memory)
        let layer = try layer(store: held)
        let id = signedIn(memory)
        now.advance(120)    // past the touch interval (a minute)
        held.holding = true
        let found = loop.ask { loop, done in layer.lookup(id, on: loop) { done($0) } }
        #expect(try found?.get()?.subject == "110169484474386276334")
        #expect(held.count == 1, "the request's touch is on its way")
        #expect(try signOut(layer, id)?.status == 302)
        held.release(on: loop)
        #expect(record(memory, id) == nil, "the late touch revived a signed-out session")
        let again = loop.ask { loop, done in layer.lookup(id, on: loop) { done($0) } }
        #expect(try again?.get() == nil)
    }

    @Test func aTouchFromBeforeARefreshLeavesTheRotatedTokenInPlace() throws {
        let memory = MemoryStore(clock: storeClock.read)
        let held = HeldWritesStore(inner: memory)
        let layer = try layer(store: held)
        let id = signedIn(memory, refreshToken: "rt-1")
        now.advance(120)
        held.holding = true
        _ = loop.ask { loop, done in layer.lookup(id, on: loop) { done($0) } }
        #expect(held.count == 1)
        // Meanwhile another request's refresh wrote the record with the token the IdP rotated to.
        var rotated = try #require(record(memory, id))
        rotated.refreshToken = "rt-2"
        rotated.refreshedAt = Self.start + 120
        let bytes = SessionCookie.payload(rotated).serialized()
        _ = loop.ask { memory.set(key: SessionLayer.storeKey(id), value: bytes, ttlSeconds: 1_800, on: $0, $1) }
        held.release(on: loop)
        #expect(record(memory, id)?.refreshToken == "rt-2", "the touch put the rotated-out token back")
    }

    @Test func aRefreshAnsweredAfterASignOutDoesNotBringTheSessionBack() throws {
        let memory = MemoryStore(clock: storeClock.read)
        let provider = HeldRefreshProvider()
        let layer = try layer(store: memory, provider: provider, refreshInterval: 600)
        let id = signedIn(memory, refreshToken: "rt-1")
        now.advance(700)    // due
        let result = Mutex<Result<ProxySession?, StoreError>?>(nil)
        let answered = DispatchSemaphore(value: 0)
        loop.loop.execute {
            layer.lookup(id, on: self.loop.loop) { r in
                result.withLock { $0 = r }
                answered.signal()
            }
        }
        #expect(provider.waitForRequest(), "the refresh did not reach the provider")
        #expect(try signOut(layer, id)?.status == 302)
        provider.answer(.renewed(RefreshedIdentity(tokens: TokenResponse(accessToken: "at-2", refreshToken: "rt-2"), claims: nil)),
                        on: loop.loop)
        #expect(answered.wait(timeout: .now() + .seconds(5)) == .success)
        #expect(try result.withLock { $0 }?.get() == nil, "served as signed in after the sign-out")
        #expect(record(memory, id) == nil, "the refresh's write revived a signed-out session")
    }
}

/// The session layer's clock (seconds since the epoch), moved by the test.
final class SecondsClock: Sendable {
    private let seconds: Atomic<Int64>

    init(_ start: Int64) { seconds = Atomic(start) }

    var read: @Sendable () -> Int64 { { self.seconds.load(ordering: .sequentiallyConsistent) } }

    func advance(_ delta: Int64) { seconds.add(delta, ordering: .sequentiallyConsistent) }
}

/// Passes everything to `inner`, but while `holding`, keeps `set` and `replace` calls back
/// until `release` (a write on its way to Redis while other commands overtake it). Not holding,
/// a plain pass-through (StoreProbeTests builds a faulty store on it).
class HeldWritesStore: Store, @unchecked Sendable {
    let inner: any Store
    private let state = Mutex<(holding: Bool, queue: [@Sendable () -> Void])>((false, []))

    init(inner: any Store) { self.inner = inner }

    var holding: Bool {
        get { state.withLock { $0.holding } }
        set { state.withLock { $0.holding = newValue } }
    }

    var count: Int { state.withLock { $0.queue.count } }

    /// Runs what was held, in order, on the loop (the Store contract), and stops holding.
    func release(on loop: TestLoop) {
        let queue = state.withLock { s in
            defer { s = (false, []) }
            return s.queue
        }
        _ = loop.ask { _, done in
            for write in queue { write() }
            done(())
        }
    }

    /// Runs `write` now, or queues it while holding.
    private func hold(_ write: @escaping @Sendable () -> Void) {
        let now = state.withLock { s -> Bool in
            guard s.holding else { return true }
            s.queue.append(write)
            return false
        }
        if now { write() }
    }

    func setIfAbsent(key: String, value: [UInt8], ttlSeconds: Int64, on loop: EventLoop,
                     _ completion: @escaping (Result<Bool, StoreError>) -> Void) {
        inner.setIfAbsent(key: key, value: value, ttlSeconds: ttlSeconds, on: loop, completion)
    }
    func getAndDelete(key: String, on loop: EventLoop, _ completion: @escaping (Result<[UInt8]?, StoreError>) -> Void) {
        inner.getAndDelete(key: key, on: loop, completion)
    }
    func get(key: String, on loop: EventLoop, _ completion: @escaping (Result<[UInt8]?, StoreError>) -> Void) {
        inner.get(key: key, on: loop, completion)
    }
    func set(key: String, value: [UInt8], ttlSeconds: Int64, on loop: EventLoop,
             _ completion: @escaping (Result<Void, StoreError>) -> Void) {
        nonisolated(unsafe) let completion = completion
        let inner = self.inner
        hold { inner.set(key: key, value: value, ttlSeconds: ttlSeconds, on: loop, completion) }
    }
    func replace(key: String, value: [UInt8], ttlSeconds: Int64, ifHolding expected: [UInt8]?, on loop: EventLoop,
                 _ completion: @escaping (Result<Bool, StoreError>) -> Void) {
        nonisolated(unsafe) let completion = completion
        let inner = self.inner
        hold { inner.replace(key: key, value: value, ttlSeconds: ttlSeconds, ifHolding: expected, on: loop, completion) }
    }
    func delete(key: String, on loop: EventLoop, _ completion: @escaping (Result<Bool, StoreError>) -> Void) {
        inner.delete(key: key, on: loop, completion)
    }
}

/// A provider whose refresh answers only when the test says so, with what it says.
final class HeldRefreshProvider: IdentityProvider, SessionRefreshing, @unchecked Sendable {
    private nonisolated(unsafe) var pending: [(RefreshResult) -> Void] = []
    private let lock = Mutex(())
    private let requested = DispatchSemaphore(value: 0)

    func redeem(_ request: ExchangeRequest, on loop: EventLoop,
                _ completion: @escaping (Result<VerifiedIdentity, CallbackFailure>) -> Void) {
        nonisolated(unsafe) let completion = completion
        loop.execute { completion(.failure(CallbackFailure(.idp, code: "unused", userMessage: "", logDetail: "not in these tests"))) }
    }

    func refresh(_ request: RefreshRequest, on loop: EventLoop, _ completion: @escaping (RefreshResult) -> Void) {
        lock.withLock { _ in pending.append(completion) }
        requested.signal()
    }

    func waitForRequest() -> Bool { requested.wait(timeout: .now() + .seconds(5)) == .success }

    func answer(_ result: RefreshResult, on loop: EventLoop) {
        nonisolated(unsafe) let waiting = lock.withLock { _ in
            defer { pending.removeAll() }
            return pending
        }
        loop.execute { for completion in waiting { completion(result) } }
    }
}
