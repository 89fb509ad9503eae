import OAuthCallback
import ProxyConfiguration
import ProxyCore

/// Everything built from one configuration that a reload (SIGHUP) replaces: the OAuth layer,
/// the certificates and the listener specs. A new generation is built completely — every
/// file read, every provider built — before the running one is touched, so a reload either
/// applies whole or not at all.
struct Generation {
    let config: AppConfig
    let oauth: OAuthWiring
    let tls: TLSWiring
    /// Set when the upstream is a host name; kept across reloads that leave it unchanged.
    /// (With `upstreams:`, the first server's; `upstreamResolvers` has one per server of every
    /// group.)
    let upstreamResolver: HostResolver?
    let upstreamResolvers: [HostResolver?]
    /// The groups of servers and their health, shared by the public listeners: the default
    /// group first (empty without an upstream).
    let groups: [UpstreamGroup]
    /// The default group.
    var upstreams: UpstreamGroup? { groups.first }
    let listeners: [ListenerSpec]
    private let metrics: MetricsRegistry

    init(_ config: AppConfig, log: Logger, metrics: MetricsRegistry, readiness: Readiness,
         previous: Generation? = nil) throws(ConfigProblems) {
        self.config = config
        self.metrics = metrics
        // Certificates and keys: each file read once, here; a problem names the file.
        let tls = try TLSWiring(config, previous: previous?.tls.credentials)
        let oauth = try OAuthWiring(config, storeTLS: tls.store, log: log, metrics: metrics, reusing: previous?.oauth)
        self.oauth = oauth
        self.tls = tls
        var groups: [UpstreamGroup] = []
        var allResolvers: [HostResolver?] = []
        for (settings, perServerTLS) in zip(config.proxy.groupSettings, tls.upstreamPerGroup) {
            let resolvers = settings.servers.map {
                Self.resolver($0.target, config, log: log, previous: previous?.upstreamResolvers ?? [])
            }
            allResolvers += resolvers
            groups.append(UpstreamGroup(settings, resolvers: resolvers, tls: perServerTLS, log: log, metrics: metrics))
        }
        self.groups = groups
        upstreamResolvers = allResolvers
        let resolver = allResolvers.first ?? nil
        upstreamResolver = resolver
        var listeners = config.listen.map {
            var spec = ListenerSpec(name: "public", address: $0, config: config.proxy, phases: oauth.phases,
                                    tls: tls.credentials, upstreamTLS: tls.upstream, upstreamResolver: resolver)
            spec.upstreamGroups = groups
            return spec
        }
        if let redirectAddress = config.redirectHTTP {
            var redirectConfig = config.proxy
            redirectConfig.upstream = nil
            // It only redirects to the TLS listener, where the page and the rules apply.
            redirectConfig.maintenance = MaintenanceSettings()
            redirectConfig.clientAccess = []
            redirectConfig.staticFiles = StaticSettings()
            redirectConfig.accelRedirect = AccelRedirectSettings()
            listeners.append(ListenerSpec(name: "redirect", address: redirectAddress, config: redirectConfig,
                                          phases: HTTPSRedirect(httpsPort: TLSWiring.httpsPort(config))))
        }
        if let internalAddress = config.internalListen {
            var internalConfig = config.proxy
            internalConfig.upstream = nil
            // Probes and the app's relay token requests come straight, not through the balancer.
            internalConfig.proxyProtocol = false
            // The probes must answer during maintenance (/readyz says what the upstreams are
            // doing), and the site's address rules are for the site: this listener is private.
            internalConfig.maintenance = MaintenanceSettings()
            internalConfig.clientAccess = []
            internalConfig.staticFiles = StaticSettings()
            internalConfig.accelRedirect = AccelRedirectSettings()
            var spec = ListenerSpec(name: "internal", address: internalAddress, config: internalConfig,
                                    phases: InternalEndpoints(relay: oauth.relayEndpoint, metrics: metrics, readiness: readiness,
                                                              assertionJWKS: oauth.assertionJWKS, revocation: oauth.revocationEndpoint),
                                    accessLogged: false)
            spec.drainsLast = true
            spec.ownBudget = true
            listeners.append(spec)
        }
        self.listeners = listeners
    }

    /// A named upstream's resolver: the previous one when name, port and interval are the
    /// same (looked up again now: a reload is when an operator expects DNS to be re-read),
    /// else a new one, resolved before the listeners switch to it.
    private static func resolver(_ target: UpstreamTarget, _ config: AppConfig, log: Logger, previous: [HostResolver?]) -> HostResolver? {
        guard case .name(let name, let port) = target.endpoint else { return nil }
        if let previous = previous.lazy.compactMap({ $0 }).first(where: {
            $0.name == name && $0.port == port && $0.interval == config.upstreamResolveInterval
        }) {
            previous.refresh()
            return previous
        }
        return HostResolver(name: name, port: port, interval: config.upstreamResolveInterval, log: log)
    }

    /// What /readyz asks about the upstream: the group's health when there are several
    /// servers or health checks; else (nil) a connection to the one server is tried.
    var readinessGroup: UpstreamGroup? {
        guard let upstreams, upstreams.count > 1 || config.proxy.upstreamHealth.checkPath != nil else { return nil }
        return upstreams
    }

    /// Called once this generation serves: its resolver starts refreshing, the one it
    /// replaced (if not the same) stops; the store gauges follow its store.
    func activate(replacing old: Generation?, log: Logger, storeGauges: StoreGauges) {
        storeGauges.watch(oauth.memoryStore, sentinel: oauth.sentinel, cluster: oauth.cluster?.cluster)
        for o in old?.upstreamResolvers ?? [] {
            if let o, !upstreamResolvers.contains(where: { $0 === o }) { o.stop() }
        }
        for r in upstreamResolvers {
            do {
                try r?.start()
            } catch {
                log.error("cannot start the upstream resolver thread; the name is looked up on reloads only",
                          ["error": error.description, "name": r?.name ?? ""])
            }
        }
        for g in old?.groups ?? [] { g.stopChecks() }
        for g in groups { g.inheritHealth(from: old?.groups.first { $0.name == g.name }) }
        if !groups.isEmpty { UpstreamGroup.activate(groups, metrics: metrics) }
    }

    /// The settings a running process cannot change: sockets, threads, log destinations.
    /// A reload that changes any of them is refused as a whole (restart to apply).
    static func restartOnly(from old: AppConfig, to new: AppConfig) -> [String] {
        var changed: [String] = []
        if old.listen != new.listen { changed.append("listen") }
        if old.internalListen != new.internalListen { changed.append("internal_listen") }
        if old.redirectHTTP != new.redirectHTTP { changed.append("redirect_http") }
        if old.loops != new.loops { changed.append("loops") }
        if old.maxConnections != new.maxConnections { changed.append("limits.max_connections") }
        // A new memory store would forget the replay guard's codes (and relay codes in flight).
        if case .memory(let oldBytes) = old.store, case .memory(let newBytes) = new.store, oldBytes != newBytes {
            changed.append("store_max_memory")
        }
        if old.accessLog != new.accessLog { changed.append("access_log") }
        if old.logFormat != new.logFormat { changed.append("log.format") }
        if (old.tls == nil) != (new.tls == nil) { changed.append("tls (on/off)") }
        // QUIC's UDP sockets are bound at start, beside the TLS listeners.
        if old.proxy.http3.enabled != new.proxy.http3.enabled { changed.append("http3.enabled") }
        return changed
    }
}
