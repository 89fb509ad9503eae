import CProxyLinux
#if canImport(Glibc)
import Glibc
#endif

/// Host names to addresses with the C library's resolver (`getaddrinfo`: /etc/hosts, DNS,
/// whatever nsswitch.conf says). **Blocking**: never call it on an event loop; the upstream
/// resolver runs it on its own thread.
public enum NameLookup {
    /// The TCP addresses of `name`, in the resolver's preference order (RFC 6724), without
    /// duplicates; or why there are none.
    public static func addresses(of name: String, port: UInt16) -> Result<[SocketAddress], LookupError> {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = CProxyLinux_SOCK_STREAM
        var list: UnsafeMutablePointer<addrinfo>?
        let rc = getaddrinfo(name, nil, &hints, &list)
        guard rc == 0 else {
            let reason = rc == EAI_SYSTEM ? String(cString: strerror(errno)) : String(cString: gai_strerror(rc))
            return .failure(LookupError(name: name, reason: reason))
        }
        defer { freeaddrinfo(list) }
        var found: [SocketAddress] = []
        var cursor = list
        while let entry = cursor {
            if let address = socketAddress(entry.pointee, port: port), !found.contains(address) { found.append(address) }
            cursor = entry.pointee.ai_next
        }
        return found.isEmpty ? .failure(LookupError(name: name, reason: "no IPv4 or IPv6 address")) : .success(found)
    }

    private static func socketAddress(_ entry: addrinfo, port: UInt16) -> SocketAddress? {
        guard let raw = entry.ai_addr else { return nil }
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        switch entry.ai_family {
        case AF_INET:
            var sin = UnsafeRawPointer(raw).loadUnaligned(as: sockaddr_in.self)
            guard inet_ntop(AF_INET, &sin.sin_addr, &text, socklen_t(text.count)) != nil else { return nil }
            return .ipv4(host: text.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }, port: port)
        case AF_INET6:
            var sin6 = UnsafeRawPointer(raw).loadUnaligned(as: sockaddr_in6.self)
            // A link-local address needs its interface, which SocketAddress cannot carry.
            guard sin6.sin6_scope_id == 0,
                  inet_ntop(AF_INET6, &sin6.sin6_addr, &text, socklen_t(text.count)) != nil else { return nil }
            return .ipv6(host: text.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }, port: port)
        default:
            return nil
        }
    }
}

/// A name that did not resolve, and the resolver's reason.
public struct LookupError: Error, Sendable, Equatable, CustomStringConvertible {
    public let name: String
    public let reason: String
    public init(name: String, reason: String) {
        self.name = name
        self.reason = reason
    }
    public var description: String { "'\(name)' does not resolve: \(reason)" }
}
