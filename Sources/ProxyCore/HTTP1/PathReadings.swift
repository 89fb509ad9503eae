// The ways common servers read a canonical path that still holds spellings they disagree on,
// so that a path rule can fail closed: a `protect` rule applies when it matches under *any*
// reading, a `skip` rule only when it matches under *every* one. The canonical path (what is
// forwarded) is always the first reading. The others apply, in this order:
//
// - path parameters dropped from each segment (`/public;x` → `/public`): Tomcat and Jetty,
//   before decoding (`;…` as sent) or after it (`%3B` decoded first);
// - percent-decoding of every escape, once (nginx's `location`, werkzeug's and Rack's
//   `PATH_INFO`: `%2F` → `/`) or twice (servers and frameworks that decode again: `%252e` → `.`);
// - the Windows form: `\` is `/` and trailing dots and spaces are dropped from segments (IIS),
//   and whitespace at either end of a segment too (Spring's path matcher trims every segment
//   with Java's `Character.isWhitespace`: `/admin%09` is `/admin` there, CVE-2016-5007);
//
// and each result has its dot-segments removed and its slashes merged, as those servers then
// do (a `..` at the root stays at the root there: it is only refused in the canonical path).
// Paths without escapes, `;`, `\` or trailing dots — nearly all — have one reading, and then
// nothing here allocates.

public struct PathReadings {
    /// The canonical path. Valid as long as the buffer it was made from.
    public let canonical: UnsafeRawBufferPointer
    /// The readings that differ from it; empty (no allocation) for most paths.
    public let others: [[UInt8]]

    public init(canonical: UnsafeRawBufferPointer, traits: PathTraits) {
        self.canonical = canonical
        others = traits.isEmpty ? [] : Self.otherReadings(Array(canonical), traits)
    }

    /// Whether `match` holds for at least one reading.
    public func any(_ match: (UnsafeRawBufferPointer) -> Bool) -> Bool {
        if match(canonical) { return true }
        for r in others where r.withUnsafeBytes(match) { return true }
        return false
    }

    /// Whether `match` holds for every reading.
    public func every(_ match: (UnsafeRawBufferPointer) -> Bool) -> Bool {
        guard match(canonical) else { return false }
        for r in others where !r.withUnsafeBytes(match) { return false }
        return true
    }

    /// Every reading as text, the canonical one first (tests, logs).
    public var all: [String] {
        [String(decoding: canonical, as: UTF8.self)] + others.map { String(decoding: $0, as: UTF8.self) }
    }

    /// The readings of `path` after canonicalization; nil when the path is refused.
    public static func of<R>(_ path: String, _ body: (PathReadings) -> R) -> R? {
        guard case .success(let canonical) = PathCanonicalizer.canonical(path) else { return nil }
        let bytes = Array(canonical.utf8)
        let traits = PathCanonicalizer.traitsOf(bytes)
        return bytes.withUnsafeBytes { body(PathReadings(canonical: $0, traits: traits)) }
    }

    // MARK: Readings

    private enum Parameters: CaseIterable { case kept, droppedBeforeDecoding, droppedAfterDecoding }

    static func otherReadings(_ canonical: [UInt8], _ traits: PathTraits) -> [[UInt8]] {
        let parameters: [Parameters] = traits.contains(.semicolon) || traits.contains(.escapes) ? Parameters.allCases : [.kept]
        let decodings = traits.contains(.escapes) ? [0, 1, 2] : [0]
        let windows = traits.isDisjoint(with: [.backslash, .trailingDot, .escapes]) ? [false] : [false, true]
        var out: [[UInt8]] = []
        for p in parameters {
            for d in decodings {
                for w in windows where p != .kept || d > 0 || w {
                    var s = canonical
                    if p == .droppedBeforeDecoding { s = droppingParameters(s) }
                    for _ in 0..<d { s = decoded(s) }
                    if p == .droppedAfterDecoding { s = droppingParameters(s) }
                    if w { s = windowsForm(s) }
                    s = normalized(s)
                    if s != canonical && !out.contains(s) { out.append(s) }
                }
            }
        }
        return out
    }

    /// `;` up to the end of each segment removed.
    static func droppingParameters(_ s: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(s.count)
        var inParameters = false
        for b in s {
            if b == PathCanonicalizer.slash { inParameters = false }
            if b == PathCanonicalizer.semicolon { inParameters = true }
            if !inParameters { out.append(b) }
        }
        return out
    }

    /// Every well-formed `%XX` decoded (a malformed one is left as it is).
    static func decoded(_ s: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(s.count)
        var i = 0
        while i < s.count {
            if s[i] == PathCanonicalizer.percent, i + 2 < s.count,
               let hi = PathCanonicalizer.hex(s[i + 1]), let lo = PathCanonicalizer.hex(s[i + 2]) {
                out.append(hi << 4 | lo)
                i += 3
            } else {
                out.append(s[i])
                i += 1
            }
        }
        return out
    }

    /// `\` as `/`, whitespace dropped from both ends of each segment, and trailing dots too
    /// from each segment that is not all dots.
    static func windowsForm(_ s: [UInt8]) -> [UInt8] {
        let slashed = s.map { $0 == PathCanonicalizer.backslash ? PathCanonicalizer.slash : $0 }
        return segments(slashed).map { segment -> ArraySlice<UInt8> in
            var t = segment
            while let first = t.first, isWhitespace(first) { t = t.dropFirst() }
            while let last = t.last, isWhitespace(last) { t = t.dropLast() }
            guard t.contains(where: { $0 != PathCanonicalizer.dot }) else { return t }
            while let last = t.last, last == PathCanonicalizer.dot || isWhitespace(last) { t = t.dropLast() }
            return t
        }.joined(separator: [PathCanonicalizer.slash]).map { $0 }
    }

    /// Java's `Character.isWhitespace` over ASCII: space, HT, LF, VT, FF, CR and the
    /// separators U+001C–U+001F.
    static func isWhitespace(_ b: UInt8) -> Bool { b == 0x20 || (0x09...0x0D).contains(b) || (0x1C...0x1F).contains(b) }

    /// Dot-segments removed (RFC 3986 §5.2.4, `..` at the root staying there) and empty
    /// segments merged; a trailing `/` kept.
    static func normalized(_ s: [UInt8]) -> [UInt8] {
        var kept: [ArraySlice<UInt8>] = []
        let parts = segments(s)
        var trailingSlash = false
        for (i, segment) in parts.enumerated() {
            let last = i == parts.count - 1
            if segment.isEmpty || segment.elementsEqual([PathCanonicalizer.dot]) {
                if last { trailingSlash = true }
            } else if segment.elementsEqual([PathCanonicalizer.dot, PathCanonicalizer.dot]) {
                if !kept.isEmpty { kept.removeLast() }
                if last { trailingSlash = true }
            } else {
                kept.append(segment)
            }
        }
        var out: [UInt8] = [PathCanonicalizer.slash]
        for (i, segment) in kept.enumerated() {
            out += segment
            if i < kept.count - 1 || trailingSlash { out.append(PathCanonicalizer.slash) }
        }
        return out
    }

    /// The segments after the leading `/`.
    private static func segments(_ s: [UInt8]) -> [ArraySlice<UInt8>] {
        let body = s.first == PathCanonicalizer.slash ? s.dropFirst() : s[...]
        return body.split(separator: PathCanonicalizer.slash, omittingEmptySubsequences: false)
    }
}
