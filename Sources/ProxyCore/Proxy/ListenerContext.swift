import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// What every connection of one listener shares: configuration, phases, parsers, logs, and
/// per-loop state (upstream pool, draining flag, connection count).
///
/// `@unchecked Sendable`: the immutable parts are shared by all loops; `perLoop[i]` is only
/// ever touched by loop `i`.
final class ListenerContext: @unchecked Sendable {
    let spec: ListenerSpec
    let config: ProxyConfig
    let phases: any HTTPPhases
    let requestParser: RequestParser
    let responseParser: ResponseParser
    let log: Logger
    let accessLog: AccessLog?
    let engineMetrics: EngineMetrics
    let metrics: ListenerMetrics
    /// Set on TLS listeners: the certificates new handshakes use.
    let credentials: TLSCredentials?
    /// The same certificate for QUIC handshakes (GnuTLS), while `http3.enabled`, reloaded with
    /// the TCP side's (`QUICCertificate`).
    let quicCertificate: QUICCertificate?
    /// Requests arrived over TLS (`X-Forwarded-Proto: https`).
    let tls: Bool
    /// The `Strict-Transport-Security` value for every response (`tls.hsts`; TLS listeners only).
    let hsts: [UInt8]?
    /// The `Alt-Svc` value for every response (`http3.enabled`; TLS listeners only): HTTP/3 on
    /// this listener's own port, where QUIC is bound beside it.
    let altSvc: [UInt8]?
    /// Whether responses may be compressed (`compression:`): read once per response, where
    /// reaching into `config` would copy the settings' lists.
    let compresses: Bool
    /// The process's budget for encoders' state (`compression.max_memory`; nil in tests that
    /// run a context alone).
    let compressionMemory: MemoryReservation?
    /// Whether the operator has header rules (`headers:`), read per request for the same reason.
    let rewritesHeaders: Bool
    /// `config.upstream != nil`, kept apart: testing the optional struct costs a copy of it
    /// (and its strings) on every request.
    let hasUpstream: Bool
    /// The `Host` sent upstream when the client sent none (HTTP/1.0).
    let upstreamHost: String
    /// The process's client-connection budget this listener draws on (its own for the
    /// internal listener).
    let budget: ConnectionBudget
    /// Request-scoped problem lines, rate-limited per cause (`ClientExchange.logProblem`).
    let throttle: LogThrottle
    /// The process's per-client counts (nil for the internal listener and in tests that run
    /// a context alone), and what this configuration enforces with them (nil: nothing).
    let clients: ClientLimits?
    let clientLimits: ClientLimitPolicy?
    /// `client_access` (nil: no rules).
    let clientAccess: ClientAccessPolicy?
    /// `maintenance` across the loops (nil: no maintenance file configured).
    let maintenanceSwitch: MaintenanceSwitch?
    /// The process's budget for responses read ahead (nil in tests that run a context alone;
    /// kept when buffering is off, so that a reservation made before a reload goes back), and
    /// whether this configuration reads responses ahead (`buffering:`).
    let bufferingBudget: BufferingBudget?
    let buffersResponses: Bool
    /// The process's pipes for spliced bodies (nil in tests that run a context alone), and
    /// whether this configuration splices (`splice.enabled`).
    let spliceBudget: SpliceBudget?
    let splices: Bool
    let buffersRequests: Bool
    /// Whether requests may be answered from files (`static.root`; `PerLoop.staticRoot`).
    let servesStatic: Bool
    /// `x_accel_redirect` (nil: off — no `X-Accel-Redirect` is followed, and none reaches a client), and
    /// the request fields that tell the app about it (`AccelRedirectSettings.mappingFields`).
    let accelRedirect: AccelRedirectSettings?
    let accelMappingFields: [UInt8]
    /// The groups of servers requests go to and their health, the default group first (empty:
    /// a listener that answers locally).
    let groups: [UpstreamGroup]
    /// `routes:` (nil: every request goes to the default group), and whether there are any,
    /// kept apart as `hasUpstream` is: testing the optional costs a copy of its list.
    let routes: UpstreamRoutes?
    let hasRoutes: Bool
    /// Some group moves requests on an answer (`retry_statuses`), or counts answers against
    /// its servers (passive health with `fail_statuses`): read per response, so that most sites
    /// (one server) never look up the request's group there.
    let retriesOnStatus: Bool
    let countsStatuses: Bool
    private var perLoop: [PerLoop]

    final class PerLoop {
        /// One per group, in `groups`' order; the default group's also apart (most requests
        /// go there: one array access less).
        var balancers: [UpstreamBalancer] = []
        var mainBalancer: UpstreamBalancer?
        /// This loop's look at the maintenance file (made at the first request).
        var maintenance: MaintenanceWatch?
        /// No new requests: connections close after the one in flight (shutdown or reload).
        var draining = false
        /// Replaced by a reload: its acceptors serve `successor` now, and its connections move
        /// there at their next request boundary.
        var retired = false
        var successor: ListenerContext?
        /// The server is shutting down (in-progress TLS handshakes are dropped).
        var stopping = false
        var connections = 0
        var acceptors: [Acceptor] = []
        /// This loop's UDP socket for the listener's HTTP/3 (`http3.enabled`; nil: none).
        var quic: QUICListener?
        /// The static root's descriptor for this loop (`static.root`; nil: off).
        var staticRoot: StaticRoot?
        /// Each `x_accel_redirect` location's root, in the settings' order.
        var accelRoots: [StaticRoot] = []
    }

    init(spec: ListenerSpec, loops: Int, log: Logger, accessLog: AccessLog?, metrics: EngineMetrics,
         budget: ConnectionBudget = ConnectionBudget(limit: .max), clients: ClientLimits? = nil,
         buffering: BufferingBudget? = nil, compressionMemory: MemoryReservation? = nil,
         splice: SpliceBudget? = nil) {
        self.spec = spec
        self.budget = budget
        self.clients = clients
        clientLimits = clients.flatMap { ClientLimitPolicy(spec.config.clientLimits, budget: budget.limit, state: $0) }
        clientAccess = ClientAccessPolicy(spec.config.clientAccess, metrics: metrics)
        maintenanceSwitch = spec.config.maintenance.file == nil ? nil
            : MaintenanceSwitch(log: log, gauge: metrics.maintenance.labels(spec.name))
        bufferingBudget = buffering
        buffersResponses = buffering != nil && spec.config.buffering.responses > 0
        buffersRequests = buffering != nil && spec.config.buffering.requests > 0
        if spec.config.buffering.isEnabled { buffering?.setLimit(spec.config.buffering.maxMemory) }
        spliceBudget = splice
        splices = splice != nil && spec.config.splice.enabled
        if splices { splice?.setLimit(spec.config.splice.maxPipes) }
        config = spec.config
        phases = spec.phases
        requestParser = RequestParser(limits: spec.config.limits)
        responseParser = ResponseParser(limits: spec.config.limits)
        self.log = log
        throttle = LogThrottle(log: log, loops: loops)
        engineMetrics = metrics
        self.metrics = metrics.listener(spec.name)
        credentials = spec.tls
        quicCertificate = spec.config.http3.enabled ? spec.tls.map { QUICCertificate(tls: $0, log: log) } : nil
        tls = spec.tls != nil
        hsts = spec.tls?.settings.hsts.map { Array($0.headerValue.utf8) }
        altSvc = Self.altSvc(tls: spec.tls != nil, address: spec.address, spec.config.http3).map { Array($0.utf8) }
        compresses = spec.config.compression.isEnabled
        self.compressionMemory = compressionMemory
        if compresses { compressionMemory?.setLimit(spec.config.compression.maxMemory) }
        rewritesHeaders = !spec.config.headerRules.isEmpty
        hasUpstream = spec.config.upstream != nil
        switch spec.config.upstream?.endpoint {
        case .address(.unix)?, nil: upstreamHost = "localhost"
        default: upstreamHost = spec.config.upstream!.description
        }
        self.accessLog = spec.accessLogged ? accessLog : nil
        perLoop = (0..<loops).map { _ in PerLoop() }
        servesStatic = spec.config.staticFiles.isEnabled
        if let root = spec.config.staticFiles.root {
            for p in perLoop { p.staticRoot = StaticRoot(path: root) }
        }
        let accel = spec.config.accelRedirect
        accelRedirect = accel.isEnabled ? accel : nil
        accelMappingFields = accel.isEnabled ? Array(accel.mappingFields.utf8) : []
        for p in perLoop { p.accelRoots = accel.locations.map { StaticRoot(path: $0.root) } }
        if spec.config.upstream != nil {
            let settings = spec.config.groupSettings
            var groups = spec.upstreamGroups
            if groups.isEmpty {
                // Built here (tests, embedders): the default group's one server may be named
                // (`upstreamResolver`); every other server must be an address.
                groups = settings.enumerated().map { i, g in
                    UpstreamGroup(g, resolvers: i == 0 && g.servers.count == 1 ? [spec.upstreamResolver] : g.servers.map { _ in nil },
                                  log: log, metrics: metrics.registry)
                }
            }
            precondition(groups.count == settings.count, "ListenerSpec.upstreamGroups: one per group of the configuration")
            for group in groups {
                for (s, resolver) in zip(group.servers, group.resolvers) {
                    precondition(!s.server.target.tls || spec.upstreamTLS != nil || !group.tls.isEmpty,
                                 "an https:// upstream needs ListenerSpec.upstreamTLS")
                    precondition(s.server.target.address != nil || resolver != nil, "a named upstream needs its HostResolver")
                }
            }
            self.groups = groups
            routes = UpstreamRoutes(spec.config.routes)
            hasRoutes = routes != nil
            retriesOnStatus = groups.contains { !$0.retryStatuses.isEmpty }
            countsStatuses = groups.contains { $0.passive && !$0.health.failStatuses.isEmpty }
            let capacity = spec.config.upstreamPoolCapacity(loops: loops)
            for p in perLoop {
                p.balancers = groups.map {
                    UpstreamBalancer(group: $0, capacity: capacity, tls: spec.upstreamTLS, timeouts: spec.config.timeouts)
                }
                p.mainBalancer = p.balancers[0]
            }
        } else {
            groups = []
            routes = nil
            hasRoutes = false
            retriesOnStatus = false
            countsStatuses = false
        }
    }

    @inline(__always) func state(_ loop: EventLoop) -> PerLoop { perLoop[loop.index] }

    /// `h3=":PORT"; ma=SECONDS` (RFC 7838, RFC 9114 §3.1.1) for a TLS listener while
    /// `http3.enabled`; nil for a plain one, and for port 0 (the kernel's choice, which the UDP
    /// socket would not share).
    static func altSvc(tls: Bool, address: SocketAddress, _ http3: HTTP3Settings) -> String? {
        guard tls, http3.enabled, let port = address.port, port != 0 else { return nil }
        return "h3=\":\(port)\"; ma=\(http3.altSvcMaxAge)"
    }

    /// The maintenance page while its file exists (`MaintenanceWatch`: a `stat` a second per
    /// loop at most), else nil — at once when none is configured.
    @inline(__always)
    func maintenancePage(on loop: EventLoop) -> [UInt8]? {
        guard let maintenanceSwitch else { return nil }
        let s = state(loop)
        if s.maintenance == nil { s.maintenance = MaintenanceWatch(path: config.maintenance.file!, shared: maintenanceSwitch) }
        return s.maintenance!.current(now: loop.now)
    }

    /// Group `group`'s balancer on `loop`.
    @inline(__always) func balancer(_ loop: EventLoop, group: Int) -> UpstreamBalancer {
        let s = perLoop[loop.index]
        return _fastPath(group == 0) ? s.mainBalancer.unsafelyUnwrapped : s.balancers[group]
    }

    func isDraining(_ loop: EventLoop) -> Bool { perLoop[loop.index].draining }

    /// The context that serves this listener now: self, or the last of the reloads since.
    func newest(_ loop: EventLoop) -> ListenerContext {
        var context = self
        while let next = context.perLoop[loop.index].successor { context = next }
        return context
    }

    /// A new connection (its PROXY header already read, if the listener wants one) starts:
    /// a TLS handshake on a TLS listener, else HTTP.
    func accepted(fd: Int32, peer: PeerAddress, on loop: EventLoop) {
        var peer = peer
        if let clientLimits, !admitConnection(fd: fd, peer: &peer, clientLimits, on: loop) { return }
        if let credentials {
            TLSAccept.start(fd: fd, loop: loop, listener: self, peer: peer, credentials: credentials)
            return
        }
        HTTP1Connection(fd: fd, loop: loop, listener: self, peer: peer).start()
    }

    /// `limits.max_connections_per_client`: a client past it is refused at once, before any
    /// TLS handshake or request is read (as HAProxy's `tcp-request connection reject`): a 429
    /// would need both, and the point is that this client gets nothing more from us.
    private func admitConnection(fd: Int32, peer: inout PeerAddress, _ policy: ClientLimitPolicy, on loop: EventLoop) -> Bool {
        guard clientMayConnect(&peer, policy, on: loop) else {
            Glibc.close(fd)
            return false
        }
        return true
    }

    /// `limits.max_connections_per_client` for a new connection from `peer` (a TCP one, or a
    /// QUIC one: both count towards the same limit); false if it is refused (logged, rate-limited).
    /// A connection let in is counted (`peer.countedPerClient`) until `clientGone`.
    func clientMayConnect(_ peer: inout PeerAddress, on loop: EventLoop) -> Bool {
        guard let clientLimits else { return true }
        return clientMayConnect(&peer, clientLimits, on: loop)
    }

    private func clientMayConnect(_ peer: inout PeerAddress, _ policy: ClientLimitPolicy, on loop: EventLoop) -> Bool {
        switch policy.connectionOpened(&peer, trusted: isTrusted(peer)) {
        case .allowed:
            return true
        case .wouldRefuse(let open):
            logConnectionLimit("client connection limit reached (dry run: allowed)", peer: peer, open: open, policy, on: loop)
            return true
        case .refused(let open):
            logConnectionLimit("client connection refused: limit reached", peer: peer, open: open, policy, on: loop)
            return false
        }
    }

    private func logConnectionLimit(_ message: String, peer: PeerAddress, open: Int, _ policy: ClientLimitPolicy, on loop: EventLoop) {
        guard log.level <= .warn else { return }
        throttle.log(.warn, message, key: message, fields: [
            ("listener", spec.name), ("client", peer.text), ("open", "\(open)"), ("limit", "\(policy.connectionCap ?? 0)"),
            ("setting", "limits.max_connections_per_client (limits.exempt_clients for addresses it must not apply to)"),
        ], on: loop)
    }

    /// A connection from `peer` is gone (closed, or never started): uncount it if it was counted.
    func clientGone(_ peer: PeerAddress) {
        if peer.countedPerClient { clients?.connections.closed(ClientKey(peer)) }
    }

    func isTrusted(_ peer: PeerAddress) -> Bool {
        if config.trustedProxies.isEmpty { return false }
        return config.trustedProxies.contains { $0.contains(peer) }
    }

    func connectionOpened(_ loop: EventLoop) {
        loop.clientConnections.wrappingAdd(1, ordering: .relaxed)
        perLoop[loop.index].connections += 1
        metrics.open.increment()
        budget.opened()
    }

    func connectionClosed(_ loop: EventLoop) {
        loop.clientConnections.wrappingSubtract(1, ordering: .relaxed)
        metrics.open.decrement()
        budget.closed()
        let s = perLoop[loop.index]
        s.connections -= 1
        if (s.draining || s.retired) && s.connections == 0 { onLoopIdle?(loop) }
    }

    /// Set by the server: called when a draining or replaced context has no connections left
    /// on a loop.
    var onLoopIdle: ((EventLoop) -> Void)?
}

/// A listener to start: where, with which configuration and which phases.
public struct ListenerSpec: Sendable {
    public var name: String
    public var address: SocketAddress
    public var config: ProxyConfig
    public var phases: any HTTPPhases
    /// Whether requests on this listener go to the access log (health probes on the internal
    /// listener would drown the lines operators look for).
    public var accessLogged: Bool
    /// Set to make this a TLS listener.
    public var tls: TLSCredentials?
    /// Required when `config.upstream` is `https://`: how upstream connections do TLS.
    public var upstreamTLS: UpstreamTLSClient?
    /// Required when `config.upstream` is a host name: where its addresses come from.
    public var upstreamResolver: HostResolver?
    /// The groups of servers and their health, shared by the listeners of one configuration
    /// (the binary builds them, with a resolver per named server), one per
    /// `config.groupSettings` in that order; empty: they are built here from `config` (the
    /// default group's one server may be a name, `upstreamResolver` its resolver).
    public var upstreamGroups: [UpstreamGroup] = []
    /// Keeps accepting during a graceful shutdown until every other listener has drained: the
    /// internal listener, whose relay token endpoint the app calls back *during* an in-flight
    /// sign-in, and whose /readyz tells the load balancer to stop sending work.
    public var drainsLast = false
    /// Draws on a connection budget of its own (`ConnectionBudget.internalConnections`) rather
    /// than the public one: the internal listener, whose probes must answer during a flood.
    public var ownBudget = false

    public init(name: String, address: SocketAddress, config: ProxyConfig, phases: any HTTPPhases, accessLogged: Bool = true,
                tls: TLSCredentials? = nil, upstreamTLS: UpstreamTLSClient? = nil, upstreamResolver: HostResolver? = nil) {
        self.name = name
        self.address = address
        self.config = config
        self.phases = phases
        self.accessLogged = accessLogged
        self.tls = tls
        self.upstreamTLS = upstreamTLS
        self.upstreamResolver = upstreamResolver
    }
}

/// A listening socket on one loop.
final class Acceptor: Channel {
    /// Replaced on reload (on this loop's thread).
    var context: ListenerContext
    /// The server's loops, to move a connection to a less loaded one (nil: keep every one).
    private let placement: LoopSet?
    /// Accepting is paused (out of descriptors or memory) until this timer fires.
    private var resume: TimerHandle?
    /// When the last "accepting paused" line was logged, and pauses since then.
    private var lastLogged: UInt64 = 0
    private var unlogged = 0

    /// How long a listener stops accepting after the process ran out of descriptors or
    /// memory (nginx waits 500 ms). Connections wait in the kernel's backlog meanwhile.
    static let pauseAfterResourceError: UInt64 = 100_000_000

    init(fd: Int32, loop: EventLoop, context: ListenerContext, placement: LoopSet? = nil) {
        self.context = context
        self.placement = placement
        super.init(fd: fd, loop: loop)
    }

    override func onEvent(_ events: UInt32) {
        // Bounded so one busy listener cannot starve the loop's established connections.
        for _ in 0..<64 {
            guard context.budget.hasRoom else { return pauseAtBudget() }
            var peer = PeerAddress()
            let fd: Int32?
            do {
                fd = try Socket.accept(self.fd, peer: &peer)
            } catch {
                switch error.errno {
                case EMFILE, ENFILE, ENOBUFS, ENOMEM:
                    pause(error)
                    return
                default:
                    // The pending connection failed (ECONNABORTED, a network error Linux
                    // passes on from accept): the next one may be fine.
                    continue
                }
            }
            guard let fd else { return }
            context.metrics.accepted.increment()
            // TCP_NODELAY comes from the listener (`Socket.makeListener`).
            if let placement, let other = placement.target(from: loop) {
                move(fd: fd, peer: peer, to: other, placement)
                continue
            }
            if context.config.proxyProtocol {
                ProxyProtocolAccept.start(fd: fd, loop: loop, listener: context, peer: peer)
                continue
            }
            context.accepted(fd: fd, peer: peer, on: loop)
        }
    }

    /// Queues a connection to a less loaded loop (`LoopPlacement`), which starts it as if it
    /// had accepted it. It counts against that loop and the budget from now, so that the
    /// accepts before it starts see it.
    private func move(fd: Int32, peer: PeerAddress, to other: EventLoop, _ placement: LoopSet) {
        let context = self.context
        other.clientConnections.wrappingAdd(1, ordering: .relaxed)
        context.budget.opened()
        placement.moved.increment()
        other.execute {
            other.clientConnections.wrappingSubtract(1, ordering: .relaxed)
            context.budget.closed()
            // A reload may have replaced the context meanwhile; the newest one serves it.
            let current = context.newest(other)
            if current.config.proxyProtocol {
                ProxyProtocolAccept.start(fd: fd, loop: other, listener: current, peer: peer)
            } else {
                current.accepted(fd: fd, peer: peer, on: other)
            }
        }
    }

    /// How often a listener at its connection budget looks again (connections close all the time
    /// under load: a short wait keeps the backlog moving).
    static let pauseAtBudget: UInt64 = 10_000_000

    private func pauseAtBudget() {
        guard resume == nil else { return }
        if let unlogged = pauseLineDue() {
            context.log.warn("accepting paused: connection limit reached", [
                "listener": context.spec.name, "open": "\(context.budget.current)", "limit": "\(context.budget.limit)",
                "setting": "limits.max_connections (and the descriptor limit: LimitNOFILE, ulimit -n)",
                "pauses_not_logged": "\(unlogged)",
            ])
        }
        scheduleResume(after: Self.pauseAtBudget)
    }

    /// Stops watching the listener and counts the pause; returns the pauses not logged since
    /// the last line when a line is due (at most one a second), else nil.
    private func pauseLineDue() -> Int? {
        want(read: false, write: false)
        context.metrics.acceptPauses.increment()
        guard lastLogged == 0 || loop.now - lastLogged >= 1_000_000_000 else {
            unlogged += 1
            return nil
        }
        defer { lastLogged = loop.now; unlogged = 0 }
        return unlogged
    }

    private func scheduleResume(after delay: UInt64) {
        resume = loop.scheduleTimer(after: delay) { [weak self] in
            guard let self else { return }
            self.resume = nil
            // Closed meanwhile (shutdown, reload): the fd may belong to someone else now.
            guard self.loop.owns(self) else { return }
            self.want(read: true, write: false)
            self.onEvent(EventLoop.readable)
        }
    }

    /// The listener stays readable while the backlog holds connections, so retrying at once
    /// would spin a core and write a log line per attempt. Stop watching it for a moment;
    /// connections that close meanwhile free descriptors for the ones waiting.
    private func pause(_ error: SystemError) {
        guard resume == nil else { return }
        if let unlogged = pauseLineDue() {
            context.log.error("accepting paused: out of resources", [
                "error": error.description, "pause_ms": "\(Self.pauseAfterResourceError / 1_000_000)",
                "pauses_not_logged": "\(unlogged)",
            ])
        }
        scheduleResume(after: Self.pauseAfterResourceError)
    }
}
