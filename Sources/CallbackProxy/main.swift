import ProxyConfiguration
import ProxyCore
#if canImport(Glibc)
import Glibc
#endif

/// Prints a usage error and exits 2 (bad flag, bad value, unusable address).
func fail(_ message: String) -> Never {
    let line = "callback-proxy: \(message)\n"
    _ = line.withCString { write(2, $0, strlen($0)) }
    exit(2)
}

// Thin on purpose: parse flags, load and validate the configuration, start, wait for a signal.
let options: Options
do {
    options = try Options.parse(Array(CommandLine.arguments.dropFirst()))
} catch {
    fail(error.message)
}
switch options.command {
case .help:
    print(Options.usage)
    exit(0)
case .version:
    print("callback-proxy \(Options.version)")
    exit(0)
case .check:
    exit(Check.run(options))
case .run:
    break
}

let started = EventLoop.monotonicNow()
let config: AppConfig
switch Check.load(options) {
case .success(let c): config = c
case .failure(let problems):
    for p in problems.items { _ = "callback-proxy: \(p)\n".withCString { write(2, $0, strlen($0)) } }
    exit(2)
}
let loops = config.loops ?? Options.cores()
let log = Logger(level: config.logLevel, format: config.logFormat)
guard let accessLog = AccessLog.open(config.accessLog, loops: loops) else {
    fail("access log: cannot open '\(config.accessLog)'")
}
let metrics = MetricsRegistry()
metrics.gauge("callback_proxy_build_info", "The running version (value 1).", labels: ["version": Options.version]) { 1 }
let startTime = Double(time(nil))
metrics.gauge("callback_proxy_process_start_time_seconds", "Start time of the process, Unix seconds.") { startTime }
let reloads = metrics.counter("callback_proxy_config_reloads_total", "Configuration reloads (SIGHUP), by result.",
                              labels: ["result"])
let engineMetrics = EngineMetrics(registry: metrics)
let readiness = Readiness()
var current: Generation
do {
    current = try Generation(config, log: log, metrics: metrics, readiness: readiness)
} catch {
    for p in error.items { _ = "callback-proxy: \(p)\n".withCString { write(2, $0, strlen($0)) } }
    exit(2)
}
readiness.check(store: current.oauth.store, upstream: config.upstream?.address)

// Signals are blocked before any thread starts so that only `Signals.wait` receives them.
Signals.block()
let server: ProxyServer
do {
    server = try ProxyServer(listeners: current.listeners, loopCount: loops, log: log, accessLog: accessLog, metrics: engineMetrics)
    try server.start()
    readiness.markListening()
} catch {
    fail("cannot start: \(error)")
}
let readyMillis = Double((EventLoop.monotonicNow() - started) / 1000) / 1000
log.info("ready", [
    "listen": config.listen.map(\.description).joined(separator: ","),
    "internal": config.internalListen?.description ?? "off",
    "upstream": (config.upstream!.tls ? "https://" : "") + config.upstream!.address.description,
    "tls": current.tls.credentials.map { "on (subject \($0.summary.subject), expires \($0.summary.notAfter))" } ?? "off",
    "redirect_http": config.redirectHTTP?.description ?? "off",
    "loops": "\(loops)",
    "providers": config.oauth.providers.keys.sorted().joined(separator: ","),
    "startup_ms": "\(readyMillis)",
])

while true {
    let signal = Signals.wait()
    if signal == SIGHUP {
        reload()
        continue
    }
    log.info("shutting down", ["signal": signal == SIGTERM ? "SIGTERM" : "SIGINT"])
    readiness.markDraining()
    let drained = server.shutdown(timeout: config.proxy.timeouts.drain)
    if !drained { log.warn("drain timeout reached; exiting with requests still in flight", [:]) }
    log.info("stopped", [:])
    exit(0)
}

/// SIGHUP: re-read the file, the environment and the certificates; build a whole new
/// generation; only then switch the listeners to it. Any problem leaves the running
/// configuration in place and logs every problem. In-flight requests finish on the old one.
@MainActor func reload() {
    let fresh: AppConfig
    switch Check.load(options) {
    case .success(let c): fresh = c
    case .failure(let problems):
        return refuseReload(problems.items.map(\.description))
    }
    if fresh == current.config {
        // Only files the configuration points at can have changed: the certificates are
        // swapped in place — new handshakes get them, established connections go on untouched.
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
        let summary = credentials.summary
        return log.info("TLS certificates reloaded", ["cert": credentials.settings.certFile, "subject": summary.subject,
                                                     "not_after": summary.notAfter,
                                                     "sni_certificates": "\(credentials.settings.sni.count)"])
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
    readiness.check(store: next.oauth.store, upstream: fresh.upstream?.address)
    current = next
    reloads.labels("success").increment()
    log.info("configuration reloaded", [
        "upstream": (fresh.upstream!.tls ? "https://" : "") + fresh.upstream!.address.description,
        "providers": fresh.oauth.providers.keys.sorted().joined(separator: ","),
        "tls": next.tls.credentials.map { "subject \($0.summary.subject), expires \($0.summary.notAfter)" } ?? "off",
    ])
}

@MainActor func refuseReload(_ problems: [String]) {
    reloads.labels("failure").increment()
    for p in problems { log.error("configuration reload refused; still running the previous one", ["problem": p]) }
}
