#if canImport(Glibc)
import Glibc
#endif

/// A listen or connect address: IPv4, IPv6 or a unix socket path.
public enum SocketAddress: Sendable, Hashable, CustomStringConvertible {
    case ipv4(host: String, port: UInt16)
    case ipv6(host: String, port: UInt16)
    case unix(path: String)

    /// Parses `HOST:PORT`, `[V6]:PORT` or `unix:/path`. Host names are not resolved:
    /// a proxy's addresses are configuration, and DNS at start-up hides mistakes.
    public static func parse(_ text: String) -> SocketAddress? {
        if text.hasPrefix("unix:") {
            let path = String(text.dropFirst(5))
            return path.isEmpty || path.utf8.count >= 108 ? nil : .unix(path: path)
        }
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return nil }
            let host = String(text[text.index(after: text.startIndex)..<close])
            let rest = text[text.index(after: close)...]
            guard rest.hasPrefix(":"), let port = UInt16(rest.dropFirst()), port > 0 else { return nil }
            var probe = in6_addr()
            guard inet_pton(AF_INET6, host, &probe) == 1 else { return nil }
            return .ipv6(host: host, port: port)
        }
        guard let colon = text.lastIndex(of: ":") else { return nil }
        var host = String(text[..<colon])
        guard let port = UInt16(text[text.index(after: colon)...]), port > 0 else { return nil }
        if host == "localhost" { host = "127.0.0.1" }
        if host.isEmpty || host == "*" { host = "0.0.0.0" }
        var probe = in_addr()
        guard inet_pton(AF_INET, host, &probe) == 1 else { return nil }
        return .ipv4(host: host, port: port)
    }

    /// An IPv4 or IPv6 address (not a unix socket).
    public var isIP: Bool {
        if case .unix = self { return false }
        return true
    }

    /// Reachable only from this host: 127.0.0.0/8, ::1 (or `::ffff:127.x`), or a unix socket.
    public var isLoopback: Bool {
        switch self {
        case .ipv4(let h, _): return h.hasPrefix("127.")
        case .ipv6(let h, _):
            var a = in6_addr()
            guard inet_pton(AF_INET6, h, &a) == 1 else { return false }
            let b = withUnsafeBytes(of: &a) { Array($0) }
            if b[0..<15].allSatisfy({ $0 == 0 }) && b[15] == 1 { return true }
            return b[0..<10].allSatisfy({ $0 == 0 }) && b[10] == 0xff && b[11] == 0xff && b[12] == 127
        case .unix: return true
        }
    }

    /// The TCP port (nil for a unix socket).
    public var port: UInt16? {
        switch self {
        case .ipv4(_, let p), .ipv6(_, let p): return p
        case .unix: return nil
        }
    }

    public var description: String {
        switch self {
        case .ipv4(let h, let p): return "\(h):\(p)"
        case .ipv6(let h, let p): return "[\(h)]:\(p)"
        case .unix(let path): return "unix:\(path)"
        }
    }

    var family: Int32 {
        switch self {
        case .ipv4: return AF_INET
        case .ipv6: return AF_INET6
        case .unix: return AF_UNIX
        }
    }

    /// Calls `body` with a filled sockaddr of the right family and length.
    func withSockAddr<R>(_ body: (UnsafePointer<sockaddr>, socklen_t) -> R) -> R {
        var storage = sockaddr_storage()
        var length: socklen_t = 0
        withUnsafeMutableBytes(of: &storage) { raw in
            switch self {
            case .ipv4(let host, let port):
                let sin = raw.baseAddress!.assumingMemoryBound(to: sockaddr_in.self)
                sin.pointee.sin_family = sa_family_t(AF_INET)
                sin.pointee.sin_port = port.bigEndian
                _ = inet_pton(AF_INET, host, &sin.pointee.sin_addr)
                length = socklen_t(MemoryLayout<sockaddr_in>.size)
            case .ipv6(let host, let port):
                let sin6 = raw.baseAddress!.assumingMemoryBound(to: sockaddr_in6.self)
                sin6.pointee.sin6_family = sa_family_t(AF_INET6)
                sin6.pointee.sin6_port = port.bigEndian
                _ = inet_pton(AF_INET6, host, &sin6.pointee.sin6_addr)
                length = socklen_t(MemoryLayout<sockaddr_in6>.size)
            case .unix(let path):
                let sun = raw.baseAddress!.assumingMemoryBound(to: sockaddr_un.self)
                sun.pointee.sun_family = sa_family_t(AF_UNIX)
                withUnsafeMutableBytes(of: &sun.pointee.sun_path) { dst in
                    for (i, b) in path.utf8.enumerated() where i < dst.count - 1 { dst[i] = b }
                }
                length = socklen_t(MemoryLayout<sockaddr_un>.size)
            }
        }
        return withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, length) }
        }
    }
}

/// A peer's IP address in binary form, kept small so every connection can hold one.
public struct PeerAddress: Sendable {
    /// 16 bytes; IPv4 is stored in the first 4 with `isV4` set.
    public var bytes: (UInt64, UInt64) = (0, 0)
    public var isV4: Bool = true
    public var isUnix: Bool = false
    /// The connection from this peer was counted by `limits.max_connections_per_client`
    /// (`ClientLimitPolicy.connectionOpened`): its close uncounts it. Travels with the peer
    /// through every hand-over (TLS handshake, HTTP/1.1, HTTP/2).
    var countedPerClient = false

    init() {}

    /// An IPv4 or IPv6 address in text form (as in X-Forwarded-For); nil for anything else.
    public init?(text: some StringProtocol) {
        // inet_pton reads a C string: a NUL inside would end it early and make
        // "1.2.3.4\0junk" the address 1.2.3.4. Only the characters of an address may appear.
        guard (2...45).contains(text.utf8.count),
              text.utf8.allSatisfy({ Self.addressCharacters[Int($0)] }) else { return nil }
        var storage = sockaddr_storage()
        let ok = withUnsafeMutableBytes(of: &storage) { raw -> Bool in
            let s = String(text)
            let sin = raw.baseAddress!.assumingMemoryBound(to: sockaddr_in.self)
            if inet_pton(AF_INET, s, &sin.pointee.sin_addr) == 1 {
                sin.pointee.sin_family = sa_family_t(AF_INET)
                return true
            }
            let sin6 = raw.baseAddress!.assumingMemoryBound(to: sockaddr_in6.self)
            if inet_pton(AF_INET6, s, &sin6.pointee.sin6_addr) == 1 {
                sin6.pointee.sin6_family = sa_family_t(AF_INET6)
                return true
            }
            return false
        }
        guard ok else { return nil }
        self = withUnsafeBytes(of: &storage) { PeerAddress(storage: $0.baseAddress!) }
    }

    /// Hex digits, `.` and `:` (IPv4, IPv6 and IPv4-mapped IPv6 forms), by byte value.
    private static let addressCharacters: [Bool] = (0..<256).map { b in
        let c = UInt8(b)
        return (0x30...0x39).contains(c) || (0x41...0x46).contains(c) || (0x61...0x66).contains(c) || c == 0x2E || c == 0x3A
    }

    init(storage: UnsafeRawPointer) {
        let family = Int32(storage.load(as: sa_family_t.self))
        if family == AF_INET {
            let sin = storage.load(as: sockaddr_in.self)
            bytes.0 = UInt64(sin.sin_addr.s_addr)
        } else if family == AF_INET6 {
            let sin6 = storage.load(as: sockaddr_in6.self)
            withUnsafeBytes(of: sin6.sin6_addr) { raw in
                bytes = (raw.load(fromByteOffset: 0, as: UInt64.self), raw.load(fromByteOffset: 8, as: UInt64.self))
            }
            // An IPv4-mapped address (::ffff:a.b.c.d) is reported as IPv4.
            let hi = bytes.0, lo = bytes.1
            if hi == 0 && (lo & 0xFFFF_FFFF) == 0xFFFF_0000 {
                bytes = (lo >> 32, 0)
            } else {
                isV4 = false
            }
        } else {
            isUnix = true
        }
    }

    /// The textual form as bytes (a connection formats it once for all its streams' exchanges).
    var textBytes: [UInt8] {
        var b = ByteBuffer()
        defer { b.free() }
        write(to: &b)
        return Array(b.readableBytes)
    }

    /// Appends the textual form (as for X-Forwarded-For) to `out`.
    func write(to out: inout ByteBuffer) {
        if isUnix { out.append("unix"); return }
        var b = bytes
        var text = [CChar](repeating: 0, count: 64)
        withUnsafeBytes(of: &b) { raw in
            _ = inet_ntop(isV4 ? AF_INET : AF_INET6, raw.baseAddress, &text, socklen_t(text.count))
        }
        text.withUnsafeBytes { raw in
            out.append(UnsafeRawBufferPointer(rebasing: raw[..<strlen(text)]))
        }
    }

    public var text: String {
        var buf = ByteBuffer()
        write(to: &buf)
        defer { buf.free() }
        return buf.string
    }
}
