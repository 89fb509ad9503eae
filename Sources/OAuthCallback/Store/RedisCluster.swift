import ProxyCore
import Synchronization

/// A Redis Cluster store's shared part (the Cluster specification's client side, followed
/// literally): where to ask for the slot map, the counters, and what the last map said. Each
/// event loop routes its own commands with its own copy of the map (`RedisClusterRouter`), so
/// nothing on the command path takes a lock.
///
/// - **Slot map**: `CLUSTER SLOTS`, asked of the node that answered last, then the seeds,
///   then every other node of the loop's current map, in turn, each under a short timeout
///   (`queryTimeout`; as the sentinels are asked): the first usable answer wins.
/// - A query is a **short-lived connection** (a `RedisConnection` for one command, then
///   closed), as with Sentinel: maps are fetched when a loop starts, after MOVED and after a
///   node's connection failed — rare in steady state.
/// - Only IP addresses announced by the cluster are followed (Redis's default,
///   `cluster-preferred-endpoint-type ip`): a host name would need a lookup, and lookups never
///   run on a loop. The seeds' names are kept resolved off the loops (`HostResolver`).
public final class RedisCluster: Sendable {
    /// Counted by every loop; owned by the metrics registry when wired (so they survive a
    /// reload that builds a new store), else private.
    public struct Counters: Sendable {
        public var moved: Counter
        public var ask: Counter
        public var refreshes: Counter

        public init(moved: Counter = Counter(), ask: Counter = Counter(), refreshes: Counter = Counter()) {
            self.moved = moved
            self.ask = ask
            self.refreshes = refreshes
        }
    }

    public let url: RedisClusterURL
    let counters: Counters
    /// How long one node may take to answer the slot-map query, connect included (nanoseconds).
    let queryTimeout: UInt64
    /// At most one slot-map refresh per loop in this long (nanoseconds).
    let refreshInterval: UInt64
    /// Redirections followed for one command before it fails `.unavailable`.
    let maxRedirects: Int
    private let seeds: [HostResolver]
    /// What node connections share: credentials, TLS, timeouts, backoff (the node is set per connection).
    private let template: RedisConnectionSettings
    private let logger: Logger?
    private let state = Mutex(State())

    private struct State {
        /// The node whose slot map was used last: asked first next time.
        var lastAnswered: Candidate?
        /// The primaries of the last map any loop installed, and the slots it covered.
        var primaries: [SocketAddress] = []
        var covered = 0
    }

    /// Where a slot-map query goes: an address, and with TLS the name its certificate is
    /// checked against (a seed's configured host; nil: the address announced).
    struct Candidate: Equatable {
        var address: SocketAddress
        var serverName: String?
    }

    /// Resolves the seeds' names now (blocking; at set-up).
    init(_ url: RedisClusterURL, template: RedisConnectionSettings, counters: Counters, queryTimeout: UInt64,
         refreshInterval: UInt64, maxRedirects: Int, logger: Logger?) {
        self.url = url
        self.template = template
        self.counters = counters
        self.queryTimeout = queryTimeout
        self.refreshInterval = refreshInterval
        self.maxRedirects = maxRedirects
        self.logger = logger
        seeds = url.seeds.map { $0.resolver(role: "redis cluster seed", logger: logger) }
    }

    func stop() {
        for resolver in seeds { resolver.stop() }
    }

    // MARK: Metrics

    /// Primaries in the last slot map installed (0 before the first).
    public var primaries: Int { state.withLock { $0.primaries.count } }
    /// Slots with a primary in the last slot map installed (16,384 when the cluster is whole).
    public var slotsCovered: Int { state.withLock { $0.covered } }
    public var movedRedirects: Int { counters.moved.current }
    public var askRedirects: Int { counters.ask.current }
    public var refreshes: Int { counters.refreshes.current }

    // MARK: Connections

    /// A loop's connection to one node of the cluster.
    func settings(forNode address: SocketAddress) -> RedisConnectionSettings {
        var s = template
        s.node = address
        s.redactedURL = "redis cluster node \(address)"
        return s
    }

    private func querySettings(_ candidate: Candidate) -> RedisConnectionSettings {
        var s = settings(forNode: candidate.address)
        s.serverName = candidate.serverName
        s.commandTimeout = queryTimeout
        s.backoffMin = queryTimeout
        s.backoffMax = queryTimeout
        return s
    }

    /// Where the next query goes, in order: the node that answered last, the seeds (their
    /// current addresses), then the loop's `known` nodes; each address once.
    private func candidates(known: [SocketAddress]) -> [Candidate] {
        var out: [Candidate] = []
        func add(_ c: Candidate) { if !out.contains(where: { $0.address == c.address }) { out.append(c) } }
        if let last = state.withLock({ $0.lastAnswered }) { add(last) }
        for seed in seeds {
            for address in seed.addresses { add(Candidate(address: address, serverName: seed.name)) }
        }
        for address in known { add(Candidate(address: address, serverName: nil)) }
        return out
    }

    /// Asks the nodes in turn for the slot map. `done` runs on `loop`, exactly once, never
    /// inside this call; its failure (`.unavailable`) says what each node answered.
    func fetchSlotMap(on loop: EventLoop, known: [SocketAddress], _ done: @escaping (Result<RedisSlotMap, StoreError>) -> Void) {
        counters.refreshes.increment()
        RedisNodeWalk(self, candidates: candidates(known: known), loop: loop, done: done).start()
    }

    /// A loop installed `map`: published for the metrics, and a change of primaries logged once
    /// (the first loop to see it).
    func installed(_ map: RedisSlotMap) {
        let primaries = map.primaries.sorted { $0.description < $1.description }
        let covered = map.covered
        let old = state.withLock { s -> [SocketAddress]? in
            defer { s.primaries = primaries; s.covered = covered }
            return s.primaries == primaries ? nil : s.primaries
        }
        if !map.problems.isEmpty {
            logger?.warn("redis cluster slot map has slots without a usable primary",
                         ["problems": map.problems.joined(separator: "; ").prefix(500).description])
        }
        guard let old else { return }
        let list = primaries.map(\.description).joined(separator: ",")
        if old.isEmpty {
            logger?.info("redis cluster slot map loaded", ["primaries": list, "slots_covered": String(covered)])
        } else {
            logger?.warn("redis cluster primaries changed",
                         ["from": old.map(\.description).joined(separator: ","), "to": list, "slots_covered": String(covered)])
        }
    }
}

/// The slot map: the candidates `fetchSlotMap` listed, in that order.
extension RedisCluster: RedisNodeQuery {
    var queryCommand: [[UInt8]] { [Array("CLUSTER".utf8), Array("SLOTS".utf8)] }

    func queryConnection(to candidate: Candidate, on loop: EventLoop) -> RedisConnection {
        RedisConnection(loop: loop, settings: querySettings(candidate), logger: nil)
    }

    func label(_ candidate: Candidate) -> String { "\(candidate.address)" }

    func answer(_ reply: RedisReply, from candidate: Candidate) -> Result<RedisSlotMap, StoreError> {
        RedisSlotMap.parse(reply, answeredBy: candidate.address)
    }

    /// The node whose map is used is asked first next time.
    func answered(_ candidate: Candidate, _ map: RedisSlotMap) {
        state.withLock { $0.lastAnswered = candidate }
    }

    /// With no candidate at all (no seed resolved, or the store could not be set up), the
    /// reason is that, not an empty list.
    func nobodyAnswered(_ failures: [String]) -> String {
        "no cluster node gave a slot map: "
            + (failures.isEmpty ? (template.setupProblem ?? "no seed address (do the names resolve?)") : failures.joined(separator: "; "))
    }
}
