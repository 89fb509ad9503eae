#if canImport(Glibc)
import Glibc
#endif

/// The header fields the engine treats specially while copying heads between client and
/// upstream. Classified by length first, then one case-insensitive compare: no String work.
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

    static func of(_ buffer: UnsafeRawBufferPointer, _ range: ByteRange) -> HeaderKind {
        @inline(__always) func isName(_ lowercase: StaticString) -> Bool {
            ByteMatching.equalsLowercase(buffer, range, lowercase)
        }
        switch range.count {
        case 2: return isName("te") ? .hopByHop : .other
        case 4: return isName("host") ? .host : .other
        case 6: return isName("expect") ? .expect : .other
        case 7:
            if isName("upgrade") { return .upgrade }
            return isName("trailer") ? .hopByHop : .other
        case 10:
            if isName("connection") || isName("keep-alive") { return .hopByHop }
            return .other
        case 12: return isName("x-request-id") ? .xRequestID : .other
        case 14: return isName("content-length") ? .contentLength : .other
        case 15: return isName("x-forwarded-for") ? .xForwardedFor : .other
        case 16:
            if isName("x-forwarded-host") { return .xForwardedHost }
            return isName("proxy-connection") ? .hopByHop : .other
        case 17:
            if isName("transfer-encoding") { return .transferEncoding }
            return isName("x-forwarded-proto") ? .xForwardedProto : .other
        case 18: return isName("proxy-authenticate") ? .hopByHop : .other
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
