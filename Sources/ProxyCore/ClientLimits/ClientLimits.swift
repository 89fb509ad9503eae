import Synchronization

/// The per-client limits' state for the whole process, kept across reloads: open connections
/// per client, and each rate rule's buckets (a reload that keeps a rule — same name, rate and
/// burst — keeps its buckets, so a reload is no way around a limit).
final class ClientLimits: Sendable {
    let connections: ConnectionCounts
    let metrics: ClientLimitMetrics
    private let buckets = Mutex<[BucketsKey: WeakBuckets]>([:])

    private struct BucketsKey: Hashable {
        let name: String
        let count: Int
        let period: Int
        let burst: Int
        let clients: Int
    }

    private struct WeakBuckets {
        weak var value: RateBuckets?
    }

    /// `clients`: distinct client addresses tracked at once by each table.
    init(clients: Int, metrics: ClientLimitMetrics) {
        connections = ConnectionCounts(clients: clients)
        self.metrics = metrics
    }

    /// The buckets for `rule`: those of the same rule in the configuration being replaced, or new.
    func buckets(for rule: RateRule) -> RateBuckets {
        let key = BucketsKey(name: rule.name, count: rule.rate.count, period: rule.rate.periodSeconds,
                             burst: rule.burst ?? rule.rate.count, clients: rule.clients)
        return buckets.withLock { table in
            if let existing = table[key]?.value { return existing }
            table = table.filter { $0.value.value != nil }
            let fresh = RateBuckets(limit: rule.rate, burst: rule.burst, clients: rule.clients)
            table[key] = WeakBuckets(value: fresh)
            return fresh
        }
    }
}

/// What one listener's configuration enforces per client (`ClientLimitSettings`), over the
/// process's `ClientLimits`. Read on every connection and request: immutable, no lock.
final class ClientLimitPolicy: Sendable {
    struct Rule: Sendable {
        let settings: RateRule
        let buckets: RateBuckets
        let metrics: ClientLimitMetrics.Rule
        let dryRun: Bool
        /// The 429's reason (also the key its log lines are grouped under).
        let reason: String
    }

    let rules: [Rule]
    /// Open connections per client address; nil: no cap.
    let connectionCap: Int?
    let connectionMetrics: ClientLimitMetrics.Rule
    let connectionsDryRun: Bool
    let exempt: [CIDR]
    let state: ClientLimits

    static let connectionRule = "max_connections_per_client"

    /// Nil when the settings limit nothing.
    init?(_ settings: ClientLimitSettings, budget: Int, state: ClientLimits) {
        connectionCap = settings.connectionCap(budget: budget)
        guard connectionCap != nil || !settings.rules.isEmpty else { return nil }
        rules = settings.rules.map { r in
            let burst = r.burst ?? r.rate.count
            return Rule(settings: r, buckets: state.buckets(for: r), metrics: state.metrics.rule(r.name),
                        dryRun: r.dryRun || settings.dryRun,
                        reason: "too many requests: rate_limits '\(r.name)' allows \(r.rate.description) per client, \(burst) at once")
        }
        connectionMetrics = state.metrics.rule(Self.connectionRule)
        connectionsDryRun = settings.dryRun
        exempt = settings.exempt
        self.state = state
    }

    func isExempt(_ address: PeerAddress) -> Bool {
        !exempt.isEmpty && exempt.contains { $0.contains(address) }
    }

    /// What became of a new connection under the cap.
    enum ConnectionVerdict {
        case allowed
        /// Over the cap in a dry run: allowed, to be logged.
        case wouldRefuse(open: Int)
        case refused(open: Int)
    }

    /// A connection from `peer` (its PROXY header read) opens. Sets `peer.countedPerClient`
    /// when it was counted: its close must uncount it (`ClientLimits.connections.closed`),
    /// whatever configuration is in force by then.
    func connectionOpened(_ peer: inout PeerAddress, trusted: Bool) -> ConnectionVerdict {
        guard let cap = connectionCap, !peer.isUnix, !trusted, !isExempt(peer) else { return .allowed }
        switch state.connections.opened(ClientKey(peer), limit: cap, force: connectionsDryRun) {
        case .counted:
            peer.countedPerClient = true
            return .allowed
        case .over(let open):
            if connectionsDryRun {
                peer.countedPerClient = true
                connectionMetrics.wouldRefuse.increment()
                return .wouldRefuse(open: open)
            }
            connectionMetrics.refused.increment()
            return .refused(open: open)
        case .untracked:
            connectionMetrics.untracked.increment()
            return .allowed
        }
    }

    /// A request's verdict under the rate rules.
    enum RequestVerdict {
        case allowed
        /// Allowed uncounted by this rule: its table had no room for the client.
        case untracked(Rule)
        case wouldRefuse(Rule)
        case refused(Rule, retryAfterSeconds: Int)
    }

    /// A request from `client` for a path with these `readings` at `now`: counted against
    /// every rule whose paths it lies under; refused by the first that has no token left for it.
    func admit(client: ClientKey, readings: PathReadings, now: UInt64) -> RequestVerdict {
        var verdict = RequestVerdict.allowed
        for rule in rules where rule.settings.applies(to: readings) {
            switch rule.buckets.admit(client, now: now) {
            case .allowed:
                continue
            case .untracked:
                rule.metrics.untracked.increment()
                if case .allowed = verdict { verdict = .untracked(rule) }
            case .refused(let wait, _):
                if rule.dryRun {
                    rule.metrics.wouldRefuse.increment()
                    switch verdict {
                    case .allowed, .untracked: verdict = .wouldRefuse(rule)
                    case .wouldRefuse, .refused: break
                    }
                    continue
                }
                rule.metrics.refused.increment()
                return .refused(rule, retryAfterSeconds: wait)
            }
        }
        return verdict
    }
}
