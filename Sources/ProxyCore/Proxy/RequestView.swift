#if canImport(Glibc)
import Glibc
#endif

/// A read-only view of the request being handled, for phases. It reads straight from the
/// connection's buffer: valid only during the phase call it is passed to — copy what you keep.
public struct RequestView {
    unowned(unsafe) let connection: ClientExchange

    init(_ connection: ClientExchange) { self.connection = connection }

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

    /// What the phases made of this request when its head arrived (`HTTPPhases.context(for:)`).
    public var context: RequestContext { connection.current!.context }

    /// The id this request is logged and forwarded under (`X-Request-Id`; see `RequestID`).
    public var requestID: String { connection.requestIDString }

    /// The canonical path without the query (`PathCanonicalizer`): what every path rule
    /// decides on and what is forwarded.
    public var path: String {
        withPath { String(decoding: $0, as: UTF8.self) }
    }

    /// The canonical path and the query as received: the target forwarded upstream (for
    /// absolute-form, reduced to origin-form).
    public var target: String {
        guard let query else { return path }
        return path + "?" + query
    }

    /// The query string without `?`, if any, exactly as received.
    public var query: String? {
        let full = connection.head.path
        let p = connection.head.pathOnly
        guard p.end < full.end else { return nil }
        return string(ByteRange(start: p.end + 1, count: full.end - p.end - 1))
    }

    /// The canonical path's bytes, valid during `body`.
    @inline(__always)
    public func withPath<R>(_ body: (UnsafeRawBufferPointer) -> R) -> R {
        if connection.head.canonicalPath.isEmpty {
            let p = connection.head.pathOnly
            return body(UnsafeRawBufferPointer(rebasing: connection.headBytes[p.start..<p.end]))
        }
        return connection.head.canonicalPath.withUnsafeBytes(body)
    }

    /// Every reading of the path that a common server might make (`PathReadings`), for rules
    /// that must fail closed: `protect` under any reading, `skip` under every one.
    public func withPathReadings<R>(_ body: (PathReadings) -> R) -> R {
        let traits = connection.head.pathTraits
        return withPath { body(PathReadings(canonical: $0, traits: traits)) }
    }

    /// Compares the canonical path with a literal, without allocating.
    public func pathEquals(_ literal: StaticString) -> Bool {
        withPath { p in
            p.count == literal.utf8CodeUnitCount && memcmp(p.baseAddress!, literal.utf8Start, p.count) == 0
        }
    }

    /// Compares the canonical path with configured bytes, without allocating.
    public func pathEquals(_ path: [UInt8]) -> Bool {
        withPath { p in
            p.count == path.count && path.withUnsafeBytes { memcmp(p.baseAddress!, $0.baseAddress!, p.count) == 0 }
        }
    }

    /// Whether the canonical path is `prefix` or lies below it, on a segment boundary.
    public func pathIsUnder(_ prefix: PathPrefix) -> Bool {
        withPath(prefix.matches)
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
