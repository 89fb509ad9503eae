/// Where a Sentinel-managed Redis store is found:
/// `redis+sentinel://[user:password@]host[:port][,host[:port]…]/MASTER[/db]`.
///
/// - The hosts are the sentinels (port 26379 by default), asked in turn which address the
///   master called `MASTER` (Sentinel's `sentinel monitor MASTER …` name) has now.
/// - `user`, `password` and `db` are the master's, as in a `redis://` URL; a sentinel's own
///   password is a separate setting (`RedisSpec.Sentinels.password`).
/// - `rediss+sentinel://`: TLS to the master (and its replicas, once promoted), whose
///   certificate is checked against the IP address the sentinels announce (an IP SAN) — no name
///   for it is configured. The sentinels themselves are asked over plain TCP.
///
/// `description` never shows the password.
public struct RedisSentinelURL: Sendable, Equatable, CustomStringConvertible {
    public typealias Endpoint = RedisEndpoint

    public static let defaultPort = 26379

    public var sentinels: [Endpoint]
    public var masterName: String
    public var username: String?
    public var password: String?
    public var database: Int
    /// `rediss+sentinel://`: TLS to the master.
    public var tls: Bool

    public static let scheme = "redis+sentinel://"
    public static let tlsScheme = "rediss+sentinel://"

    /// Whether `text` is meant as a Sentinel URL (either scheme).
    public static func isSentinel(_ text: String) -> Bool { text.hasPrefix(scheme) || text.hasPrefix(tlsScheme) }

    /// Parses `text`; the error's detail never contains the password. Each host and the
    /// userinfo are read by `RedisURL`'s parser, so both forms accept the same syntax.
    public init(parsing text: String) throws(StoreError) {
        func bad(_ why: String) -> StoreError { StoreError(.invalidArgument, "redis sentinel url: \(why)") }
        let tls = text.hasPrefix(Self.tlsScheme)
        guard tls || text.hasPrefix(Self.scheme) else { throw bad("must start with \(Self.scheme) or \(Self.tlsScheme)") }
        // A sentinel given without a port is on Sentinel's port, not Redis's.
        let list = try RedisHostList(parsing: text.dropFirst(tls ? Self.tlsScheme.count : Self.scheme.count),
                                     what: "sentinel", defaultPort: Self.defaultPort, bad)
        guard !list.path.isEmpty else { throw bad("missing /MASTER (the sentinels' name for the master)") }
        var path = list.path.dropFirst()
        if let q = path.firstIndex(where: { $0 == "?" || $0 == "#" }) { path = path[..<q] }
        let parts = path.split(separator: "/", omittingEmptySubsequences: false)
        guard let name = parts.first, !name.isEmpty else { throw bad("missing /MASTER (the sentinels' name for the master)") }
        guard name.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7f }) else { throw bad("the master name must be printable ASCII") }
        guard parts.count <= 2 else { throw bad("the path is /MASTER or /MASTER/DB") }
        var database = 0
        if parts.count == 2, !parts[1].isEmpty {
            guard let db = Int(parts[1]), db >= 0, db <= 1_000_000 else { throw bad("database must be a number ≥ 0") }
            database = db
        }
        self.sentinels = list.endpoints
        self.masterName = String(name)
        self.username = list.username
        self.password = list.password
        self.database = database
        self.tls = tls
    }

    public init(sentinels: [Endpoint], masterName: String, username: String? = nil, password: String? = nil,
                database: Int = 0, tls: Bool = false) {
        self.tls = tls
        self.sentinels = sentinels
        self.masterName = masterName
        self.username = username
        self.password = password
        self.database = database
    }

    /// The URL with the password replaced by `***`.
    public var description: String {
        let s = (tls ? Self.tlsScheme : Self.scheme) + RedisHostList.redacted(sentinels, username: username, password: password)
        return s + "/\(masterName)/\(database)"
    }
}
