/// Per-client limits for all traffic (`rate_limits:` and `limits.max_connections_per_client`,
/// `limits.exempt_clients`, `limits.dry_run`), keyed by the client address rule the rest of
/// the proxy uses (`trusted_proxies`, the PROXY protocol; an IPv6 client by its /64).
///
/// Generous by default, because carriers put thousands of phones behind one IPv4 address
/// (CGNAT): no request rules until the operator writes some, and a connection cap of half the
/// public budget — enough that no single address can take the whole budget, far above what
/// one NAT address holds in practice.
public struct ClientLimitSettings: Sendable, Equatable {
    /// Request rate rules, each with buckets of its own; a request counts against every rule
    /// whose paths it lies under.
    public var rules: [RateRule] = []
    /// Open connections one client address may hold; nil: half of `limits.max_connections`
    /// (as derived or configured). 0: no cap.
    public var maxConnectionsPerClient: Int? = nil
    /// Client addresses no per-client limit applies to (monitoring, an office, a partner's
    /// servers). Peers in `trusted_proxies` are exempt from the connection cap too: their
    /// connections carry many clients (whose requests the rate rules still see one by one).
    public var exempt: [CIDR] = []
    /// Count and log what the limits would refuse, refuse nothing (every rule and the cap).
    public var dryRun = false

    public init() {}

    /// The connection cap in force for a public budget of `budget` connections (nil: none).
    public func connectionCap(budget: Int) -> Int? {
        switch maxConnectionsPerClient {
        case nil: return budget >= Int.max / 2 ? nil : max(1, budget / 2)
        case 0?: return nil
        case let n?: return n
        }
    }
}

/// One entry of `rate_limits:`: `rate` per client address over the `paths` (all when empty),
/// `burst` at once (default: the rate's count), 429 with `Retry-After` beyond.
public struct RateRule: Sendable, Equatable {
    /// For the metric's `rule` label and log lines; `rate_limits[i]` when not given.
    public var name: String
    public var paths: [PathPrefix] = []
    public var rate: RateLimit
    public var burst: Int? = nil
    /// Client addresses the rule tracks at once (its table's slots, 16 bytes each, touched
    /// ones only resident). Past that a new client passes uncounted
    /// (`callback_proxy_client_limit_untracked_total`): size it above the addresses a flood
    /// can bring within one refill period.
    public var clients = RateRule.defaultClients
    public var dryRun = false

    public static let defaultClients = 1 << 17
    public static let clientRange = 1_024...(1 << 24)

    public init(name: String, rate: RateLimit) {
        self.name = name
        self.rate = rate
    }

    /// Whether a request counts against this rule: under any reading of its path, letter
    /// case folded and a format suffix allowed, as `protect` (a limit on `/users/sign_in` must
    /// count `/USERS/sign_in` and `/users/sign_in.json`, which Rails routes to the same action).
    func applies(to readings: PathReadings) -> Bool {
        paths.isEmpty || readings.any { p in paths.contains { $0.covers(p) } }
    }
}
