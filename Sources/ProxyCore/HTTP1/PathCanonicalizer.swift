// The one spelling of a request path that every phase decides on and that is forwarded
// upstream (RFC 3986 §6.2.2): percent-encoded unreserved characters decoded (`%61` → `a`,
// `%7E` → `~`), the hex of every other escape upper-cased (`%2f` → `%2F`), dot-segments removed
// (§5.2.4), and empty segments merged (`//` → `/`, nginx's `merge_slashes on`).
//
// Encoded reserved characters (`%2F`, `%3B`, `%5C`, `%25`) stay encoded: real apps carry them
// in paths (RabbitMQ's `/api/queues/%2F/…`, GitLab's `group%2Fproject`). Servers read those
// differently from each other, which `PathReadings` answers for path rules; the canonical form
// itself only ever changes a path into one that every server reads the same way.
//
// Refused (400), because no reading of them is safe to forward: a malformed escape, `%00`
// (C strings end there), overlong UTF-8 (`%C0%AE` is `.` to a lax decoder), and a `..` that
// climbs above the root (nginx refuses it too).

/// What the canonical path contains that servers read differently (see `PathReadings`).
public struct PathTraits: OptionSet, Sendable, Equatable {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    /// A `%XX` escape of a reserved or non-ASCII byte (`%2F`, `%5C`, `%25`, …).
    public static let escapes = PathTraits(rawValue: 1)
    /// A `;` (path parameters: Tomcat and Jetty drop `;…` from each segment).
    public static let semicolon = PathTraits(rawValue: 2)
    /// A raw `\` (IIS and Windows servers read it as `/`).
    public static let backslash = PathTraits(rawValue: 4)
    /// A segment ending in `.` (Windows drops trailing dots: `admin.` is `admin`).
    public static let trailingDot = PathTraits(rawValue: 8)
}

public enum PathCanonicalizer {
    public enum Outcome: Sendable, Equatable {
        /// The input is canonical already: nothing was written.
        case canonical(PathTraits)
        /// The canonical path was written to `out` (which was emptied first).
        case rewritten(PathTraits)
        /// Refused: the reason names the rule (it goes to the client's 400 and the log).
        case refused(String)
    }

    /// Canonicalizes `path` (the request target up to `?`; it starts with `/`, or is empty for
    /// an absolute-form target without a path, which means `/`). One pass over the bytes and
    /// no allocation when the path is canonical, the common case; otherwise `out` is filled.
    public static func canonicalize(_ path: UnsafeRawBufferPointer, into out: inout [UInt8]) -> Outcome {
        switch check(path) {
        case .failure(let reason): return .refused(reason.text)
        case .success(let traits?): return .canonical(traits)
        case .success(nil): return rewrite(path, into: &out)
        }
    }

    /// The same over a String (configuration, tests); the refusal when the path is refused.
    public static func canonical(_ path: String) -> Result<String, Refusal> {
        var out: [UInt8] = []
        switch Array(path.utf8).withUnsafeBytes({ canonicalize($0, into: &out) }) {
        case .canonical: return .success(path)
        case .rewritten: return .success(String(decoding: out, as: UTF8.self))
        case .refused(let reason): return .failure(Refusal(text: reason))
        }
    }

    public struct Refusal: Error, Sendable, Equatable {
        public let text: String
    }

    // MARK: The fast check

    /// nil traits: canonical but for something `rewrite` changes. A refusal found here is final.
    private static func check(_ p: UnsafeRawBufferPointer) -> Result<PathTraits?, Refusal> {
        let n = p.count
        guard n > 0, p[0] == slash else { return .success(nil) }
        var traits: PathTraits = []
        var clean = true
        var segmentStart = 1
        var i = 1
        var previousEscape: UInt8? = nil
        while i <= n {
            let b: UInt8 = i < n ? p[i] : slash
            if b == slash {
                let length = i - segmentStart
                if length == 0 && i < n { clean = false }
                if length == 1 && p[segmentStart] == dot { clean = false }
                if length == 2 && p[segmentStart] == dot && p[segmentStart + 1] == dot { clean = false }
                if length > 0 && p[i - 1] == dot { traits.insert(.trailingDot) }
                segmentStart = i + 1
                previousEscape = nil
                i += 1
                continue
            }
            if b == percent {
                guard i + 2 < n, let hi = hex(p[i + 1]), let lo = hex(p[i + 2]) else {
                    return .failure(.malformedEscape)
                }
                let decoded = hi << 4 | lo
                if let refusal = refusal(decoded, after: previousEscape) { return .failure(refusal) }
                if isUnreserved(decoded) || isLowerHex(p[i + 1]) || isLowerHex(p[i + 2]) { clean = false }
                traits.insert(.escapes)
                previousEscape = decoded
                i += 3
                continue
            }
            if b == semicolon { traits.insert(.semicolon) }
            if b == backslash { traits.insert(.backslash) }
            previousEscape = nil
            i += 1
        }
        return .success(clean ? traits : nil)
    }

    // MARK: The rewrite

    private static func rewrite(_ p: UnsafeRawBufferPointer, into out: inout [UInt8]) -> Outcome {
        out.removeAll(keepingCapacity: true)
        out.reserveCapacity(p.count + 1)
        out.append(slash)
        // Each segment is decoded into `out` after the `/` that starts it, then dropped (`.`,
        // empty), or undone with the segment before it (`..`).
        var i = p.count > 0 && p[0] == slash ? 1 : 0
        var previousEscape: UInt8? = nil
        while true {
            let segmentStart = out.count
            var decodedDot = 0, plain = 0
            while i < p.count && p[i] != slash {
                let b = p[i]
                if b == percent {
                    guard i + 2 < p.count, let hi = hex(p[i + 1]), let lo = hex(p[i + 2]) else {
                        return .refused(Refusal.malformedEscape.text)
                    }
                    let decoded = hi << 4 | lo
                    if let refusal = refusal(decoded, after: previousEscape) { return .refused(refusal.text) }
                    previousEscape = decoded
                    if isUnreserved(decoded) {
                        out.append(decoded)
                        if decoded == dot { decodedDot += 1 } else { plain += 1 }
                    } else {
                        out.append(percent)
                        out.append(upperHex[Int(hi)])
                        out.append(upperHex[Int(lo)])
                        plain += 1
                    }
                    i += 3
                    continue
                }
                previousEscape = nil
                out.append(b)
                if b == dot { decodedDot += 1 } else { plain += 1 }
                i += 1
            }
            let length = out.count - segmentStart
            let atEnd = i >= p.count
            if plain == 0 && decodedDot == 2 && length == 2 {
                // `..`: drop it and the segment before it; none left means it climbs above `/`.
                out.removeLast(2)
                guard out.count > 1 else { return .refused(Refusal.aboveRoot.text) }
                out.removeLast()  // the `/` that ended the previous segment
                while let last = out.last, last != slash { out.removeLast() }
                if atEnd { break }
            } else if plain == 0 && ((decodedDot == 1 && length == 1) || length == 0) {
                // `.` or an empty segment: nothing, and no second `/` for it.
                out.removeLast(length)
                if atEnd { break }
            } else {
                if atEnd { break }
                out.append(slash)
            }
            previousEscape = nil
            i += 1
        }
        // A path ending in `/.`, `/..` or `/` keeps its trailing `/` (RFC 3986 §5.4's examples).
        return .rewritten(traitsOf(out))
    }

    /// The traits of a canonical path (after a rewrite: its bytes are not the input's).
    static func traitsOf(_ path: [UInt8]) -> PathTraits {
        path.withUnsafeBytes { b in
            if case .success(let t?) = check(b) { return t }
            return []
        }
    }

    // MARK: Bytes

    /// `%00`, or a byte that makes the escapes so far overlong UTF-8 (a lead byte `C0`/`C1`, or
    /// `E0` before 80–9F, `F0` before 80–8F): a lax decoder reads those as ASCII (`%C0%AE` = `.`).
    private static func refusal(_ decoded: UInt8, after previous: UInt8?) -> Refusal? {
        if decoded == 0 { return .nul }
        if decoded == 0xC0 || decoded == 0xC1 { return .overlong }
        if previous == 0xE0 && decoded >= 0x80 && decoded <= 0x9F { return .overlong }
        if previous == 0xF0 && decoded >= 0x80 && decoded <= 0x8F { return .overlong }
        return nil
    }

    @inline(__always) static func hex(_ b: UInt8) -> UInt8? {
        switch b {
        case 0x30...0x39: return b - 0x30
        case 0x41...0x46: return b - 0x41 + 10
        case 0x61...0x66: return b - 0x61 + 10
        default: return nil
        }
    }

    @inline(__always) private static func isLowerHex(_ b: UInt8) -> Bool { b >= 0x61 && b <= 0x66 }

    /// RFC 3986 §2.3: ALPHA / DIGIT / "-" / "." / "_" / "~".
    @inline(__always) static func isUnreserved(_ b: UInt8) -> Bool {
        (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || (b >= 0x30 && b <= 0x39)
            || b == 0x2D || b == 0x2E || b == 0x5F || b == 0x7E
    }

    private static let upperHex: [UInt8] = Array("0123456789ABCDEF".utf8)
    static let slash = UInt8(ascii: "/"), dot = UInt8(ascii: "."), percent = UInt8(ascii: "%")
    static let semicolon = UInt8(ascii: ";"), backslash = UInt8(ascii: "\\")
}

extension PathCanonicalizer.Refusal {
    static let malformedEscape = Self(text: "malformed percent-escape in path")
    static let nul = Self(text: "%00 in path")
    static let overlong = Self(text: "overlong UTF-8 escape in path")
    static let aboveRoot = Self(text: "path climbs above the root (..)")
}
