import ProxyCore

/// One `host:port` of a multi-host store URL (a sentinel, a cluster seed node).
public struct RedisEndpoint: Sendable, Equatable {
    public var host: String
    public var port: Int

    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// `host:port`, an IPv6 address in brackets.
    public var description: String { (host.contains(":") ? "[\(host)]" : host) + ":\(port)" }

    /// Its addresses, kept current off the loops: looked up now (blocking; at set-up), then
    /// every `RedisStore.resolveInterval` on the resolver's own thread (an IP address needs no
    /// second look). `role` names it in log lines.
    func resolver(role: String, logger: Logger?) -> HostResolver {
        let resolver = HostResolver(name: host, port: UInt16(clamping: port), interval: RedisStore.resolveInterval,
                                    log: logger, role: role)
        if PeerAddress(text: host) == nil {
            do {
                try resolver.start()
            } catch {
                logger?.error("cannot start the \(role) resolver thread; the name is looked up at set-up only",
                              ["host": host, "error": "\(error)"])
            }
        }
        return resolver
    }
}

/// What the multi-host URL forms (`redis+sentinel://`, `redis+cluster://`) share: the
/// `[user:password@]host[:port],host[:port]…` part after the scheme, each host and the
/// userinfo read by `RedisURL`'s parser, so every form accepts the same syntax. Errors never
/// contain the password.
struct RedisHostList {
    var endpoints: [RedisEndpoint]
    var username: String?
    var password: String?
    /// What follows the host list: "" or "/…".
    var path: Substring

    /// `what` names a host in errors ("sentinel", "node"); a host without a port gets `defaultPort`.
    init(parsing rest: Substring, what: String, defaultPort: Int, _ bad: (String) -> StoreError) throws(StoreError) {
        var rest = rest
        var userinfo: Substring = ""
        // The path never holds an '@' (a master name is a word, a database a number), so the
        // last '@' before it ends the userinfo.
        let pathStart = rest.firstIndex(of: "/") ?? rest.endIndex
        if let at = rest[..<pathStart].lastIndex(of: "@") {
            userinfo = rest[...at]
            rest = rest[rest.index(after: at)...]
        }
        let slash = rest.firstIndex(of: "/") ?? rest.endIndex
        path = rest[slash...]
        endpoints = []
        for host in rest[..<slash].split(separator: ",", omittingEmptySubsequences: false) {
            guard !host.isEmpty else { throw bad("an empty \(what) address in the list") }
            let bare = host.hasPrefix("[") ? host.hasSuffix("]") : !host.contains(":")
            let one: RedisURL
            do {
                one = try RedisURL(parsing: "redis://" + host + (bare ? ":\(defaultPort)" : ""))
            } catch {
                throw bad("\(what) '\(host)': \(Self.why(error))")
            }
            endpoints.append(RedisEndpoint(host: one.host, port: one.port))
        }
        if !userinfo.isEmpty {
            // Read with a placeholder host: only the credentials are taken from it.
            do {
                let creds = try RedisURL(parsing: "redis://" + userinfo + "placeholder")
                username = creds.username
                password = creds.password
            } catch {
                throw bad(Self.why(error))
            }
        }
    }

    /// A `RedisURL` parse error without its own prefix.
    private static func why(_ error: StoreError) -> String {
        let prefix = "redis url: "
        return error.detail.hasPrefix(prefix) ? String(error.detail.dropFirst(prefix.count)) : error.detail
    }

    /// `[user[:***]@]host:port,…` for a redacted URL: the password never shown.
    static func redacted(_ endpoints: [RedisEndpoint], username: String?, password: String?) -> String {
        var s = ""
        if let username { s += username + (password != nil ? ":***@" : "@") }
        else if password != nil { s += ":***@" }
        return s + endpoints.map(\.description).joined(separator: ",")
    }
}
