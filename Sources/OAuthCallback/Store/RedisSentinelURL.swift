/// Where a Sentinel-managed Redis store is found:
/// `redis+sentinel://[user:password@]host[:port][,host[:port]…]/MASTER[/db]`.
///
/// - The hosts are the sentinels (port 26379 by default), asked in turn which address the
///   master called `MASTER` (Sentinel's `sentinel monitor MASTER …` name) has now.
/// - `user`, `password` and `db` are the master's, as in a `redis://` URL; a sentinel's own
///   password is a separate setting (`RedisStore.Configuration.sentinelPassword`).
/// - `rediss+sentinel://`: TLS to the master (and its replicas, once promoted), whose
///   certificate is checked against the IP address the sentinels announce (an IP SAN) — no name
///   for it is configured. The sentinels themselves are asked over plain TCP.
///
/// `description` never shows the password.
public struct RedisSentinelURL: Sendable, Equatable, CustomStringConvertible {
    public struct Endpoint: Sendable, Equatable {
        public var host: String
        public var port: Int
    }

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
        var rest = Substring(text.dropFirst(tls ? Self.tlsScheme.count : Self.scheme.count))
        var userinfo: Substring = ""
        // The path never holds an '@' (a master name is a word), so the last one ends userinfo.
        let pathStart = rest.firstIndex(of: "/") ?? rest.endIndex
        if let at = rest[..<pathStart].lastIndex(of: "@") {
            userinfo = rest[...at]
            rest = rest[rest.index(after: at)...]
        }
        guard let slash = rest.firstIndex(of: "/") else { throw bad("missing /MASTER (the sentinels' name for the master)") }
        let hostList = rest[..<slash]
        var path = rest[rest.index(after: slash)...]
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
        var sentinels: [Endpoint] = []
        for host in hostList.split(separator: ",", omittingEmptySubsequences: false) {
            guard !host.isEmpty else { throw bad("an empty sentinel address in the list") }
            // A sentinel given without a port is on Sentinel's port, not Redis's.
            let bare = host.hasPrefix("[") ? host.hasSuffix("]") : !host.contains(":")
            let one: RedisURL
            do {
                one = try RedisURL(parsing: "redis://" + host + (bare ? ":\(Self.defaultPort)" : ""))
            } catch {
                throw bad("sentinel '\(host)': \(Self.why(error))")
            }
            sentinels.append(Endpoint(host: one.host, port: one.port))
        }
        var username: String?
        var password: String?
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
        self.sentinels = sentinels
        self.masterName = String(name)
        self.username = username
        self.password = password
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

    /// A `RedisURL` parse error without its own prefix.
    private static func why(_ error: StoreError) -> String {
        let prefix = "redis url: "
        return error.detail.hasPrefix(prefix) ? String(error.detail.dropFirst(prefix.count)) : error.detail
    }

    /// The URL with the password replaced by `***`.
    public var description: String {
        var s = tls ? Self.tlsScheme : Self.scheme
        if let username { s += username + (password != nil ? ":***@" : "@") }
        else if password != nil { s += ":***@" }
        s += sentinels.map { ($0.host.contains(":") ? "[\($0.host)]" : $0.host) + ":\($0.port)" }.joined(separator: ",")
        return s + "/\(masterName)/\(database)"
    }
}
