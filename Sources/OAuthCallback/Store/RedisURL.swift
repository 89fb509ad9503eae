/// Where the Redis store connects: `redis://[user:password@]host[:port][/db]`, or
/// `rediss://…` (the same, over TLS).
///
/// - `user` and `password` are percent-decoded; `redis://:password@host` (no user) is the
///   classic `requirepass` form, `redis://user:password@host` an ACL user (Redis ≥ 6).
/// - `host` may be a name, an IPv4 address or a bracketed IPv6 address (`[::1]`).
/// - `port` defaults to 6379 for both schemes (Redis has no separate TLS port number), `db` to 0.
/// - `rediss://`: the server's certificate is always verified, its name checked against
///   `host` (an IP address against the certificate's IP SANs); trust and an optional client
///   certificate come from the store's TLS settings (`RedisStore.Configuration.tls`).
///
/// `description` never shows the password (it may end up in a log line or an error).
public struct RedisURL: Sendable, Equatable, CustomStringConvertible {
    public var host: String
    public var port: Int
    public var username: String?
    public var password: String?
    public var database: Int
    /// `rediss://`: TLS to the server.
    public var tls: Bool

    public init(host: String, port: Int = 6379, username: String? = nil, password: String? = nil, database: Int = 0,
                tls: Bool = false) {
        self.host = host
        self.port = port
        self.username = username
        self.password = password
        self.database = database
        self.tls = tls
    }

    /// Parses `text`; the error's detail never contains the password.
    public init(parsing text: String) throws(StoreError) {
        func bad(_ why: String) -> StoreError { StoreError(.invalidArgument, "redis url: \(why)") }
        let tls = text.hasPrefix("rediss://")
        guard tls || text.hasPrefix("redis://") else { throw bad("must start with redis:// or rediss://") }
        var rest = Substring(text.dropFirst(tls ? "rediss://".count : "redis://".count))
        // userinfo ends at the last '@' (a raw '@' in a password is tolerated).
        var username: String?
        var password: String?
        if let at = rest.lastIndex(of: "@") {
            let userinfo = rest[..<at]
            rest = rest[rest.index(after: at)...]
            if let colon = userinfo.firstIndex(of: ":") {
                let user = userinfo[..<colon]
                guard let u = Self.percentDecode(user) else { throw bad("bad percent-encoding in the user name") }
                guard let p = Self.percentDecode(userinfo[userinfo.index(after: colon)...]) else {
                    throw bad("bad percent-encoding in the password")
                }
                username = u.isEmpty ? nil : u
                password = p.isEmpty ? nil : p
            } else {
                // `redis://secret@host`: a lone userinfo is taken as the password (redis-cli does so).
                guard let p = Self.percentDecode(userinfo) else { throw bad("bad percent-encoding in the password") }
                password = p.isEmpty ? nil : p
            }
        }
        var path: Substring = ""
        if let slash = rest.firstIndex(of: "/") {
            path = rest[rest.index(after: slash)...]
            rest = rest[..<slash]
        }
        var host: Substring
        var portText: Substring?
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { throw bad("unclosed [ in the host") }
            host = rest[rest.index(after: rest.startIndex)..<close]
            let after = rest[rest.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw bad("garbage after the IPv6 address") }
                portText = after.dropFirst()
            }
        } else if let colon = rest.firstIndex(of: ":") {
            host = rest[..<colon]
            portText = rest[rest.index(after: colon)...]
        } else {
            host = rest
        }
        guard !host.isEmpty else { throw bad("missing host") }
        var port = 6379
        if let portText {
            guard let p = Int(portText), (1...65535).contains(p) else { throw bad("port must be 1...65535") }
            port = p
        }
        var database = 0
        if let q = path.firstIndex(where: { $0 == "?" || $0 == "#" }) { path = path[..<q] }
        if !path.isEmpty {
            guard let db = Int(path), db >= 0, db <= 1_000_000 else { throw bad("database must be a number ≥ 0") }
            database = db
        }
        self.init(host: String(host), port: port, username: username, password: password, database: database, tls: tls)
    }

    /// The URL with the password replaced by `***`.
    public var description: String {
        var s = tls ? "rediss://" : "redis://"
        if let username { s += username + (password != nil ? ":***@" : "@") }
        else if password != nil { s += ":***@" }
        s += host.contains(":") ? "[\(host)]" : host
        return s + ":\(port)/\(database)"
    }

    private static func percentDecode(_ s: Substring) -> String? {
        var bytes: [UInt8] = []
        var it = s.utf8.makeIterator()
        while let b = it.next() {
            if b == UInt8(ascii: "%") {
                guard let h = it.next(), let l = it.next(), let hv = hex(h), let lv = hex(l) else { return nil }
                bytes.append(hv << 4 | lv)
            } else {
                bytes.append(b)
            }
        }
        return String(validating: bytes, as: UTF8.self)
    }

    private static func hex(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
