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
    print("callback-proxy \(Options.version) (commit \(Options.commit))")
    exit(0)
case .check:
    exit(Check.run(options))
case .run:
    break
}
// Signals are blocked before anything can start a thread, so that only `Signals.wait` takes
// them: a thread started earlier inherits an open mask, and a SIGHUP that arrives while the main
// thread is not waiting (a reload under way) then goes to that thread — whose default action
// for SIGHUP ends the process. (Until `Signals.wait`, SIGTERM/SIGINT stay pending, then stop us.)
Signals.block()

let started = EventLoop.monotonicNow()
let config: AppConfig
switch Check.load(options) {
case .success(let c): config = c
case .failure(let problems):
    for p in problems.items { _ = "callback-proxy: \(p)\n".withCString { write(2, $0, strlen($0)) } }
    exit(2)
}
let loops = config.loops ?? Options.cores()
HeapHousekeeping.limitArenas(loops: loops)
let log = Logger(level: config.logLevel, format: config.logFormat)
guard let accessLog = AccessLog.open(config.accessLog, loops: loops, format: config.logFormat) else {
    fail("access log: cannot open '\(config.accessLog)'")
}
let serviceManager = ServiceManager(log: log)
let metrics = MetricsRegistry()
metrics.gauge("callback_proxy_build_info", "The running version and commit (value 1).",
              labels: ["version": Options.version, "commit": Options.commit]) { 1 }
let startTime = Double(time(nil))
metrics.gauge("callback_proxy_process_start_time_seconds", "Start time of the process, Unix seconds.") { startTime }
ProcessMetrics.register(metrics, startTime: startTime)
let engineMetrics = EngineMetrics(registry: metrics)
let heap = HeapHousekeeping()
metrics.gauge("callback_proxy_heap_in_use_bytes", "Heap bytes allocated (glibc mallinfo2).") { Double(HeapHousekeeping.heap().inUse) }
metrics.gauge("callback_proxy_heap_free_bytes", "Heap bytes free but held by the allocator (glibc mallinfo2).") {
    Double(HeapHousekeeping.heap().free)
}
metrics.counter("callback_proxy_heap_trims_total", "Times free heap memory was given back to the kernel (malloc_trim).") {
    Double(heap.trimCount)
}
let storeGauges = StoreGauges(registry: metrics)
let providerHealth = ProviderHealth(metrics: metrics, log: log)
let ocsp = OCSPRefresher(metrics: metrics, log: log)
let readiness = Readiness(providers: providerHealth)
let first: Generation
do {
    first = try Generation(config, log: log, metrics: metrics, readiness: readiness)
} catch {
    for p in error.items { _ = "callback-proxy: \(p)\n".withCString { write(2, $0, strlen($0)) } }
    exit(2)
}
readiness.check(store: first.oauth.store, cluster: first.oauth.cluster, upstream: config.upstream, resolver: first.upstreamResolver,
                group: first.readinessGroup, groups: first.groups)

let descriptors = ConnectionBudget.raiseDescriptorLimit()
let maxConnections = ConnectionBudget.clientLimit(descriptors: descriptors, loops: loops, configured: config.maxConnections)
if let asked = config.maxConnections, asked > maxConnections {
    log.warn("limits.max_connections is more than the descriptor limit allows; using the lower figure", [
        "configured": "\(asked)", "used": "\(maxConnections)", "descriptors": "\(descriptors)",
        "setting": "limits.max_connections, or raise the descriptor limit (LimitNOFILE, ulimit -n)",
    ])
}
let server: ProxyServer
do {
    server = try ProxyServer(listeners: first.listeners, loopCount: loops, log: log, accessLog: accessLog, metrics: engineMetrics,
                             maxConnections: maxConnections)
    try server.start()
    readiness.markListening()
    try heap.start()
    first.activate(replacing: nil, log: log, storeGauges: storeGauges)
    providerHealth.watch(config.oauth)
    ocsp.watch(first.tls.credentials)
} catch {
    fail("cannot start: \(error)")
}
let readyMillis = Double((EventLoop.monotonicNow() - started) / 1000) / 1000
log.info("ready", [
    "listen": config.listen.map(\.description).joined(separator: ","),
    "internal": config.internalListen?.description ?? "off",
    "upstream": first.upstreams?.summary ?? "",
    "tls": first.tls.credentials.map { "on (subject \($0.summary.subject), expires \($0.summary.notAfter))" } ?? "off",
    "redirect_http": config.redirectHTTP?.description ?? "off",
    "loops": "\(loops)",
    "max_connections": "\(maxConnections)",
    "max_connections_per_client": config.proxy.clientLimits.connectionCap(budget: maxConnections).map { "\($0)" } ?? "off",
    "rate_limits": "\(config.proxy.clientLimits.rules.count)",
    "providers": config.oauth.providers.keys.sorted().joined(separator: ","),
    "startup_ms": "\(readyMillis)",
])
serviceManager.ready()

let reloader = Reloader(options: options, current: first, server: server, log: log, metrics: metrics, readiness: readiness,
                        storeGauges: storeGauges, providerHealth: providerHealth, ocsp: ocsp)
while true {
    let signal = Signals.wait()
    if signal == SIGHUP {
        serviceManager.reloading()
        reloader.reload()
        serviceManager.ready()
        continue
    }
    if signal == SIGUSR1 {
        // Only a file has anything to reopen (stdout and stderr go where they went).
        guard let file = accessLog, file.path != nil else { continue }
        do {
            try file.reopen()
            log.info("access log reopened", ["file": config.accessLog])
        } catch {
            log.error("access log not reopened; still writing to the file it had", [
                "file": config.accessLog, "reason": error.description, "setting": "access_log",
            ])
        }
        continue
    }
    log.info("shutting down", ["signal": signal == SIGTERM ? "SIGTERM" : "SIGINT"])
    serviceManager.stopping()
    readiness.markDraining()
    let drained = server.shutdown(timeout: reloader.current.config.proxy.timeouts.drain)
    if !drained { log.warn("drain timeout reached; exiting with requests still in flight", [:]) }
    log.info("stopped", [:])
    exit(0)
}
