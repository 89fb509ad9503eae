#if canImport(Glibc)
import Glibc
#endif
import ProxyCore

/// Command-line options. Every flag has an embedded default so the proxy runs with no config file.
struct Options {
    var listen: [SocketAddress] = [.ipv4(host: "127.0.0.1", port: 8080)]
    var internalListen: SocketAddress? = .ipv4(host: "127.0.0.1", port: 8081)
    var upstream: UpstreamTarget? = nil
    var loops: Int = Options.cores()
    var proxy = ProxyConfig()
    var accessLog = "stdout"
    var logLevel: Logger.Level = .info
    var logFormat: Logger.Format = .json

    enum Command { case run, help, version }

    static let usage = """
    callback-proxy \(version): a reverse proxy that completes native-app OAuth callbacks for an unchanged website.

    Usage: callback-proxy --upstream URL [options]

      --listen HOST:PORT              public listener (repeatable; default 127.0.0.1:8080)
      --upstream URL                  http://HOST:PORT or unix:/path (required)
      --internal-listen HOST:PORT     internal listener for /healthz (default 127.0.0.1:8081; "off" disables)
      --loops N                       event-loop threads (default: number of cores)
      --max-body-size SIZE            largest request body, e.g. 512k, 100m, 2g; 0 = no limit (default 100m)
      --max-header-size SIZE          largest request head (default 32k) → 431
      --client-header-timeout DUR     time to receive a request head (default 10s) → 408
      --client-body-timeout DUR       longest pause inside a request body (default 60s) → 408
      --keepalive-timeout DUR         idle keep-alive connections are closed after this (default 75s)
      --upstream-connect-timeout DUR  connecting to the upstream (default 5s) → 504
      --upstream-timeout DUR          waiting for / between upstream response bytes (default 60s) → 504
      --drain-timeout DUR             graceful shutdown limit on SIGTERM/SIGINT (default 30s)
      --trusted-proxy CIDR            peers whose X-Forwarded-* headers are extended, not replaced (repeatable)
      --access-log DEST               stdout, stderr, off or a file path (default stdout)
      --log-level LEVEL               debug, info, warn, error (default info)
      --log-format FORMAT             json or text (default json)
      --help                          this text
      --version                       the version

    Durations: 250ms, 10s, 2m. Sizes: bytes or with k/m/g (powers of 1024).
    """

    static let version = "0.1.0"

    /// Parses `arguments` (without the program name). Throws a message for exit code 2.
    static func parse(_ arguments: [String]) throws(OptionError) -> (Command, Options) {
        var o = Options()
        var sawListen = false
        var i = 0
        func value(_ flag: String) throws(OptionError) -> String {
            i += 1
            guard i < arguments.count else { throw OptionError("\(flag) needs a value") }
            return arguments[i]
        }
        while i < arguments.count {
            var arg = arguments[i]
            var inline: String? = nil
            if arg.hasPrefix("--"), let eq = arg.firstIndex(of: "=") {
                inline = String(arg[arg.index(after: eq)...])
                arg = String(arg[..<eq])
            }
            func next() throws(OptionError) -> String {
                if let inline { return inline }
                return try value(arg)
            }
            switch arg {
            case "--help", "-h": return (.help, o)
            case "--version": return (.version, o)
            case "--listen":
                let v = try next()
                guard let a = SocketAddress.parse(v) else { throw OptionError("--listen: '\(v)' is not HOST:PORT, [V6]:PORT or unix:/path") }
                if !sawListen { o.listen = []; sawListen = true }
                o.listen.append(a)
            case "--internal-listen":
                let v = try next()
                if v == "off" { o.internalListen = nil } else {
                    guard let a = SocketAddress.parse(v) else { throw OptionError("--internal-listen: '\(v)' is not HOST:PORT or off") }
                    o.internalListen = a
                }
            case "--upstream":
                let v = try next()
                guard let t = UpstreamTarget.parse(v) else { throw OptionError("--upstream: '\(v)' is not http://HOST:PORT or unix:/path (HTTPS upstreams are not supported yet)") }
                o.upstream = t
            case "--loops":
                let v = try next()
                guard let n = Int(v), (1...256).contains(n) else { throw OptionError("--loops: '\(v)' is not a number from 1 to 256") }
                o.loops = n
            case "--max-body-size": o.proxy.maxBodySize = try size(arg, try next())
            case "--max-header-size":
                let n = try size(arg, try next())
                guard n >= 1024 && n <= 1 << 20 else { throw OptionError("--max-header-size: must be between 1k and 1m") }
                o.proxy.limits.maxHeadBytes = Int(n)
            case "--client-header-timeout": o.proxy.timeouts.clientHeader = try duration(arg, try next())
            case "--client-body-timeout": o.proxy.timeouts.clientBody = try duration(arg, try next())
            case "--keepalive-timeout": o.proxy.timeouts.keepAlive = try duration(arg, try next())
            case "--upstream-connect-timeout": o.proxy.timeouts.upstreamConnect = try duration(arg, try next())
            case "--upstream-timeout": o.proxy.timeouts.upstreamResponse = try duration(arg, try next())
            case "--drain-timeout": o.proxy.timeouts.drain = try duration(arg, try next())
            case "--trusted-proxy":
                let v = try next()
                guard let c = CIDR.parse(v) else { throw OptionError("--trusted-proxy: '\(v)' is not an address or CIDR range") }
                o.proxy.trustedProxies.append(c)
            case "--access-log": o.accessLog = try next()
            case "--log-level":
                let v = try next()
                guard let l = Logger.Level(name: v) else { throw OptionError("--log-level: '\(v)' is not debug, info, warn or error") }
                o.logLevel = l
            case "--log-format":
                switch try next() {
                case "json": o.logFormat = .json
                case "text": o.logFormat = .text
                case let v: throw OptionError("--log-format: '\(v)' is not json or text")
                }
            default:
                throw OptionError("unknown option '\(arguments[i])' (see --help)")
            }
            i += 1
        }
        guard o.upstream != nil else { throw OptionError("--upstream is required (e.g. --upstream http://127.0.0.1:3000)") }
        o.proxy.upstream = o.upstream
        return (.run, o)
    }

    /// `250ms`, `10s`, `2m`, `1h` → nanoseconds.
    static func duration(_ flag: String, _ text: String) throws(OptionError) -> UInt64 {
        let units: [(String, UInt64)] = [("ms", 1_000_000), ("s", 1_000_000_000), ("m", 60_000_000_000), ("h", 3_600_000_000_000)]
        for (suffix, scale) in units where text.hasSuffix(suffix) {
            let number = text.dropLast(suffix.count)
            if let n = UInt64(number), n > 0, n <= UInt64.max / scale { return n * scale }
        }
        throw OptionError("\(flag): '\(text)' is not a duration like 500ms, 10s or 2m")
    }

    /// `4096`, `512k`, `100m`, `2g` → bytes.
    static func size(_ flag: String, _ text: String) throws(OptionError) -> UInt64 {
        let lower = text.lowercased()
        var scale: UInt64 = 1
        var number = Substring(lower)
        if let last = lower.last, let s = ["k": UInt64(1) << 10, "m": 1 << 20, "g": 1 << 30][String(last)] {
            scale = s
            number = lower.dropLast()
        }
        guard let n = UInt64(number), n <= UInt64.max / scale else {
            throw OptionError("\(flag): '\(text)' is not a size like 4096, 512k, 100m or 2g")
        }
        return n * scale
    }

    static func cores() -> Int {
        let n = sysconf(Int32(_SC_NPROCESSORS_ONLN))
        return n > 0 ? n : 1
    }
}

struct OptionError: Error {
    let message: String
    init(_ message: String) { self.message = message }
}
