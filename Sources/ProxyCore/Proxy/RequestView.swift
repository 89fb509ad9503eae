#if canImport(Glibc)
import Glibc
#endif

/// A read-only view of the request being handled, for phases. It reads straight from the
/// connection's buffer: valid only during the phase call it is passed to — copy what you keep.
public struct RequestView {
    unowned(unsafe) let connection: ClientConnection

    init(_ connection: ClientConnection) { self.connection = connection }

    @inline(__always) var head: RequestHead { connection.head }

    public var method: HTTPMethod { connection.head.method }
    public var methodName: String { string(connection.head.methodRange) }
    public var version: HTTPVersion { connection.head.version }
    public var peer: PeerAddress { connection.peer }
    /// The loop this request runs on: slow work started from a phase is driven by it.
    public var eventLoop: EventLoop { connection.loop }

    /// The client's address, for per-client limits: the peer's, or — when the peer is a trusted
    /// proxy — the right-most `X-Forwarded-For` entry that is not a trusted proxy itself (how
    /// nginx's `real_ip_recursive` reads the list: entries left of it are the client's to
    /// forge). All entries trusted: the left-most.
    public var clientAddress: String {
        let peer = connection.peer
        let listener = connection.listener
        guard listener.isTrusted(peer) else { return peer.text }
        let entries = headers(named: "X-Forwarded-For").flatMap { $0.split(separator: ",") }
            .map { String($0.trimmingWhitespace()) }.filter { !$0.isEmpty }
        for entry in entries.reversed() {
            // Not an address ("unknown", a port appended): the chain cannot be followed past it.
            guard let address = PeerAddress(text: entry), listener.isTrusted(address) else { return entry }
        }
        return entries.first ?? peer.text
    }

    /// The id this request is logged and forwarded under (`X-Request-Id`; see `RequestID`).
    public var requestID: String { connection.requestIDString }

    /// The path without the query.
    public var path: String {
        let p = pathRange
        return string(p)
    }

    /// The full path-and-query as received (absolute-form reduced to its path).
    public var target: String {
        let p = connection.head.path
        let s = string(p)
        return s.hasPrefix("/") || s == "*" ? s : "/" + s
    }

    /// The query string without `?`, if any.
    public var query: String? {
        let full = connection.head.path
        let p = pathRange
        guard p.count < full.count else { return nil }
        return string(ByteRange(start: p.end + 1, count: full.count - p.count - 1))
    }

    /// Compares the path (without query) with a literal, without allocating.
    public func pathEquals(_ literal: StaticString) -> Bool {
        let p = pathRange
        guard p.count == literal.utf8CodeUnitCount else { return false }
        return memcmp(connection.headBytes.baseAddress! + p.start, literal.utf8Start, p.count) == 0
    }

    /// Compares the path (without query) with configured bytes, without allocating.
    public func pathEquals(_ path: [UInt8]) -> Bool {
        let p = pathRange
        guard p.count == path.count else { return false }
        return path.withUnsafeBytes { memcmp(connection.headBytes.baseAddress! + p.start, $0.baseAddress!, p.count) == 0 }
    }

    public func pathHasPrefix(_ literal: StaticString) -> Bool {
        let p = pathRange
        guard p.count >= literal.utf8CodeUnitCount else { return false }
        return memcmp(connection.headBytes.baseAddress! + p.start, literal.utf8Start, literal.utf8CodeUnitCount) == 0
    }

    /// The first value of a header field (name case-insensitive).
    public func header(_ name: String) -> String? {
        headers(named: name).first
    }

    public func headers(named name: String) -> [String] {
        let lower = Array(name.lowercased().utf8)
        let bytes = connection.headBytes
        var found: [String] = []
        for field in connection.head.headers where field.name.count == lower.count {
            var same = true
            for i in 0..<lower.count where asciiLower(bytes[field.name.start + i]) != lower[i] { same = false; break }
            if same { found.append(string(field.value)) }
        }
        return found
    }

    /// Every field as sent, in order.
    public var allHeaders: [(name: String, value: String)] {
        connection.head.headers.map { (string($0.name), string($0.value)) }
    }

    /// The `Host` the client asked for (the authority of an absolute-form target wins).
    public var host: String? {
        if let authority = connection.head.authority { return string(authority) }
        return connection.head.hostIndex.map { string(connection.head.headers[$0].value) }
    }

    var pathRange: ByteRange {
        let p = connection.head.path
        let bytes = connection.headBytes
        var i = p.start
        while i < p.end && bytes[i] != UInt8(ascii: "?") { i += 1 }
        return ByteRange(start: p.start, count: i - p.start)
    }

    func string(_ range: ByteRange) -> String {
        String(decoding: UnsafeRawBufferPointer(rebasing: connection.headBytes[range.start..<range.end]), as: UTF8.self)
    }
}

@inline(__always) func asciiLower(_ b: UInt8) -> UInt8 {
    (b >= 0x41 && b <= 0x5A) ? b | 0x20 : b
}

extension Substring {
    /// Without leading and trailing spaces and tabs (HTTP's optional whitespace).
    public func trimmingWhitespace() -> Substring {
        var s = self
        while let f = s.first, f == " " || f == "\t" { s = s.dropFirst() }
        while let l = s.last, l == " " || l == "\t" { s = s.dropLast() }
        return s
    }
}
