import OAuthCallback
import ProxyConfiguration
import ProxyCore

/// SIGHUP. Lives on the main thread (the signal loop); the event loops only ever see the
/// result through `ProxyServer.reload`.
final class Reloader {
    private(set) var current: Generation
    private let options: Options
    private let server: ProxyServer
    private let log: Logger
    private let metrics: MetricsRegistry
    private let readiness: Readiness
    private let reloads: MetricFamily<Counter>
    private let storeGauges: StoreGauges
    private let providerHealth: ProviderHealth
    private let ocsp: OCSPRefresher

    init(options: Options, current: Generation, server: ProxyServer, log: Logger, metrics: MetricsRegistry,
         readiness: Readiness, storeGauges: StoreGauges, providerHealth: ProviderHealth, ocsp: OCSPRefresher) {
        self.ocsp = ocsp
        self.storeGauges = storeGauges
        self.providerHealth = providerHealth
        self.options = options
        self.current = current
        self.server = server
        self.log = log
        self.metrics = metrics
        self.readiness = readiness
        reloads = metrics.counter("callback_proxy_config_reloads_total", "Configuration reloads (SIGHUP), by result.",
                                  labels: ["result"])
        // Both at 0 from the start: the first refused reload after a start is then an increase
        // that `increase()` sees, rather than a series born at 1.
        _ = reloads.labels("success")
        _ = reloads.labels("failure")
    }

    /// SIGHUP: re-read the file, the environment and the certificates; build a whole new
    /// generation; only then switch the listeners to it. Any problem leaves the running
    /// configuration in place and logs every problem. In-flight requests finish on the old one.
    func reload() {
        let fresh: AppConfig
        switch Check.load(options) {
        case .success(let c): fresh = c
        case .failure(let problems):
            return refuseReload(problems.items.map(\.description))
        }
        if fresh == current.config {
            // Only files the configuration points at can have changed: the certificates are
            // swapped in place — new handshakes get them, established connections go on untouched.
            // A named upstream is looked up again and the providers probed again (what an
            // operator sending SIGHUP after fixing a CA bundle or the IdP expects).
            current.upstreamResolver?.refresh()
            providerHealth.watch(current.config.oauth)
            guard let credentials = current.tls.credentials else {
                reloads.labels("success").increment()
                return log.info("configuration reloaded: nothing changed", [:])
            }
            do {
                try credentials.reload()
            } catch {
                reloads.labels("failure").increment()
                return log.error("TLS certificate reload failed; still serving the previous certificates",
                                 ["file": error.file ?? "", "error": error.message])
            }
            reloads.labels("success").increment()
            ocsp.watch(credentials)
            let summary = credentials.summary
            return log.info("TLS certificates reloaded", ["cert": credentials.settings.certFile, "subject": summary.subject,
                                                         "not_after": summary.notAfter,
                                                         "sni_certificates": "\(credentials.settings.sni.count)",
                                                         "session_ticket_keys": "\(credentials.settings.sessionTicketKeyFiles.count)"])
        }
        let restartOnly = Generation.restartOnly(from: current.config, to: fresh)
        if !restartOnly.isEmpty {
            return refuseReload(["these settings need a restart: " + restartOnly.joined(separator: ", ")])
        }
        let next: Generation
        do {
            next = try Generation(fresh, log: log, metrics: metrics, readiness: readiness, previous: current)
        } catch {
            return refuseReload(error.items.map(\.description))
        }
        do {
            try server.reload(next.listeners)
        } catch {
            return refuseReload([error.message])
        }
        log.setLevel(fresh.logLevel)
        readiness.check(store: next.oauth.store, cluster: next.oauth.cluster, upstream: fresh.upstream,
                        resolver: next.upstreamResolver, group: next.readinessGroup, groups: next.groups)
        next.activate(replacing: current, log: log, storeGauges: storeGauges)
        providerHealth.watch(fresh.oauth)
        ocsp.watch(next.tls.credentials)
        current = next
        reloads.labels("success").increment()
        log.info("configuration reloaded", [
            "upstream": next.upstreams?.summary ?? "",
            "providers": fresh.oauth.providers.keys.sorted().joined(separator: ","),
            "tls": next.tls.credentials.map { "subject \($0.summary.subject), expires \($0.summary.notAfter)" } ?? "off",
        ])
    }

    private func refuseReload(_ problems: [String]) {
        reloads.labels("failure").increment()
        for p in problems { log.error("configuration reload refused; still running the previous one", ["problem": p]) }
    }
}
