/// Where a Redis Cluster store is found:
/// `redis+cluster://[user:password@]host[:port][,host[:port]…][/0]`.
///
/// - The hosts are **seed nodes** (port 6379 by default): any of them is asked for the slot
///   map (`CLUSTER SLOTS`); after that the proxy speaks to the primaries the cluster announces,
///   which need not be among the seeds. One live seed is enough to start.
/// - `user` and `password` are every node's (a cluster shares one `requirepass`/ACL), as in a
///   `redis://` URL.
/// - A cluster has database 0 only (`SELECT` is refused in cluster mode): the path is absent,
///   `/` or `/0`; any other database is refused here, so a typo fails `check`, not a sign-in.
/// - `rediss+cluster://`: TLS to every node. A node the cluster announces is checked against
///   the IP address announced (an IP SAN), as `rediss+sentinel://` checks the master; a seed
///   against its configured host (a name, or an IP address).
///
/// `description` never shows the password.
public struct RedisClusterURL: Sendable, Equatable, CustomStringConvertible {
    public static let defaultPort = 6379
    public static let scheme = "redis+cluster://"
    public static let tlsScheme = "rediss+cluster://"

    public var seeds: [RedisEndpoint]
    public var username: String?
    public var password: String?
    /// `rediss+cluster://`: TLS to every node.
    public var tls: Bool

    /// Whether `text` is meant as a Cluster URL (either scheme).
    public static func isCluster(_ text: String) -> Bool { text.hasPrefix(scheme) || text.hasPrefix(tlsScheme) }

    /// Parses `text`; the error's detail never contains the password.
    public init(parsing text: String) throws(StoreError) {
        func bad(_ why: String) -> StoreError { StoreError(.invalidArgument, "redis cluster url: \(why)") }
        let tls = text.hasPrefix(Self.tlsScheme)
        guard tls || text.hasPrefix(Self.scheme) else { throw bad("must start with \(Self.scheme) or \(Self.tlsScheme)") }
        let list = try RedisHostList(parsing: text.dropFirst(tls ? Self.tlsScheme.count : Self.scheme.count),
                                     what: "node", defaultPort: Self.defaultPort, bad)
        var path = list.path.dropFirst()
        if let q = path.firstIndex(where: { $0 == "?" || $0 == "#" }) { path = path[..<q] }
        guard path.isEmpty || path == "0" else {
            throw bad("Redis Cluster has only database 0 (it refuses SELECT): leave the path out or use /0, not /\(path.prefix(20))")
        }
        seeds = list.endpoints
        username = list.username
        password = list.password
        self.tls = tls
    }

    public init(seeds: [RedisEndpoint], username: String? = nil, password: String? = nil, tls: Bool = false) {
        self.seeds = seeds
        self.username = username
        self.password = password
        self.tls = tls
    }

    /// The URL with the password replaced by `***`.
    public var description: String {
        (tls ? Self.tlsScheme : Self.scheme) + RedisHostList.redacted(seeds, username: username, password: password)
    }
}
