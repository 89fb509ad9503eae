import Synchronization

/// One group of upstream servers (`UpstreamGroupSettings`), their health, and their metrics:
/// shared by the public listeners and every loop (each loop picks among them with its own
/// `UpstreamBalancer`).
public final class UpstreamGroup: Sendable {
    public let name: String
    let servers: [UpstreamServerState]
    /// Per server (same order): the host name's resolver, for servers given by name.
    let resolvers: [HostResolver?]
    /// Per server: the TLS client of an `https://` one (each verifies its own name); empty:
    /// the listener's `upstreamTLS` for all.
    let tls: [UpstreamTLSClient?]
    let health: UpstreamHealthSettings
    let balance: UpstreamBalance
    let retryStatuses: [Int]
    /// `x_accel_redirect` applies to its servers (`UpstreamGroupSettings.followsAccelRedirect`).
    let followsAccelRedirect: Bool
    /// This group's upstream timeouts (nil: the listener's).
    let connectTimeout: UInt64?
    let responseTimeout: UInt64?
    /// `balance: hash …`: the ring over the servers that are not backups, and the header hashed
    /// (`hash header NAME`: its lowercase bytes; empty otherwise).
    let ring: HashRing?
    let hashHeader: [UInt8]
    /// Passive health applies (two servers or more: with one, taking it out helps nobody).
    let passive: Bool
    let log: Logger
    private let failures: MetricFamily<Counter>
    let checker = Mutex<HealthChecker?>(nil)

    /// `resolvers`: one per server, nil for a server given by address.
    public convenience init(servers: [UpstreamServer], resolvers: [HostResolver?], tls: [UpstreamTLSClient?] = [],
                            health: UpstreamHealthSettings, log: Logger, metrics: MetricsRegistry) {
        var settings = UpstreamGroupSettings(name: UpstreamGroupSettings.defaultName, servers: servers)
        settings.health = health
        settings.followsAccelRedirect = true
        self.init(settings, resolvers: resolvers, tls: tls, log: log, metrics: metrics)
    }

    /// `resolvers`: one per server, nil for a server given by address; `tls`: one per server
    /// (nil for plain ones), or empty for the listener's `upstreamTLS`.
    public init(_ settings: UpstreamGroupSettings, resolvers: [HostResolver?], tls: [UpstreamTLSClient?] = [],
                log: Logger, metrics: MetricsRegistry) {
        let servers = settings.servers
        precondition(!servers.isEmpty && resolvers.count == servers.count && (tls.isEmpty || tls.count == servers.count))
        name = settings.name
        self.servers = servers.map(UpstreamServerState.init)
        self.resolvers = resolvers
        self.tls = tls
        health = settings.health
        balance = settings.balance
        retryStatuses = settings.retryStatuses
        followsAccelRedirect = settings.followsAccelRedirect
        connectTimeout = settings.connectTimeout
        responseTimeout = settings.responseTimeout
        if case .hash(.header(let name)) = settings.balance { hashHeader = Array(name.lowercased().utf8) } else { hashHeader = [] }
        if case .hash = settings.balance {
            ring = HashRing(labels: self.servers.map(\.label), weights: servers.map(\.weight), eligible: servers.map { !$0.backup })
        } else {
            ring = nil
        }
        passive = servers.count > 1
        self.log = log
        failures = metrics.counter("callback_proxy_upstream_server_failures_total",
                                   "Failures counted against each upstream server by its health (connect, closed, timeout, status, check).",
                                   labels: ["group", "server", "kind"])
    }

    public var count: Int { servers.count }

    /// The servers as `10.0.0.5:3000` (`https://` ones so marked; backups and weights too),
    /// for the `ready` line.
    public var summary: String {
        servers.map { ($0.server.target.tls ? "https://" : "") + $0.server.target.description + ($0.server.backup ? " (backup)" : $0.server.weight != 1 ? " (weight \($0.server.weight))" : "") }
            .joined(separator: ", ")
    }

    /// What makes a server's answer a failure for passive health.
    enum Failure: String {
        case connect, closed, timeout, status, check
    }

    /// Counts a failure of server `i` at `now`; past `maxFails` within `failTimeout` it goes out
    /// for `failTimeout` (and, with health checks, until one passes). Logged when it goes out.
    /// `counts: false` only counts the metric (a failed health check takes the server out by
    /// itself).
    func failed(_ i: Int, _ kind: Failure, _ detail: String, now: UInt64, counts: Bool = true) {
        let s = servers[i]
        failures.labels(name, s.label, kind.rawValue).increment()
        guard passive && counts else { return }
        let start = s.windowStart.load(ordering: .relaxed)
        if now &- start > health.failTimeout {
            s.windowStart.store(now, ordering: .relaxed)
            s.fails.store(0, ordering: .relaxed)
        }
        let n = s.fails.wrappingAdd(1, ordering: .relaxed).newValue
        guard n >= health.maxFails else { return }
        s.fails.store(0, ordering: .relaxed)
        let until = now + health.failTimeout
        let before = s.outUntil.exchange(until, ordering: .relaxed)
        if health.checkPath != nil { s.checkPassed.store(false, ordering: .relaxed) }
        guard before <= now else { return }  // already out: said so then
        let why = "\(kind.rawValue): \(detail)"
        s.problem.withLock { $0 = why }
        log.warn("upstream server taken out", [
            "group": name, "server": s.label, "failures": "\(n)", "reason": why,
            "back": health.checkPath != nil ? "when a health check passes" : "in \(health.failTimeout / 1_000_000_000) s",
            "setting": "upstream_health (max_fails, fail_timeout, fail_statuses)",
        ])
    }

    /// Whether an upstream answer with `status` counts against its server.
    @inline(__always) func countsStatus(_ status: Int) -> Bool {
        passive && health.failStatuses.contains(status)
    }

    /// Each server and whether it may get requests now (for /readyz).
    public func states(now: UInt64) -> [(server: String, problem: String?)] {
        servers.map { s in
            (s.label, s.available(now) ? nil : s.problem.withLock { $0 } ?? "out")
        }
    }

    /// Each server and its state for /readyz: "up", or why it is out.
    public func stateMap(now: UInt64) -> [String: String] {
        Dictionary(states(now: now).map { ($0.server, $0.problem ?? "up") }, uniquingKeysWith: { a, _ in a })
    }

    /// Whether the group knows its servers' health: passive health (two servers or more) or
    /// health checks. A one-server group without checks keeps its server "up" whatever it does.
    public var isWatched: Bool { passive || health.checkPath != nil }

    /// The first server, and its resolver (for a group whose one server /readyz connects to).
    public var firstTarget: UpstreamTarget { servers[0].server.target }
    public var firstResolver: HostResolver? { resolvers[0] }

    /// Whether any server may get requests now.
    public func anyAvailable(now: UInt64) -> Bool { servers.contains { $0.available(now) } }

    /// These groups serve now (a reload built them and they replaced the last): their servers
    /// are the ones `callback_proxy_upstream_server_available` reports, and each group's health
    /// checks (`check_path`) start, on a thread of their own.
    public static func activate(_ groups: [UpstreamGroup], metrics: MetricsRegistry) {
        let states = groups.map { g in (g.name, g.servers) }
        metrics.gauges("callback_proxy_upstream_server_available",
                       "1 while the upstream server may get requests (its health checks pass and passive health has not taken it out).",
                       labels: ["group", "server"]) {
            let now = EventLoop.monotonicNow()
            return states.flatMap { name, servers in servers.map { ([name, $0.label], $0.available(now) ? 1 : 0) } }
        }
        for g in groups { g.startChecks() }
    }

    private func startChecks() {
        guard health.checkPath != nil else { return }
        checker.withLock { c in
            guard c == nil else { return }
            let checker = HealthChecker(group: self, tls: nil)
            checker.start()
            c = checker
        }
    }

    /// Takes over what `old` (the group a reload replaces) knew of each server it shares with
    /// this one: a server failing its checks stays out, and one passive health took out stays
    /// out for the rest of its time — rather than getting requests until its first check here
    /// (up to `check_timeout` for a server that hangs) and being logged out again. A server
    /// only this group has starts in. Call before `activate`.
    public func inheritHealth(from old: UpstreamGroup?) {
        guard let old else { return }
        for s in servers {
            guard let was = old.servers.first(where: { $0.label == s.label }) else { continue }
            // Out by checks only while this configuration checks too (else nothing would bring it back).
            if health.checkPath != nil, old.health.checkPath != nil {
                s.checkPassed.store(was.checkPassed.load(ordering: .relaxed), ordering: .relaxed)
            }
            if passive {
                s.outUntil.store(was.outUntil.load(ordering: .relaxed), ordering: .relaxed)
            }
            s.problem.withLock { $0 = was.problem.withLock { $0 } }
        }
    }

    /// Stops them (a reload replaced this group).
    public func stopChecks() {
        checker.withLock { $0?.stop(); $0 = nil }
    }
}
