/// One entry of `client_access:` — which client addresses may reach some paths (nginx's
/// `allow`/`deny`, HAProxy's `http-request deny if !{ src … }`): under the rule's `paths` (every
/// path when none), a client in `deny` is refused, and when `allow` is given, so is every client
/// not in it. Deny wins, whatever the order (as Pomerium's `deny` beside `allow`): a rule says
/// the same thing however its lists are written, unlike nginx's first-match order.
///
/// The client is the address the per-client limits use: the peer's, the PROXY header's source,
/// or — behind a peer in `trusted_proxies` — the right-most `X-Forwarded-For` entry that is not
/// itself trusted. A client that has no address (a unix-socket peer that is not trusted, an
/// `X-Forwarded-For` entry that is no address) matches no list: `deny` does not refuse it, and
/// `allow` does.
public struct ClientAccessRule: Sendable, Equatable {
    /// For the metric's `rule` label and the log lines; `client_access[i]` when not given.
    public var name: String
    public var paths: [PathPrefix] = []
    public var allow: [CIDR] = []
    public var deny: [CIDR] = []

    public init(name: String) {
        self.name = name
    }

    /// Whether a request is under the rule: under any reading of its path, letter case
    /// folded and a format suffix allowed, as `protect` and `rate_limits` match (a rule on
    /// `/admin` must cover `/ADMIN`, `/admin.json` and `/admin%09`, which servers route there).
    func applies(to readings: PathReadings) -> Bool {
        paths.isEmpty || readings.any { p in paths.contains { $0.covers(p) } }
    }

    /// Whether the rule refuses `client` (nil: it has no address).
    func refuses(_ client: PeerAddress?) -> Bool {
        guard let client, !client.isUnix else { return !allow.isEmpty }
        if deny.contains(where: { $0.contains(client) }) { return true }
        return !allow.isEmpty && !allow.contains { $0.contains(client) }
    }
}

/// The listener's `client_access` rules, checked on each request before anything else sees
/// it (the rate limits, the OAuth layer, the app): nil on a listener without rules, which then
/// pays nothing.
struct ClientAccessPolicy: Sendable {
    let rules: [ClientAccessRule]
    let refusals: [Counter]

    init?(_ rules: [ClientAccessRule], metrics: EngineMetrics) {
        guard !rules.isEmpty else { return nil }
        self.rules = rules
        refusals = rules.map { metrics.clientAccessRefusals.labels($0.name) }
    }

    /// The first rule that refuses the request, if any.
    func refusing(_ client: PeerAddress?, readings: PathReadings) -> Int? {
        rules.indices.first { rules[$0].applies(to: readings) && rules[$0].refuses(client) }
    }
}
