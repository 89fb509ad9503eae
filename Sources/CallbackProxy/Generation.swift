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
    let listeners: [ListenerSpec]

    init(_ config: AppConfig, log: Logger, metrics: MetricsRegistry, readiness: Readiness,
         previous: Generation? = nil) throws(ConfigProblems) {
        self.config = config
        let oauth = try OAuthWiring(config, log: log, metrics: metrics, reusing: previous?.oauth)
        // Certificates and keys: each file read once, here; a problem names the file.
        let tls = try TLSWiring(config)
        self.oauth = oauth
        self.tls = tls
        var listeners = config.listen.map {
            ListenerSpec(name: "public", address: $0, config: config.proxy, phases: oauth.phases,
                         tls: tls.credentials, upstreamTLS: tls.upstream)
        }
        if let redirectAddress = config.redirectHTTP {
            var redirectConfig = config.proxy
            redirectConfig.upstream = nil
            listeners.append(ListenerSpec(name: "redirect", address: redirectAddress, config: redirectConfig,
                                          phases: HTTPSRedirect(httpsPort: TLSWiring.httpsPort(config))))
        }
        if let internalAddress = config.internalListen {
            var internalConfig = config.proxy
            internalConfig.upstream = nil
            var spec = ListenerSpec(name: "internal", address: internalAddress, config: internalConfig,
                                    phases: InternalEndpoints(relay: oauth.relayEndpoint, metrics: metrics, readiness: readiness),
                                    accessLogged: false)
            spec.drainsLast = true
            listeners.append(spec)
        }
        self.listeners = listeners
    }

    /// The settings a running process cannot change: sockets, threads, log destinations.
    /// A reload that changes any of them is refused as a whole (restart to apply).
    static func restartOnly(from old: AppConfig, to new: AppConfig) -> [String] {
        var changed: [String] = []
        if old.listen != new.listen { changed.append("listen") }
        if old.internalListen != new.internalListen { changed.append("internal_listen") }
        if old.redirectHTTP != new.redirectHTTP { changed.append("redirect_http") }
        if old.loops != new.loops { changed.append("loops") }
        if old.accessLog != new.accessLog { changed.append("access_log") }
        if old.logFormat != new.logFormat { changed.append("log.format") }
        if (old.tls == nil) != (new.tls == nil) { changed.append("tls (on/off)") }
        return changed
    }
}
