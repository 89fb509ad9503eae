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

// Thin on purpose: parse flags, start the server, wait for a signal, drain.
let parsed: (Options.Command, Options)
do {
    parsed = try Options.parse(Array(CommandLine.arguments.dropFirst()))
} catch {
    fail(error.message)
}
let (command, options) = parsed
switch command {
case .help:
    print(Options.usage)
    exit(0)
case .version:
    print("callback-proxy \(Options.version)")
    exit(0)
case .run:
    break
}

let started = EventLoop.monotonicNow()
let log = Logger(level: options.logLevel, format: options.logFormat)
guard let accessLog = AccessLog.open(options.accessLog, loops: options.loops) else {
    fail("--access-log: cannot open '\(options.accessLog)'")
}
var listeners = options.listen.map {
    ListenerSpec(name: "public", address: $0, config: options.proxy, phases: PassThrough())
}
if let internalAddress = options.internalListen {
    var internalConfig = options.proxy
    internalConfig.upstream = nil
    listeners.append(ListenerSpec(name: "internal", address: internalAddress, config: internalConfig,
                                   phases: InternalEndpoints(), accessLogged: false))
}

// Signals are blocked before any thread starts so that only `Signals.wait` receives them.
Signals.block()
let server: ProxyServer
do {
    server = try ProxyServer(listeners: listeners, loopCount: options.loops, log: log, accessLog: accessLog)
    try server.start()
} catch {
    fail("cannot start: \(error)")
}
let readyMillis = Double((EventLoop.monotonicNow() - started) / 1000) / 1000
log.info("ready", [
    "listen": options.listen.map(\.description).joined(separator: ","),
    "internal": options.internalListen?.description ?? "off",
    "upstream": options.upstream!.address.description,
    "loops": "\(options.loops)",
    "startup_ms": "\(readyMillis)",
])

while true {
    let signal = Signals.wait()
    if signal == SIGHUP {
        log.info("SIGHUP received: nothing to reload yet", [:])
        continue
    }
    log.info("shutting down", ["signal": signal == SIGTERM ? "SIGTERM" : "SIGINT"])
    let drained = server.shutdown(timeout: options.proxy.timeouts.drain)
    if !drained { log.warn("drain timeout reached; exiting with requests still in flight", [:]) }
    log.info("stopped", [:])
    exit(0)
}
