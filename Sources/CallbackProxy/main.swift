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
let engineMetrics = EngineMetrics(registry: metrics)
let oauth: OAuthWiring
do {
    oauth = try OAuthWiring(config, log: log, metrics: metrics)
} catch {
    for p in error.items { _ = "callback-proxy: \(p)\n".withCString { write(2, $0, strlen($0)) } }
    exit(2)
}
// Certificates and keys: each file read once, here; a problem names the file and exits 2.
let tls: TLSWiring
do {
    tls = try TLSWiring(config)
} catch {
    for p in error.items { _ = "callback-proxy: \(p)\n".withCString { write(2, $0, strlen($0)) } }
    exit(2)
}
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
let readiness = Readiness(store: oauth.store, upstream: config.upstream?.address)
if let internalAddress = config.internalListen {
    var internalConfig = config.proxy
    internalConfig.upstream = nil
    var spec = ListenerSpec(name: "internal", address: internalAddress, config: internalConfig,
                            phases: InternalEndpoints(relay: oauth.relayEndpoint, metrics: metrics, readiness: readiness),
                            accessLogged: false)
    spec.drainsLast = true
    listeners.append(spec)
}

// Signals are blocked before any thread starts so that only `Signals.wait` receives them.
Signals.block()
let server: ProxyServer
do {
    server = try ProxyServer(listeners: listeners, loopCount: loops, log: log, accessLog: accessLog, metrics: engineMetrics)
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
    "tls": tls.credentials.map { "on (subject \($0.summary.subject), expires \($0.summary.notAfter))" } ?? "off",
    "redirect_http": config.redirectHTTP?.description ?? "off",
    "loops": "\(loops)",
    "providers": config.oauth.providers.keys.sorted().joined(separator: ","),
    "startup_ms": "\(readyMillis)",
])

while true {
    let signal = Signals.wait()
    if signal == SIGHUP {
        // New handshakes get the new certificates; established connections keep theirs. A
        // bad file leaves the running certificates in place.
        guard let credentials = tls.credentials else {
            log.info("SIGHUP received: nothing to reload (no TLS listener)", [:])
            continue
        }
        do {
            try credentials.reload()
            let summary = credentials.summary
            log.info("TLS certificates reloaded", ["cert": credentials.settings.certFile, "subject": summary.subject,
                                                  "not_after": summary.notAfter, "sni_certificates": "\(credentials.settings.sni.count)"])
        } catch {
            log.error("TLS certificate reload failed; still serving the previous certificates",
                      ["file": error.file ?? "", "error": error.message])
        }
        continue
    }
    log.info("shutting down", ["signal": signal == SIGTERM ? "SIGTERM" : "SIGINT"])
    readiness.markDraining()
    let drained = server.shutdown(timeout: config.proxy.timeouts.drain)
    if !drained { log.warn("drain timeout reached; exiting with requests still in flight", [:]) }
    log.info("stopped", [:])
    exit(0)
}
