import ProxyCore
import Synchronization

/// The sentinels watching one Redis master, shared by every loop's connection of a store
/// (the Redis "Sentinel client spec", followed literally):
///
/// 1. the sentinels are asked in turn, each under a short timeout (`queryTimeout`), for
///    `SENTINEL get-master-addr-by-name MASTER`; the first that answers with an address wins
///    and is asked first next time; a nil answer (it does not know MASTER), an error or a
///    timeout moves on to the next one; when none answers, the attempt fails;
/// 2. the connection to that address sends `ROLE` before any command of ours and is used only
///    if the answer is `master` (`RedisConnection`): a sentinel that has not yet seen a
///    failover, or a stale answer, never makes us write to a replica;
/// 3. every reconnection asks again, and a connection whose server answers `-READONLY`,
///    `-MASTERDOWN` or `-LOADING` is dropped (then asked again) as if it were lost.
///
/// A query is a **short-lived connection** (a `RedisConnection` used for one command, then
/// closed), not a kept one: sentinels are asked only when a loop (re)connects, which is rare
/// in steady state, and a kept connection per sentinel would need its own health checks and
/// reconnects to be worth anything. A failover is noticed when the master's connection is lost
/// or answers one of the errors above (a killed master closes its sockets at once);
/// `+switch-master` is not subscribed to.
///
/// Only IP addresses announced by the sentinels are followed (Sentinel's default): a host name
/// would need a lookup, and lookups never run on a loop.
public final class RedisSentinel: Sendable {
    public let masterName: String
    /// One per configured sentinel, in the configured order; names are kept resolved off the loops.
    private let sentinels: [HostResolver]
    private let password: String?
    /// Set: the sentinels are spoken to over TLS (`store_sentinel_tls`).
    private let tls: UpstreamTLSClient?
    /// How long one sentinel may take to answer (connect included), nanoseconds.
    let queryTimeout: UInt64
    private let logger: Logger?
    private let state: Mutex<State>
    private let changes = Atomic<Int>(0)

    private struct State {
        /// Indices into `sentinels`, the one that answered last first.
        var order: [Int]
        /// The last address a connection verified as the master (`ROLE`).
        var master: SocketAddress?
        /// What each sentinel (by index) answered last.
        var lastAnswer: [Int: SocketAddress] = [:]
    }

    /// Resolves the sentinels' names now (blocking; at set-up). `password`: the sentinels' own
    /// (`requirepass` in sentinel.conf), not the master's.
    init(_ url: RedisSentinelURL, password: String?, tls: UpstreamTLSClient? = nil, queryTimeout: UInt64, logger: Logger?) {
        masterName = url.masterName
        self.password = password
        self.tls = tls
        self.queryTimeout = queryTimeout
        self.logger = logger
        sentinels = url.sentinels.map { $0.resolver(role: "redis sentinel", logger: logger) }
        state = Mutex(State(order: Array(sentinels.indices), master: nil))
    }

    func stop() {
        for resolver in sentinels { resolver.stop() }
    }

    /// Master address changes seen: each time a connection verifies a master other than the
    /// one verified before (the first master found is not a change).
    public var failovers: Int { changes.load(ordering: .relaxed) }

    /// The master last verified, as `host:port`; nil before the first.
    public var master: String? { state.withLock { $0.master?.description } }

    /// Asks the sentinels in turn where the master is. `done` runs on `loop`, exactly once,
    /// never inside this call; its failure (`.unavailable`) says what each sentinel answered.
    func resolveMaster(on loop: EventLoop, _ done: @escaping (Result<SocketAddress, StoreError>) -> Void) {
        let order = state.withLock { $0.order }
        RedisNodeWalk(self, candidates: order, loop: loop, done: done).start()
    }

    /// One sentinel's connection for one query: its password, no database, our timeout.
    private func settings(for index: Int) -> RedisConnectionSettings {
        RedisConnectionSettings(resolver: sentinels[index], username: nil, password: password, database: 0, tls: tls,
                                setupProblem: nil, commandTimeout: queryTimeout, backoffMin: queryTimeout,
                                backoffMax: queryTimeout, redactedURL: name(of: index),
                                // Its certificate names the host the operator configured for it.
                                serverName: tls == nil ? nil : sentinels[index].name)
    }

    private func name(of index: Int) -> String {
        let r = sentinels[index]
        return (r.name.contains(":") ? "[\(r.name)]" : r.name) + ":\(r.port)"
    }

    /// The spec's step 1: the sentinel that answered goes first.
    func answered(_ index: Int, _ address: SocketAddress) {
        state.withLock { s in
            s.lastAnswer[index] = address
            if let at = s.order.firstIndex(of: index), at != 0 {
                s.order.remove(at: at)
                s.order.insert(index, at: 0)
            }
        }
    }

    /// The address a sentinel answered gave no usable master (the connection was refused, or
    /// `ROLE` was not `master`): if that sentinel is first in the order, it goes last, so the
    /// next walk asks the others first. Without this, a sentinel that has not yet seen a
    /// failover keeps being asked first — it answered last — and keeps naming the dead master.
    func unusable(_ address: SocketAddress) {
        state.withLock { s in
            guard let first = s.order.first, s.lastAnswer[first] == address, s.order.count > 1 else { return }
            s.order.removeFirst()
            s.order.append(first)
        }
    }

    /// A connection's `ROLE` said `master` at `address`.
    func confirmed(_ address: SocketAddress) {
        let (changed, old) = state.withLock { s -> (Bool, SocketAddress?) in
            defer { s.master = address }
            return (s.master != address, s.master)
        }
        guard changed else { return }
        if let old {
            changes.add(1, ordering: .relaxed)
            logger?.warn("redis master changed (sentinel failover)",
                         ["master_name": masterName, "from": old.description, "to": address.description])
        } else {
            logger?.info("redis master found through the sentinels", ["master_name": masterName, "master": address.description])
        }
    }

    /// Replies after which this server is not (or not yet) a usable master: a replica refusing
    /// a write, a master that lost its replicas under `min-replicas-to-write`… (`MASTERDOWN`
    /// comes from a replica that lost its master), or a server still loading its data.
    static func meansNotMaster(_ error: String) -> Bool {
        error.hasPrefix("READONLY") || error.hasPrefix("MASTERDOWN") || error.hasPrefix("LOADING")
    }

    /// `ROLE`'s answer names the server's role first: `master`, `slave` or `sentinel`.
    static func role(_ reply: RedisReply) -> String {
        guard case .array(let items) = reply, case .string(let bytes)? = items.first else { return "unknown" }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// `get-master-addr-by-name`'s answer: `[ip, port]`, nil when the sentinel does not know
    /// the name. An announced host name is refused (see the type's comment).
    static func address(_ reply: RedisReply) -> Result<SocketAddress, StoreError> {
        switch reply {
        case .null, .array([]):
            return .failure(StoreError(.unavailable, "does not know this master"))
        case .array(let items) where items.count == 2:
            guard case .string(let h) = items[0], case .string(let p) = items[1] else { break }
            let host = String(decoding: h, as: UTF8.self)
            let port = String(decoding: p, as: UTF8.self)
            let text = host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
            guard let address = SocketAddress.parse(text), address.isIP, PeerAddress(text: host) != nil else {
                return .failure(StoreError(.unavailable, "announced '\(text.prefix(80))', not an IP address and port"))
            }
            return .success(address)
        case .error(let message):
            return .failure(StoreError(.unavailable, "refused: \(message.prefix(120))"))
        default:
            break
        }
        return .failure(StoreError(.unavailable, "answered something other than an address"))
    }
}

/// Where the master is: each sentinel, by index, in the order `resolveMaster` took.
extension RedisSentinel: RedisNodeQuery {
    var queryCommand: [[UInt8]] {
        [Array("SENTINEL".utf8), Array("get-master-addr-by-name".utf8), Array(masterName.utf8)]
    }

    func queryConnection(to index: Int, on loop: EventLoop) -> RedisConnection {
        RedisConnection(loop: loop, settings: settings(for: index), logger: nil)
    }

    func label(_ index: Int) -> String { name(of: index) }

    func answer(_ reply: RedisReply, from index: Int) -> Result<SocketAddress, StoreError> { Self.address(reply) }

    func nobodyAnswered(_ failures: [String]) -> String {
        "no sentinel gave the address of master '\(masterName)': " + failures.joined(separator: "; ")
    }
}
