import ProxyCore
import Synchronization

/// One provider's JWKS URL, fetched through `HTTPFetching` and cached by `JWKSCache`'s rules,
/// and the id_token verification that uses it.
///
/// **State is lock-protected, not per loop.** A provider is one value built once from the
/// configuration and shared by every event loop, and its key set is a property of the IdP,
/// not of a loop: per-loop caches would fetch the same document N times, and — worse — would
/// give every loop its own unknown-`kid` allowance, multiplying by N how often a stream of
/// forged tokens can make us call the IdP. The lock is held only to read or change the cache
/// and the waiter list: never across I/O, never across a signature check, and a login takes
/// it once or twice, so it costs nothing measurable next to the token exchange.
///
/// - While a fetch is in flight, every caller that needs keys (from any loop) waits for that
///   one fetch; each is resumed on its own loop.
/// - A token whose `kid` is not in the cached set triggers one refetch, at most once per
///   `JWKSCache.Policy.unknownKeyRefetchInterval` (the cache decides), and is verified again
///   with the new keys; a second unknown `kid` is refused without another fetch.
public final class JWKSSource: Sendable {
    /// The JWKS document's URL (no secrets: safe to log).
    public let url: String
    /// Names this source in log details, e.g. `google`.
    public let label: String
    private let http: any HTTPFetching
    private let clock: @Sendable () -> Int64
    private let timeout: UInt64
    private let state: Mutex<State>

    private struct State {
        var cache: JWKSCache
        /// Bumped by every successful fetch, so a caller can tell that keys changed while it
        /// was verifying with older ones.
        var generation: UInt64 = 0
        /// Non-nil while a fetch is in flight: who to resume when it ends.
        var waiters: [LoopCompletion<Void>]? = nil
        /// Why the last fetch failed, for the log detail of `unavailable`.
        var lastProblem: String? = nil
    }

    /// - Parameters:
    ///   - clock: unix seconds; the same clock the verifier uses for `exp`/`iat`.
    ///   - timeout: of one JWKS fetch, in nanoseconds.
    public init(url: String, label: String, http: any HTTPFetching, clock: @escaping @Sendable () -> Int64,
                policy: JWKSCache.Policy = JWKSCache.Policy(), timeout: UInt64 = 10_000_000_000) {
        self.url = url
        self.label = label
        self.http = http
        self.clock = clock
        self.timeout = timeout
        state = Mutex(State(cache: JWKSCache(policy: policy)))
    }

    /// Verifies `token` with `verifier` against this source's keys, fetching them when the
    /// cache says so. `completion` runs on `loop` exactly once, never synchronously inside
    /// this call when a fetch is needed.
    ///
    /// Failures: `invalid_id_token` (the token is not acceptable; not retryable) or
    /// `idp_unavailable` (no keys could be had; retryable).
    public func verify(_ token: String, with verifier: JWTVerifier, expectedNonce: String?, on loop: EventLoop,
                       _ completion: @escaping (Result<VerifiedClaims, CallbackFailure>) -> Void) {
        attempt(Attempt(token: token, verifier: verifier, expectedNonce: expectedNonce),
                waited: false, on: loop, LoopCompletion(loop, completion))
    }

    /// The keys a verification would use now, fetching them when needed (for callers that
    /// verify something other than an id_token, and for tests).
    public func currentKeys(on loop: EventLoop, _ completion: @escaping (Result<JWKSet, CallbackFailure>) -> Void) {
        let done = LoopCompletion(loop, completion)
        keys(waited: false, on: loop) { result in
            switch result {
            case .success(let (keys, _)): done.complete(.success(keys), from: loop)
            case .failure(let failure): done.complete(.failure(failure), from: loop)
            }
        }
    }

    /// Callers waiting for the fetch in flight (tests use it to line up concurrent callers).
    var waitingCount: Int { state.withLock { $0.waiters?.count ?? 0 } }

    // MARK: Steps

    private struct Attempt: Sendable {
        let token: String
        let verifier: JWTVerifier
        let expectedNonce: String?
    }

    /// `waited` is true once this verification has waited for a fetch: it then has the
    /// freshest keys there are and must not ask for another.
    private func attempt(_ a: Attempt, waited: Bool, on loop: EventLoop,
                         _ done: LoopCompletion<Result<VerifiedClaims, CallbackFailure>>) {
        keys(waited: waited, on: loop) { [self] result in
            switch result {
            case .failure(let failure):
                done.complete(.failure(failure), from: loop)
            case .success(let (keys, generation)):
                check(a, keys: keys, generation: generation, waited: waited, on: loop, done)
            }
        }
    }

    private func check(_ a: Attempt, keys: JWKSet, generation: UInt64, waited: Bool, on loop: EventLoop,
                       _ done: LoopCompletion<Result<VerifiedClaims, CallbackFailure>>) {
        let now = clock()
        let error: JOSEError
        do {
            let claims = try a.verifier.verify(a.token, keys: keys, now: now, expectedNonce: a.expectedNonce)
            done.complete(.success(claims), from: loop)
            return
        } catch let e {
            error = e
        }
        guard error.refetchingKeysMayHelp, !waited else {
            done.complete(.failure(invalidToken(error)), from: loop)
            return
        }
        enum Next { case retry(JWKSet, UInt64), wait, fetch, refuse }
        let resume = LoopCompletion<Void>(loop) { [self] _ in attempt(a, waited: true, on: loop, done) }
        let next: Next = state.withLock { s in
            // Another caller's fetch brought new keys while we verified with the old ones.
            if s.generation != generation, let keys = s.cache.keys { return .retry(keys, s.generation) }
            if s.waiters != nil {
                s.waiters!.append(resume)
                return .wait
            }
            guard s.cache.shouldRefetchForUnknownKeyID(now: now) else { return .refuse }
            s.waiters = [resume]
            return .fetch
        }
        switch next {
        case .retry(let keys, let newGeneration):
            check(a, keys: keys, generation: newGeneration, waited: true, on: loop, done)
        case .wait:
            break
        case .fetch:
            fetch(on: loop)
        case .refuse:
            done.complete(.failure(invalidToken(error)), from: loop)
        }
    }

    /// Cached keys, or the outcome of the fetch this caller starts or joins. `body` runs on
    /// `loop`, synchronously when the cache answers.
    private func keys(waited: Bool, on loop: EventLoop,
                      _ body: @escaping (Result<(JWKSet, UInt64), CallbackFailure>) -> Void) {
        enum Next { case use(JWKSet, UInt64), wait, fetch, unavailable(String?) }
        let now = clock()
        let resume = LoopCompletion<Void>(loop) { [self] _ in
            // After one fetch the cache's answer is final: fresh keys, stale-if-error keys, or none.
            keys(waited: true, on: loop, body)
        }
        let next: Next = state.withLock { s in
            switch s.cache.decision(now: now) {
            case .useCached(let keys):
                return .use(keys, s.generation)
            case .unavailable:
                return .unavailable(s.lastProblem)
            case .fetch:
                if waited { return .unavailable(s.lastProblem) }
                if s.waiters != nil {
                    s.waiters!.append(resume)
                    return .wait
                }
                s.waiters = [resume]
                return .fetch
            }
        }
        switch next {
        case .use(let keys, let generation): body(.success((keys, generation)))
        case .wait: break
        case .fetch: fetch(on: loop)
        case .unavailable(let problem):
            body(.failure(CallbackFailure(.idp, code: "idp_unavailable", userMessage: ProviderText.unavailable,
                                          logDetail: "\(label) JWKS unavailable: \(problem ?? "no keys")", retryable: true)))
        }
    }

    /// Fetches the document; records the outcome; resumes every waiter on its own loop.
    private func fetch(on loop: EventLoop) {
        let request = OutboundRequest(method: "GET", url: url, headers: [("Accept", "application/json")],
                                      timeout: timeout, idempotent: true, call: .jwks)
        http.fetch(request, on: loop) { [self] result in
            let now = clock()
            var keys: JWKSet? = nil
            var cacheControl: String? = nil
            var problem: String? = nil
            switch result {
            case .success(let response) where response.status == 200:
                do throws(JOSEError) {
                    keys = try JWKSet(json: response.body)
                    cacheControl = response.header("Cache-Control")
                } catch {
                    problem = "\(ProviderText.withoutQuery(url)) refused: \(error.description)"
                }
            case .success(let response):
                problem = "\(ProviderText.withoutQuery(url)) answered HTTP \(response.status)"
            case .failure(let error):
                problem = "\(ProviderText.withoutQuery(url)) fetch failed: \(error.kind.rawValue)"
            }
            let waiters = state.withLock { s -> [LoopCompletion<Void>] in
                if let keys {
                    s.cache.recordFetch(keys, cacheControl: cacheControl, now: now)
                    s.generation &+= 1
                    s.lastProblem = nil
                } else {
                    s.cache.recordFetchFailure(now: now)
                    s.lastProblem = problem
                }
                let waiting = s.waiters ?? []
                s.waiters = nil
                return waiting
            }
            for waiter in waiters { waiter.complete((), from: loop) }
        }
    }

    private func invalidToken(_ error: JOSEError) -> CallbackFailure {
        CallbackFailure(.idp, code: "invalid_id_token", userMessage: ProviderText.notVerified,
                        logDetail: "\(label) id_token refused: \(error.description)")
    }
}

/// A completion that belongs to one event loop and must run there.
///
/// `@unchecked Sendable` because the closure is not: it is only ever *called* on `loop`'s
/// thread (directly when already there, otherwise through `loop.execute`), and merely moved
/// across threads in between — which is what lets waiters from several loops share one fetch.
struct LoopCompletion<Value: Sendable>: @unchecked Sendable {
    let loop: EventLoop
    private let body: (Value) -> Void

    init(_ loop: EventLoop, _ body: @escaping (Value) -> Void) {
        self.loop = loop
        self.body = body
    }

    /// Runs the completion: directly when `current` is its loop (the caller is on that
    /// loop's thread), otherwise queued to its loop.
    func complete(_ value: Value, from current: EventLoop?) {
        if let current, current === loop {
            body(value)
        } else {
            let me = self
            loop.execute { me.body(value) }
        }
    }

    /// Always queued, never run inside the caller's stack (for failures found before any I/O).
    func completeLater(_ value: Value) {
        complete(value, from: nil)
    }
}
