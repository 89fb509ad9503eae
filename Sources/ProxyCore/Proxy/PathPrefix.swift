#if canImport(Glibc)
import Glibc
#endif

/// A configured path prefix (`protect`, `skip`), matched on segment boundaries: `/public`
/// matches `/public` and `/public/…`, never `/publicadmin` or `/public.css`. A trailing `/`
/// in the configuration is dropped (`/admin/` is `/admin`); `/` matches every path.
///
/// Case: RFC 3986 §6.2.2.1 leaves the path's case to the server, and servers disagree (Express
/// with `caseSensitive: false`, ASP.NET Core routing, IIS and Spring's case-insensitive matchers
/// route `/ADMIN` to `/admin`). `matches` compares exactly; `covers` also matches under ASCII
/// case folding and with a format suffix, for rules that must fail closed (`protect`, path
/// rules, rate limits). Only the decision folds: the forwarded path keeps its case.
public struct PathPrefix: Sendable, Equatable, CustomStringConvertible {
    public let bytes: [UInt8]

    /// The prefix, or why `text` is not a canonical path (it must be written the way the
    /// engine forwards it: `/admin`, not `/%61dmin` or `/x/../admin`).
    public static func parse(_ text: String) -> Result<PathPrefix, PathCanonicalizer.Refusal> {
        guard text.hasPrefix("/") else { return .failure(.init(text: "must start with /")) }
        switch PathCanonicalizer.canonical(text) {
        case .failure(let r): return .failure(r)
        case .success(let c) where c != text:
            return .failure(.init(text: "is not in canonical form: write it as \(c)"))
        case .success:
            var b = Array(text.utf8)
            if b.count > 1 && b.last == UInt8(ascii: "/") { b.removeLast() }
            return .success(PathPrefix(bytes: b))
        }
    }

    init(bytes: [UInt8]) { self.bytes = bytes }

    public var description: String { String(decoding: bytes, as: UTF8.self) }

    /// Whether `path` is this prefix or lies below it.
    public func matches(_ path: UnsafeRawBufferPointer) -> Bool {
        let n = bytes.count
        if n == 1 { return true }
        guard path.count >= n else { return false }
        let same = bytes.withUnsafeBytes { memcmp(path.baseAddress!, $0.baseAddress!, n) == 0 }
        return same && (path.count == n || path[n] == UInt8(ascii: "/"))
    }

    /// Whether a rule on this prefix must apply to `path` under some server's reading: it is
    /// this prefix or lies below it when ASCII letters are compared without case (`/ADMIN/x`
    /// is under `/admin`), or it is this prefix with a format suffix in its last segment
    /// (`/admin.json`: Rails routes `/admin(.:format)` to the same action, and so do other
    /// frameworks' content negotiation by extension). Bytes ≥ 0x80 compare exactly: servers
    /// that fold case fold ASCII; a Unicode fold would be one more reading, not a narrower one.
    public func covers(_ path: UnsafeRawBufferPointer) -> Bool {
        let n = bytes.count
        if n == 1 { return true }
        guard path.count >= n else { return false }
        for i in 0..<n where Self.lower(path[i]) != Self.lower(bytes[i]) { return false }
        if path.count == n || path[n] == UInt8(ascii: "/") { return true }
        return path[n] == UInt8(ascii: ".") && !path[(n + 1)...].contains(UInt8(ascii: "/"))
    }

    @inline(__always)
    private static func lower(_ b: UInt8) -> UInt8 {
        b &- UInt8(ascii: "A") < 26 ? b | 0x20 : b
    }
}
