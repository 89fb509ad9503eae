#if canImport(Glibc)
import Glibc
#endif

/// The header fields the engine treats specially while copying heads between client and
/// upstream. Classified by length first, then one case-insensitive compare: no String work.
/// The forwarding fields are recognised in their `_` spellings too (`X_Forwarded_For`): servers
/// behind us that fold `_` into `-` (CGI, Rack, WSGI, PHP) would read those as ours.
enum HeaderKind {
    case other
    /// Hop-by-hop (RFC 9110 §7.6.1 and the de-facto list): never forwarded.
    case hopByHop
    case transferEncoding
    case contentLength
    case upgrade
    case host
    case expect
    case xForwardedFor
    case xForwardedProto
    case xForwardedHost
    case xRequestID
    /// Other fields that tell an app where a request came from and how (`Forwarded`,
    /// `X-Real-IP`, `X-Forwarded-Port`, `-Ssl`, `-Scheme`, `-Prefix`): the proxy sets none of
    /// them, and apps trust them from it (Rack reads `Forwarded` before `X-Forwarded-*`), so
    /// they pass only from `trusted_proxies`.
    case forwarding
    /// `X-Sendfile-Type`, `X-Accel-Mapping`: they tell Rack::Sendfile to hand files to the
    /// front server and where its internal locations are (CVE-2025-61780: a client that sends
    /// them can make an app reveal files). Never forwarded from a client, in any spelling; the
    /// proxy sends its own when `x_accel_redirect` is configured. And the app's answers to the
    /// front server — `X-Accel-Redirect`, `-Buffering`, `-Limit-Rate`, `-Expires`, `-Charset` —
    /// never reach a client (nginx hides them too): an internal location's path is the site's
    /// business.
    case sendfileControl

    /// Fields whose `_` spelling is dropped even from a trusted peer and even with
    /// `allow_underscores_in_headers`: no proxy sends one.
    var isForwarding: Bool {
        switch self {
        case .xForwardedFor, .xForwardedProto, .xForwardedHost, .xRequestID, .forwarding: return true
        default: return false
        }
    }

    static func of(_ buffer: UnsafeRawBufferPointer, _ range: ByteRange) -> HeaderKind {
        @inline(__always) func isName(_ lowercase: StaticString) -> Bool {
            ByteMatching.equalsLowercase(buffer, range, lowercase)
        }
        /// `-` in the name also matches `_`.
        @inline(__always) func isFolded(_ lowercase: StaticString) -> Bool {
            ByteMatching.equalsLowercase(buffer, range, lowercase, underscoreMatchesDash: true)
        }
        switch range.count {
        case 2: return isName("te") ? .hopByHop : .other
        case 4: return isName("host") ? .host : .other
        case 6: return isName("expect") ? .expect : .other
        case 7:
            if isName("upgrade") { return .upgrade }
            return isName("trailer") ? .hopByHop : .other
        case 9:
            if isName("forwarded") { return .forwarding }
            return isFolded("x-real-ip") ? .forwarding : .other
        case 10:
            if isName("connection") || isName("keep-alive") { return .hopByHop }
            return .other
        case 12: return isFolded("x-request-id") ? .xRequestID : .other
        case 14: return isName("content-length") ? .contentLength : .other
        case 15:
            if isFolded("x-forwarded-for") { return .xForwardedFor }
            if isFolded("x-forwarded-ssl") { return .forwarding }
            return isFolded("x-sendfile-type") || isFolded("x-accel-mapping") || isFolded("x-accel-expires")
                || isFolded("x-accel-charset") ? .sendfileControl : .other
        case 16:
            if isFolded("x-forwarded-host") { return .xForwardedHost }
            if isFolded("x-forwarded-port") { return .forwarding }
            if isFolded("x-accel-redirect") { return .sendfileControl }
            return isName("proxy-connection") ? .hopByHop : .other
        case 17:
            if isName("transfer-encoding") { return .transferEncoding }
            if isFolded("x-accel-buffering") { return .sendfileControl }
            return isFolded("x-forwarded-proto") ? .xForwardedProto : .other
        case 18:
            if isFolded("x-forwarded-scheme") || isFolded("x-forwarded-prefix") { return .forwarding }
            if isFolded("x-accel-limit-rate") { return .sendfileControl }
            return isName("proxy-authenticate") ? .hopByHop : .other
        case 19: return isName("proxy-authorization") ? .hopByHop : .other
        default: return .other
        }
    }
}

/// Whether the field at `range` is one of the `tokens` named in a `Connection` header.
@inline(__always)
func isNamedIn(_ tokens: [ByteRange], _ bytes: UnsafeRawPointer, _ range: ByteRange,
               tokenBytes: UnsafeRawPointer) -> Bool {
    for t in tokens where t.count == range.count {
        var same = true
        for i in 0..<t.count where asciiLower(tokenBytes.load(fromByteOffset: t.start + i, as: UInt8.self))
            != asciiLower(bytes.load(fromByteOffset: range.start + i, as: UInt8.self)) {
            same = false
            break
        }
        if same { return true }
    }
    return false
}

/// Whether the name given as a String matches the field at `range` (phase edits; not per-request hot).
func nameMatches(_ name: String, _ bytes: UnsafeRawPointer, _ range: ByteRange) -> Bool {
    var name = name
    return name.withUTF8 { n in
        guard n.count == range.count else { return false }
        for i in 0..<n.count where asciiLower(n[i]) != asciiLower(bytes.load(fromByteOffset: range.start + i, as: UInt8.self)) {
            return false
        }
        return true
    }
}
