#if canImport(Glibc)
import Glibc
#endif

/// What RFC 9114 asks of a request's fields (§4.2 and §4.3), checked one field at a time as the
/// QPACK decoder gives them, then once at the end of the section. A request that breaks one is
/// malformed (§4.1.2): the stream ends with H3_MESSAGE_ERROR (a 400 may go first), and nothing
/// of it reaches `StreamRequestHead`, the upstream or a phase.
///
/// HTTP/2's decoder (nghttp2) checks the same rules itself. nghttp3 checks most of them too;
/// they are written here as well, deliberately: defence in depth on the one door every HTTP/3
/// request passes, pure and tested without sockets (`HTTP3RequestHeadTests`, the `h3-request`
/// fuzz target), so a library upgrade that loosens a check cannot loosen ours.
struct HTTP3FieldRules {
    /// Why a request is malformed: a short reason for the log and the 400's body.
    struct Malformed: Error, Equatable, CustomStringConvertible {
        let reason: String
        var description: String { reason }
    }

    private enum Pseudo: UInt8 { case method = 1, scheme = 2, authority = 4, path = 8 }

    /// The pseudo-header fields seen (a bit each).
    private var pseudo: UInt8 = 0
    private var sawRegular = false
    private var isConnect = false
    private var isOptions = false
    private var pathValue: [UInt8] = []
    private var sawHost = false
    private var contentLength: [UInt8]? = nil

    /// One field of the request's HEADERS (`trailers`: of its trailing HEADERS).
    mutating func check(name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>, trailers: Bool = false) throws(Malformed) {
        guard let first = name.first else { throw Malformed(reason: "empty field name") }
        try Self.checkValue(value)
        if first == UInt8(ascii: ":") {
            if trailers { throw Malformed(reason: "pseudo-header field in trailers") }
            if sawRegular { throw Malformed(reason: "pseudo-header field after a regular field") }
            let bit: Pseudo
            // Compared as bytes: no String per field on the request path.
            if Self.equals(name, ":method") { bit = .method }
            else if Self.equals(name, ":scheme") { bit = .scheme }
            else if Self.equals(name, ":authority") { bit = .authority }
            else if Self.equals(name, ":path") { bit = .path }
            // `:protocol` only with SETTINGS_ENABLE_CONNECT_PROTOCOL, which this server never sends;
            // `:status` is a response's.
            else { throw Malformed(reason: "unknown pseudo-header field \(String(decoding: name, as: UTF8.self))") }
            if pseudo & bit.rawValue != 0 { throw Malformed(reason: "\(String(decoding: name, as: UTF8.self)) twice") }
            pseudo |= bit.rawValue
            switch bit {
            case .method:
                guard !value.isEmpty, value.allSatisfy(ByteMatching.isTokenChar) else { throw Malformed(reason: "invalid :method") }
                isConnect = Self.equals(value, "CONNECT")
                isOptions = Self.equals(value, "OPTIONS")
            case .path: pathValue = Array(value)
            // §4.3.1: present means not empty.
            case .authority: if value.isEmpty { throw Malformed(reason: "empty :authority") }
            case .scheme: break
            }
            return
        }
        sawRegular = true
        for b in name {
            if b >= UInt8(ascii: "A") && b <= UInt8(ascii: "Z") { throw Malformed(reason: "uppercase field name") }
            if !ByteMatching.isTokenChar(b) { throw Malformed(reason: "invalid character in a field name") }
        }
        // §4.2: connection-specific fields have no meaning in HTTP/3, in trailers either.
        if Self.equals(name, "connection") || Self.equals(name, "keep-alive") || Self.equals(name, "proxy-connection")
            || Self.equals(name, "transfer-encoding") || Self.equals(name, "upgrade") {
            throw Malformed(reason: "connection-specific field \(String(decoding: name, as: UTF8.self))")
        }
        if Self.equals(name, "te") && !Self.equals(value, "trailers") { throw Malformed(reason: "te other than trailers") }
        if trailers { return }
        if Self.equals(name, "host") {
            if sawHost { throw Malformed(reason: "host twice") }
            if value.isEmpty { throw Malformed(reason: "empty host") }
            sawHost = true
        } else if Self.equals(name, "content-length") {
            // Several fields must agree (RFC 9110 §8.6); the parser checks the value itself.
            if let earlier = contentLength, !earlier.elementsEqual(value) { throw Malformed(reason: "content-length values differ") }
            contentLength = Array(value)
        }
    }

    private static func equals(_ bytes: UnsafeBufferPointer<UInt8>, _ literal: StaticString) -> Bool {
        bytes.count == literal.utf8CodeUnitCount && memcmp(bytes.baseAddress!, literal.utf8Start, bytes.count) == 0
    }

    /// The request's HEADERS are complete: the pseudo-header fields it must have (§4.3.1).
    func checkComplete() throws(Malformed) {
        guard pseudo & Pseudo.method.rawValue != 0 else { throw Malformed(reason: "no :method") }
        if isConnect {
            // §4.4: CONNECT names only an authority (the engine then refuses the method).
            if pseudo & (Pseudo.scheme.rawValue | Pseudo.path.rawValue) != 0 { throw Malformed(reason: "CONNECT with :scheme or :path") }
            if pseudo & Pseudo.authority.rawValue == 0 { throw Malformed(reason: "CONNECT without :authority") }
            return
        }
        guard pseudo & Pseudo.scheme.rawValue != 0 else { throw Malformed(reason: "no :scheme") }
        guard pseudo & Pseudo.path.rawValue != 0, !pathValue.isEmpty else { throw Malformed(reason: "no :path") }
        if pathValue == [UInt8(ascii: "*")] ? !isOptions : pathValue.first != UInt8(ascii: "/") {
            throw Malformed(reason: "invalid :path")
        }
        // §4.3.1: http and https requests name their authority, in :authority or Host.
        if pseudo & Pseudo.authority.rawValue == 0 && !sawHost { throw Malformed(reason: "no :authority or host") }
    }

    /// RFC 9110 §5.5 (as RFC 9114 §4.2 asks): no NUL, CR or LF, and no whitespace at either end.
    private static func checkValue(_ value: UnsafeBufferPointer<UInt8>) throws(Malformed) {
        if let f = value.first, f == 0x20 || f == 0x09 { throw Malformed(reason: "whitespace at the start of a field value") }
        if let l = value.last, l == 0x20 || l == 0x09 { throw Malformed(reason: "whitespace at the end of a field value") }
        for b in value where b == 0 || b == 0x0A || b == 0x0D { throw Malformed(reason: "invalid character in a field value") }
    }
}
