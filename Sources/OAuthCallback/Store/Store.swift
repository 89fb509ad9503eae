import ProxyCore

/// The state shared by all instances of the proxy (DESIGN §4): replay guards, relay codes,
/// `state` nonces, server-side sessions. The in-memory store serves one instance; Redis
/// serves many.
///
/// Every operation is asynchronous because a network store cannot answer on the spot:
/// - call it on `loop`'s thread (the loop the request runs on);
/// - `completion` runs on `loop`, exactly once, and never before the call has returned (so a
///   caller's state is consistent when it runs, whichever store is behind the protocol);
/// - every entry has a TTL (`ttlSeconds` ≥ 1): nothing in the store lives forever, so a
///   forgotten key can never pin memory or Redis space;
/// - keys are namespaced by their owner (`replay:`, `relay:`, `session:` …) and are printable
///   ASCII: they may appear in logs, so they never contain a secret in the clear (hash it).
public protocol Store: Sendable {
    /// Stores `value` only if `key` holds no live entry. `true` if it was stored, `false` if
    /// the key was already there (the existing entry and its TTL are left alone). Atomic:
    /// of two concurrent calls for one key, exactly one gets `true`.
    func setIfAbsent(key: String, value: [UInt8], ttlSeconds: Int64, on loop: EventLoop,
                     _ completion: @escaping (Result<Bool, StoreError>) -> Void)

    /// `setIfAbsent`, and `true` only once the entry is also on the replicas the store was
    /// configured to wait for (Redis `WAIT`, `store_wait_replicas`): the replay guard's write,
    /// which a failover must not lose. Stores without replicas: `setIfAbsent`.
    func setIfAbsentAcknowledged(key: String, value: [UInt8], ttlSeconds: Int64, on loop: EventLoop,
                                 _ completion: @escaping (Result<Bool, StoreError>) -> Void)

    /// Returns the live value and removes it, atomically (single-use tokens: of two
    /// concurrent calls, at most one gets the value).
    func getAndDelete(key: String, on loop: EventLoop,
                      _ completion: @escaping (Result<[UInt8]?, StoreError>) -> Void)

    func get(key: String, on loop: EventLoop,
             _ completion: @escaping (Result<[UInt8]?, StoreError>) -> Void)

    /// Stores `value`, replacing any entry and its TTL.
    func set(key: String, value: [UInt8], ttlSeconds: Int64, on loop: EventLoop,
             _ completion: @escaping (Result<Void, StoreError>) -> Void)

    /// Replaces a live entry with `value` and `ttlSeconds` — only if there is one, and, when
    /// `expected` is given, only if it holds exactly those bytes. `true` if it was replaced.
    /// Never creates an entry: a record deleted meanwhile (sign-out) stays deleted, and a write
    /// prepared from an older read cannot undo one made since (a rotated refresh token).
    /// Atomic with respect to every other operation on the key.
    func replace(key: String, value: [UInt8], ttlSeconds: Int64, ifHolding expected: [UInt8]?, on loop: EventLoop,
                 _ completion: @escaping (Result<Bool, StoreError>) -> Void)

    /// Removes the entry; `true` if a live one was there.
    func delete(key: String, on loop: EventLoop,
                _ completion: @escaping (Result<Bool, StoreError>) -> Void)
}

extension Store {
    public func setIfAbsentAcknowledged(key: String, value: [UInt8], ttlSeconds: Int64, on loop: EventLoop,
                                        _ completion: @escaping (Result<Bool, StoreError>) -> Void) {
        setIfAbsent(key: key, value: value, ttlSeconds: ttlSeconds, on: loop, completion)
    }
}

/// Why a store operation failed. Callers on the sign-in path fail closed on any of them.
public struct StoreError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Code: String, Sendable {
        /// The store could not be reached or answered with an error.
        case unavailable
        /// The store is full of live entries (memory store at its bound, Redis OOM).
        case capacityExceeded = "capacity_exceeded"
        /// No answer in time.
        case timeout
        /// A bug on our side: empty or oversized key, TTL out of range.
        case invalidArgument = "invalid_argument"
    }

    public var code: Code
    /// For the operator's log; never contains a value.
    public var detail: String

    public init(_ code: Code, _ detail: String) {
        self.code = code
        self.detail = detail
    }

    /// Whether trying again later may help.
    public var retryable: Bool { code != .invalidArgument }

    public var description: String { "store \(code.rawValue): \(detail)" }
}
