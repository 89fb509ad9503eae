#if canImport(Glibc)
import Glibc
#endif

/// Everything the engine needs to run, with the defaults a newcomer gets.
/// Durations are nanoseconds; sizes are bytes.
public struct ProxyConfig: Sendable, Equatable {
    /// Where requests that pass the phases go. `nil` for listeners that only answer locally.
    /// With `upstreams:`, the first of them (its `Host` for HTTP/1.0 clients, its TLS name).
    public var upstream: UpstreamTarget? = nil
    /// `upstreams:` — several servers (empty: the one `upstream`).
    public var upstreamServers: [UpstreamServer] = []
    /// How servers are taken out and come back (`upstream_health:`).
    public var upstreamHealth = UpstreamHealthSettings()

    /// How the default group's servers share requests (`upstream_balance`).
    public var upstreamBalance = UpstreamBalance.roundRobin
    /// Answers that send an idempotent request to another server (`upstream_retry_statuses`).
    public var upstreamRetryStatuses: [Int] = []
    /// `upstream_groups:` — further groups, which `routes` send requests to.
    public var upstreamGroups: [UpstreamGroupSettings] = []
    /// `routes:` — which requests go to which group (`UpstreamRoute.group` indexes
    /// `groupSettings`); none: every request goes to the default group.
    public var routes: [UpstreamRoute] = []

    /// Every server requests may go to: `upstreams`, or the one `upstream`.
    public var servers: [UpstreamServer] {
        if !upstreamServers.isEmpty { return upstreamServers }
        return upstream.map { [UpstreamServer(target: $0)] } ?? []
    }

    /// Every group: the default one (the top-level `upstream`/`upstreams`) first, then
    /// `upstream_groups` in order. Empty without an upstream.
    public var groupSettings: [UpstreamGroupSettings] {
        guard upstream != nil else { return [] }
        var main = UpstreamGroupSettings(name: UpstreamGroupSettings.defaultName, servers: servers)
        main.health = upstreamHealth
        main.balance = upstreamBalance
        main.retryStatuses = upstreamRetryStatuses
        main.followsAccelRedirect = true
        return [main] + upstreamGroups
    }
    public var limits = HTTPLimits()
    /// Largest request body accepted (413 beyond). 0 = no limit.
    public var maxBodySize: UInt64 = 100 * 1024 * 1024
    public var timeouts = Timeouts()
    /// Peers whose X-Forwarded-* headers are extended rather than replaced.
    public var trustedProxies: [CIDR] = []
    /// `limits.upstream_idle_connections`: most idle upstream connections kept for reuse, for
    /// the process (shared out evenly over the loops). 0 (the default): as many as the busiest
    /// moment left idle, each closed after `timeouts.upstreamIdle`. That stays within the
    /// descriptor budget: a new upstream connection is opened only when none is idle, so
    /// idle and busy ones together never outnumber the requests once in flight at the same
    /// time, and those are bounded by `limits.max_connections` (an HTTP/1.1 connection has one
    /// request in flight; an HTTP/2 stream beyond a connection's first takes a budget unit of
    /// its own, `StreamAdmitting`). A fixed cap below the
    /// concurrency makes the proxy close and reopen upstream connections under load (a
    /// loop finishes hundreds of responses in one pass before their clients send the next
    /// request): at 1,000 keep-alive clients a cap of 128 per loop halved the throughput.
    public var upstreamIdleConnections = 0

    /// The idle-connection cap of one loop's pool (`Int.max`: none).
    public func upstreamPoolCapacity(loops: Int) -> Int {
        upstreamIdleConnections == 0 ? Int.max : max(1, (upstreamIdleConnections + loops - 1) / loops)
    }
    /// Every connection starts with a PROXY protocol header (v1 or v2) naming the client: the
    /// listener sits behind a layer-4 load balancer that sends one (see `ProxyHeaderReader`).
    public var proxyProtocol = false
    /// Forward header fields whose names carry `_`. Off by default, as nginx's
    /// `underscores_in_headers off`: CGI, Rack, WSGI and PHP fold `_` into `-`, so
    /// `X_Forwarded_For` would reach the app as `X-Forwarded-For`. The forwarding fields
    /// (`HeaderKind.isForwarding`) are dropped in their `_` spellings whatever this says.
    public var allowUnderscoresInHeaders = false
    /// HTTP/2 to clients (ALPN `h2` on TLS listeners; `h2c` on plain ones if asked for).
    public var http2 = HTTP2Settings()
    /// HTTP/3 to clients (QUIC beside each TLS listener; off by default).
    public var http3 = HTTP3Settings()
    /// Response compression (`compression:`); off by default.
    public var compression = CompressionSettings()
    /// The operator's HTML for the proxy's own error answers (`error_pages:`).
    public var errorPages = ErrorPageSettings()
    /// Fields set, added or removed both ways (`headers:`).
    public var headerRules = HeaderRules()
    /// Request rates and connections per client address (`rate_limits:`, `limits.*_client*`).
    public var clientLimits = ClientLimitSettings()
    /// `client_access:` — which client addresses may reach which paths.
    public var clientAccess: [ClientAccessRule] = []
    /// `maintenance:` — a 503 page while a file exists.
    public var maintenance = MaintenanceSettings()
    /// Responses read ahead of slow clients (`buffering:`); off by default.
    public var buffering = BufferingSettings()
    /// Large response bodies spliced from socket to socket (`splice:`); on by default.
    public var splice = SpliceSettings()
    /// Files answered from a directory before the upstream (`static:`); off by default.
    public var staticFiles = StaticSettings()
    /// Files the app hands back with `X-Accel-Redirect` (`x_accel_redirect:`); off by default.
    public var accelRedirect = AccelRedirectSettings()

    public init() {}
}

public struct Timeouts: Sendable, Equatable {
    public static let second: UInt64 = 1_000_000_000
    /// From the first byte of a request (or connection open) until its head is complete → 408.
    public var clientHeader: UInt64 = 10 * second
    /// Longest gap between two reads of a request body → 408.
    public var clientBody: UInt64 = 60 * second
    /// An idle keep-alive client connection is closed after this.
    public var keepAlive: UInt64 = 75 * second
    /// Connecting to the upstream → 504.
    public var upstreamConnect: UInt64 = 5 * second
    /// Waiting for the upstream's response head, or between two reads of its body → 504 / abort.
    public var upstreamResponse: UInt64 = 60 * second
    /// Idle pooled upstream connections are closed after this (below common upstream keep-alive limits).
    public var upstreamIdle: UInt64 = 15 * second
    /// Writing to a client that does not read (a response stuck in our buffer).
    public var clientSend: UInt64 = 60 * second
    /// On shutdown, how long in-flight requests may take before the process exits anyway.
    public var drain: UInt64 = 30 * second
    /// A TLS client's handshake must finish within this after its connection is accepted.
    /// (Upstream handshakes count towards `upstreamConnect`.)
    public var tlsHandshake: UInt64 = 10 * second
    public init() {}
}

/// The upstream: where its connections go and the `Host`-independent facts about it.
public struct UpstreamTarget: Sendable, Equatable, CustomStringConvertible {
    /// Where connections go.
    public enum Endpoint: Sendable, Equatable {
        /// An IP address or a unix socket, used as written.
        case address(SocketAddress)
        /// A host name, looked up by an `HostResolver` (`http://app:3000` in a compose
        /// file, a Kubernetes service name).
        case name(String, port: UInt16)
    }

    public var endpoint: Endpoint
    /// `https://`: connections do TLS (see `UpstreamTLSClient`).
    public var tls: Bool = false

    public init(address: SocketAddress, tls: Bool = false) {
        self.endpoint = .address(address)
        self.tls = tls
    }

    public init(name: String, port: UInt16, tls: Bool = false) {
        self.endpoint = .name(name, port: port)
        self.tls = tls
    }

    /// Parses `http://HOST:PORT`, `https://HOST:PORT` (port 80 / 443 by default) or `unix:/path`.
    /// HOST is an IP address or a DNS name (letters, digits, hyphens and dots only).
    public static func parse(_ text: String) -> UpstreamTarget? {
        if text.hasPrefix("unix:") {
            return SocketAddress.parse(text).map { UpstreamTarget(address: $0) }
        }
        let lower = text.lowercased()
        let tls = lower.hasPrefix("https://")
        guard tls || lower.hasPrefix("http://") else { return nil }
        var rest = Substring(text.dropFirst(tls ? 8 : 7))
        if rest.hasSuffix("/") { rest = rest.dropLast() }
        if rest.isEmpty || rest.hasPrefix(":") { return nil }
        // A port is present unless the text ends in a host or a bracketed IPv6 address.
        if !(rest.hasPrefix("[") ? rest.contains("]:") : rest.contains(":")) { rest += tls ? ":443" : ":80" }
        if let address = SocketAddress.parse(String(rest)) { return UpstreamTarget(address: address, tls: tls) }
        guard let split = HostSyntax.splitHost(String(rest)), let port = split.port, port > 0,
              case let host = split.host, HostSyntax.isDNSName(host.utf8, maxLength: 253),
              // Not `1.2.3`, `0x7f` or `017.1`: getaddrinfo would read them as IPv4 addresses
              // in inet_aton's old forms, so they would not mean what they seem to.
              !Self.isLegacyIPv4(host) else { return nil }
        return UpstreamTarget(name: host.lowercased(), port: port, tls: tls)
    }

    private static func isLegacyIPv4(_ host: String) -> Bool {
        var probe = in_addr()
        return inet_aton(host, &probe) != 0
    }

    /// The fixed address, when the upstream is not given by name.
    public var address: SocketAddress? {
        if case .address(let a) = endpoint { return a }
        return nil
    }

    /// The host as written in a URL (an IPv6 address without brackets), for TLS name checks.
    public var host: String {
        switch endpoint {
        case .address(.ipv4(let h, _)), .address(.ipv6(let h, _)): return h
        case .address(.unix): return "localhost"
        case .name(let name, _): return name
        }
    }

    /// `host:port` (or `unix:/path`): for logs, and the `Host` sent when a client sent none.
    public var description: String {
        switch endpoint {
        case .address(let a): return a.description
        case .name(let name, let port): return "\(name):\(port)"
        }
    }
}

/// An address range such as `10.0.0.0/8` or `::1/128`.
public struct CIDR: Sendable, Equatable {
    let prefix: [UInt8]
    let bits: Int
    let isV4: Bool

    public static func parse(_ text: String) -> CIDR? {
        let parts = text.split(separator: "/", maxSplits: 1)
        let host = String(parts[0])
        if let bytes = parseIP(host, family: AF_INET, size: 4) {
            let bits = parts.count == 2 ? Int(parts[1]) : 32
            guard let bits, (0...32).contains(bits) else { return nil }
            return CIDR(prefix: bytes, bits: bits, isV4: true)
        }
        if let bytes = parseIP(host, family: AF_INET6, size: 16) {
            let bits = parts.count == 2 ? Int(parts[1]) : 128
            guard let bits, (0...128).contains(bits) else { return nil }
            return CIDR(prefix: bytes, bits: bits, isV4: false)
        }
        return nil
    }

    /// Read in place from the address's bytes: this runs per request with `trusted_proxies`,
    /// and per connection and request with `limits.exempt_clients`.
    func contains(_ peer: PeerAddress) -> Bool {
        guard !peer.isUnix, peer.isV4 == isV4 else { return false }
        return withUnsafeBytes(of: peer.bytes) { octets in
            var remaining = bits
            var i = 0
            while remaining > 0 {
                let mask: UInt8 = remaining >= 8 ? 0xFF : ~(0xFF >> UInt8(remaining))
                if octets[i] & mask != prefix[i] & mask { return false }
                remaining -= 8
                i += 1
            }
            return true
        }
    }
}

private func parseIP(_ text: String, family: Int32, size: Int) -> [UInt8]? {
    var storage = in6_addr()
    guard inet_pton(family, text, &storage) == 1 else { return nil }
    return withUnsafeBytes(of: &storage) { Array($0.prefix(size)) }
}
