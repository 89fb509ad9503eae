#if canImport(Glibc)
import Glibc
#endif
import CBuildInfo
import ProxyConfiguration
import ProxyCore

/// The command line. Flags are recorded as edits and applied on top of the configuration
/// file (or the embedded defaults when there is none), so a flag always wins.
struct Options {
    enum Command { case run, check, help, version }

    var command: Command = .run
    var configPath: String? = nil
    /// `check --online`: also fetch each provider's discovery document and keys.
    var online = false
    /// `check --stop-timeout DUR`: the supervisor's stop timeout (systemd's TimeoutStopSec),
    /// which a drain must finish within or be cut short by SIGKILL.
    var stopTimeout: UInt64? = nil
    private var edits: [(inout AppConfig) -> Void] = []
    /// `--tls-min-version`, applied to whichever TLS settings result from the file and flags.
    var tlsMinVersion: TLSVersion? = nil
    /// `--no-http2`, applied (like `tlsMinVersion`) to the TLS settings the file and flags give.
    var noHTTP2 = false

    static let version = "0.1.0"
    /// The commit the binary was built from (scripts/build records it), "unknown" otherwise.
    static let commit = String(cString: CBuildInfo_commit())

    static let usage = """
    callback-proxy \(version): a reverse proxy that completes native-app OAuth callbacks for an unchanged website.

    Usage: callback-proxy [--config FILE] [options]
           callback-proxy check [--online] [--stop-timeout DUR] [--config FILE] [options]
                                              validate the configuration (file, CALLBACK_PROXY_…
                                              variables and flags), report every problem; --online
                                              also fetches each provider's discovery document and keys

      --stop-timeout DUR              check only: the supervisor's stop timeout (TimeoutStopSec); warns
                                      when timeouts.drain does not fit in it

      --config FILE                   YAML (or JSON) configuration; flags below override it
      --listen HOST:PORT              public listener (repeatable; default 127.0.0.1:8080)
      --upstream URL                  http://HOST:PORT, https://HOST:PORT or unix:/path (required, here or in the file)
      --internal-listen HOST:PORT     internal listener for /healthz (default 127.0.0.1:8081; "off" disables)
      --loops N                       event-loop threads (default: number of cores)
      --max-body-size SIZE            largest request body, e.g. 512k, 100m, 2g; 0 = no limit (default 100m)
      --max-header-size SIZE          largest request head (default 32k) → 431
      --client-header-timeout DUR     time to receive a request head (default 10s) → 408
      --client-body-timeout DUR       longest pause inside a request body (default 60s) → 408
      --client-send-timeout DUR       a client that reads nothing of its response for this long is dropped (default 60s)
      --keepalive-timeout DUR         idle keep-alive connections are closed after this (default 75s)
      --upstream-connect-timeout DUR  connecting to the upstream (default 5s) → 504
      --upstream-timeout DUR          waiting for / between upstream response bytes (default 60s) → 504
      --upstream-resolve-interval DUR look an upstream host name up again this often (default 10s; 0 = at start only)
      --drain-timeout DUR             graceful shutdown limit on SIGTERM/SIGINT (default 30s)
      --trusted-proxy CIDR            peers whose X-Forwarded-* headers are extended, not replaced (repeatable)
      --proxy-protocol                every public connection starts with a PROXY protocol header (v1/v2) naming the client
      --allow-underscores-in-headers  forward header fields whose names carry _ (dropped by default)
      --tls-cert FILE                 serve TLS on the --listen addresses: PEM certificate chain (with --tls-key)
      --tls-key FILE                  PEM private key of --tls-cert (read once; reloaded on SIGHUP with the certificate)
      --tls-min-version V             1.2 or 1.3 (default 1.2; TLS 1.0/1.1 are never accepted)
      --no-http2                      TLS listeners offer only HTTP/1.1 in ALPN (default: h2 preferred, http/1.1 kept)
      --http2-cleartext               plain listeners also accept prior-knowledge HTTP/2 (h2c), for a TLS balancer in front
      --tls-handshake-timeout DUR     a client's TLS handshake must finish within this (default 10s)
      --redirect-http HOST:PORT       plain-HTTP listener that answers 308 to https://<host><path> (needs TLS)
      --upstream-ca FILE              trust these CAs (PEM) for an https:// upstream instead of the system store
      --upstream-client-cert FILE     client certificate (PEM chain) for an https:// upstream that wants mutual TLS
      --upstream-client-key FILE      its private key
      --upstream-server-name NAME     name sent as SNI and verified in the upstream's certificate (default: its host)
      --access-log DEST               stdout, stderr, off or a file path (default stdout)
      --log-level LEVEL               debug, info, warn, error (default info)
      --log-format FORMAT             json or text (default json)
      --help                          this text
      --version                       the version and the commit it was built from

    Durations: 250ms, 10s, 2m. Sizes: bytes or with k/m/g (powers of 1024).
    """

    /// Parses `arguments` (without the program name). Throws a message for exit code 2.
    static func parse(_ arguments: [String]) throws(OptionError) -> Options {
        var o = Options()
        var args = arguments[...]
        if args.first == "check" {
            o.command = .check
            args = args.dropFirst()
        }
        var sawListen = false
        while let raw = args.popFirst() {
            var flag = raw
            var inline: String? = nil
            if raw.hasPrefix("--"), let eq = raw.firstIndex(of: "=") {
                inline = String(raw[raw.index(after: eq)...])
                flag = String(raw[..<eq])
            }
            func value() throws(OptionError) -> String {
                if let inline { return inline }
                guard let v = args.popFirst() else { throw OptionError("\(flag) needs a value") }
                return v
            }
            func duration() throws(OptionError) -> UInt64 {
                let v = try value()
                guard let d = Units.duration(v) else { throw OptionError("\(flag): '\(v)' is not a duration like 500ms, 10s or 2m") }
                return d
            }
            switch flag {
            case "--help", "-h": o.command = .help; return o
            case "--version": o.command = .version; return o
            case "--config": o.configPath = try value()
            case "--online":
                guard o.command == .check else { throw OptionError("--online is a check option: callback-proxy check --online") }
                o.online = true
            case "--stop-timeout":
                guard o.command == .check else { throw OptionError("--stop-timeout is a check option: callback-proxy check --stop-timeout 45s") }
                o.stopTimeout = try duration()
            case "--listen":
                let v = try value()
                guard let a = SocketAddress.parse(v) else { throw OptionError("--listen: '\(v)' is not HOST:PORT, [V6]:PORT or unix:/path") }
                let first = !sawListen
                sawListen = true
                o.edits.append { c in if first { c.listen = [] }; c.listen.append(a) }
            case "--internal-listen":
                let v = try value()
                if v == "off" { o.edits.append { $0.internalListen = nil } } else {
                    guard let a = SocketAddress.parse(v) else { throw OptionError("--internal-listen: '\(v)' is not HOST:PORT or off") }
                    o.edits.append { $0.internalListen = a }
                }
            case "--upstream":
                let v = try value()
                guard let t = UpstreamTarget.parse(v) else {
                    throw OptionError("--upstream: '\(v)' is not http://HOST:PORT, https://HOST:PORT or unix:/path (HOST is an IP address)")
                }
                o.edits.append { $0.upstream = t; $0.proxy.upstreamServers = [] }
            case "--loops":
                let v = try value()
                guard let n = Int(v), (1...256).contains(n) else { throw OptionError("--loops: '\(v)' is not a number from 1 to 256") }
                o.edits.append { $0.loops = n }
            case "--max-body-size":
                let v = try value()
                guard let n = Units.size(v) else { throw OptionError("--max-body-size: '\(v)' is not a size like 512k, 100m or 2g") }
                o.edits.append { $0.proxy.maxBodySize = n }
            case "--max-header-size":
                let v = try value()
                guard let n = Units.size(v), n >= 1024, n <= 1 << 20 else { throw OptionError("--max-header-size: '\(v)' is not a size from 1k to 1m") }
                o.edits.append { $0.proxy.limits.maxHeadBytes = Int(n) }
            case "--client-header-timeout": let d = try duration(); o.edits.append { $0.proxy.timeouts.clientHeader = d }
            case "--client-body-timeout": let d = try duration(); o.edits.append { $0.proxy.timeouts.clientBody = d }
            case "--client-send-timeout": let d = try duration(); o.edits.append { $0.proxy.timeouts.clientSend = d }
            case "--keepalive-timeout": let d = try duration(); o.edits.append { $0.proxy.timeouts.keepAlive = d }
            case "--upstream-connect-timeout": let d = try duration(); o.edits.append { $0.proxy.timeouts.upstreamConnect = d }
            case "--upstream-timeout": let d = try duration(); o.edits.append { $0.proxy.timeouts.upstreamResponse = d }
            case "--upstream-resolve-interval":
                let v = try value()
                guard let d = v == "0" ? 0 : Units.duration(v) else {
                    throw OptionError("--upstream-resolve-interval: '\(v)' is not a duration like 10s or 1m, or 0")
                }
                o.edits.append { $0.upstreamResolveInterval = d }
            case "--drain-timeout": let d = try duration(); o.edits.append { $0.proxy.timeouts.drain = d }
            case "--trusted-proxy":
                let v = try value()
                guard let c = CIDR.parse(v) else { throw OptionError("--trusted-proxy: '\(v)' is not an address or CIDR range") }
                o.edits.append { $0.proxy.trustedProxies.append(c) }
            case "--proxy-protocol": o.edits.append { $0.proxy.proxyProtocol = true }
            case "--allow-underscores-in-headers": o.edits.append { $0.proxy.allowUnderscoresInHeaders = true }
            case "--tls-cert":
                let v = try value()
                o.edits.append { c in if c.tls == nil { c.tls = TLSServerSettings(certFile: v, keyFile: "") } else { c.tls!.certFile = v } }
            case "--tls-key":
                let v = try value()
                o.edits.append { c in if c.tls == nil { c.tls = TLSServerSettings(certFile: "", keyFile: v) } else { c.tls!.keyFile = v } }
            case "--tls-min-version":
                let v = try value()
                guard let version = TLSVersion(v) else { throw OptionError("--tls-min-version: '\(v)' is not 1.2 or 1.3") }
                // Applied after the file; checked together with the certificate (Check.load).
                o.tlsMinVersion = version
            case "--no-http2": o.noHTTP2 = true
            case "--http2-cleartext": o.edits.append { $0.proxy.http2.cleartext = true }
            case "--tls-handshake-timeout": let d = try duration(); o.edits.append { $0.proxy.timeouts.tlsHandshake = d }
            case "--redirect-http":
                let v = try value()
                guard let a = SocketAddress.parse(v), a.isIP else { throw OptionError("--redirect-http: '\(v)' is not HOST:PORT or [V6]:PORT") }
                o.edits.append { $0.redirectHTTP = a }
            case "--upstream-ca": let v = try value(); o.edits.append { $0.upstreamTLS.caFile = v }
            case "--upstream-client-cert": let v = try value(); o.edits.append { $0.upstreamTLS.clientCertFile = v }
            case "--upstream-client-key": let v = try value(); o.edits.append { $0.upstreamTLS.clientKeyFile = v }
            case "--upstream-server-name":
                let v = try value()
                guard UpstreamTLSSettings.isValidServerName(v) else { throw OptionError("--upstream-server-name: '\(v)' is not a DNS name or an IP address") }
                o.edits.append { $0.upstreamTLS.serverName = v }
            case "--access-log": let v = try value(); o.edits.append { $0.accessLog = v }
            case "--log-level":
                let v = try value()
                guard let l = Logger.Level(name: v) else { throw OptionError("--log-level: '\(v)' is not debug, info, warn or error") }
                o.edits.append { $0.logLevel = l }
            case "--log-format":
                let v = try value()
                guard let f = ["json": Logger.Format.json, "text": .text][v] else { throw OptionError("--log-format: '\(v)' is not json or text") }
                o.edits.append { $0.logFormat = f }
            default:
                throw OptionError("unknown option '\(raw)' (see --help)")
            }
        }
        return o
    }

    /// The file's configuration (or the defaults) with the flags applied.
    func resolve(_ base: AppConfig) -> AppConfig {
        var c = base
        for edit in edits { edit(&c) }
        if let v = tlsMinVersion {
            if c.tls == nil { c.tls = TLSServerSettings(certFile: "", keyFile: "") }
            c.tls!.minVersion = v
        }
        if noHTTP2 { c.tls?.http2 = false }
        c.proxy.upstream = c.upstream
        return c
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
