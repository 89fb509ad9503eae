#if canImport(Glibc)
import Glibc
#endif

/// Strict syntax of host names and `Host` values where the proxy builds something from them
/// (redirect locations, SNI names). Stricter than RFC 3986's reg-name on purpose: only what
/// DNS can hold, so no percent-encoding, userinfo, backslashes or other bytes that some URL
/// parsers read as a different authority.
enum HostSyntax {
    /// Letters, digits and hyphens in dot-separated labels of 1–63 bytes, no label starting or
    /// ending with a hyphen, at most `maxLength` bytes, one optional trailing dot not allowed
    /// (it would make two spellings of one name).
    static func isDNSName<C: Collection>(_ bytes: C, maxLength: Int) -> Bool where C.Element == UInt8 {
        guard !bytes.isEmpty, bytes.count <= maxLength else { return false }
        var label = 0
        var previous: UInt8 = 0x2E
        for b in bytes {
            if b == 0x2E {
                guard label > 0, previous != 0x2D else { return false }
                label = 0
            } else {
                let alnum = (b >= 0x30 && b <= 0x39) || ((b | 0x20) >= 0x61 && (b | 0x20) <= 0x7A)
                guard alnum || (b == 0x2D && label > 0) else { return false }
                label += 1
                guard label <= 63 else { return false }
            }
            previous = b
        }
        return label > 0 && previous != 0x2D
    }

    /// A `Host` value (RFC 9110 §7.2) split into host and port: a DNS name, a dotted IPv4
    /// address, or a bracketed IPv6 address, then an optional `:port` (1–65535).
    /// Returns nil for anything else.
    static func splitHost(_ value: String) -> (host: String, port: UInt16?)? {
        let bytes = Array(value.utf8)
        guard !bytes.isEmpty, bytes.count <= 260 else { return nil }
        var hostEnd: Int
        var host: String
        if bytes[0] == UInt8(ascii: "[") {
            guard let close = bytes.firstIndex(of: UInt8(ascii: "]")), close > 1 else { return nil }
            let literal = String(decoding: bytes[1..<close], as: UTF8.self)
            // Only hex digits, colons and dots may reach inet_pton (no zone identifiers).
            guard bytes[1..<close].allSatisfy({ ByteMatching.hexValue($0) != nil || $0 == 0x3A || $0 == 0x2E }) else { return nil }
            var probe = in6_addr()
            guard inet_pton(AF_INET6, literal, &probe) == 1 else { return nil }
            host = "[" + literal + "]"
            hostEnd = close + 1
        } else {
            hostEnd = bytes.firstIndex(of: UInt8(ascii: ":")) ?? bytes.count
            let name = bytes[0..<hostEnd]
            guard isDNSName(name, maxLength: 253) else { return nil }
            host = String(decoding: name, as: UTF8.self)
        }
        if hostEnd == bytes.count { return (host, nil) }
        guard bytes[hostEnd] == UInt8(ascii: ":") else { return nil }
        let digits = bytes[(hostEnd + 1)...]
        guard !digits.isEmpty, digits.count <= 5, digits.allSatisfy({ ByteMatching.isDigit($0) }),
              let port = Int(String(decoding: digits, as: UTF8.self)), port > 0, port <= 65535 else { return nil }
        return (host, UInt16(port))
    }

    /// Whether `text` is an IPv4 or IPv6 address literal (without brackets).
    static func isIPAddress(_ text: String) -> Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, text, &v4) == 1 || inet_pton(AF_INET6, text, &v6) == 1
    }
}
