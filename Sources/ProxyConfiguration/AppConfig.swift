import OAuthCallback
import ProxyCore

/// Everything `callback-proxy` runs with: the engine's settings and the OAuth layer's.
/// Built from embedded defaults, then the configuration file, then command-line flags.
public struct AppConfig: Sendable, Equatable {
    public var listen: [SocketAddress] = [.ipv4(host: "127.0.0.1", port: 8080)]
    /// The internal listener (/healthz, later the relay token endpoint and /metrics). nil = off.
    public var internalListen: SocketAddress? = .ipv4(host: "127.0.0.1", port: 8081)
    public var upstream: UpstreamTarget? = nil
    /// How often an upstream host name is looked up again, in nanoseconds; 0: only at start
    /// and on a reload.
    public var upstreamResolveInterval: UInt64 = 10_000_000_000
    /// TLS on the public listeners; nil = plain HTTP.
    public var tls: TLSServerSettings? = nil
    /// A plain-HTTP listener that answers everything with a redirect to HTTPS (needs `tls`).
    public var redirectHTTP: SocketAddress? = nil
    /// Trust, name and client certificate for an `https://` upstream.
    public var upstreamTLS = UpstreamTLSSettings()
    /// Event-loop threads; nil = one per core.
    public var loops: Int? = nil
    /// `limits.max_connections`: client connections open at once on the public listeners;
    /// nil: derived from the descriptor limit (`ConnectionBudget.clientLimit`), which it can
    /// only lower.
    public var maxConnections: Int? = nil
    /// Limits, timeouts, trusted proxies.
    public var proxy = ProxyConfig()
    public var accessLog = "stdout"
    public var logLevel: Logger.Level = .info
    public var logFormat: Logger.Format = .json
    /// `store` and every `store_*` key, parsed (`store: memory` with 128 MiB by default).
    public var store: StoreSpec = .defaultMemory
    public var oauth = OAuthSettings()

    public init() {}
}

/// One thing wrong with a configuration, at its key path (`providers.google.native.ios.client_id`),
/// or in the environment variable that set it.
public struct ConfigProblem: Sendable, Equatable, CustomStringConvertible {
    public let path: String
    public let line: Int?
    public let message: String
    /// The `CALLBACK_PROXY_…` variable the value came from, if it did.
    public let variable: String?

    public init(path: String, line: Int?, message: String, variable: String? = nil) {
        self.path = path
        self.line = line
        self.message = message
        self.variable = variable
    }

    public var description: String {
        if let variable {
            return path.isEmpty ? "\(variable): \(message)" : "\(path) (from \(variable)): \(message)"
        }
        let at = line.map { " (line \($0))" } ?? ""
        return "\(path.isEmpty ? "<root>" : path)\(at): \(message)"
    }
}

/// All problems found in one configuration.
public struct ConfigProblems: Error, Sendable {
    public var items: [ConfigProblem]
    public init(_ items: [ConfigProblem]) { self.items = items }
}
