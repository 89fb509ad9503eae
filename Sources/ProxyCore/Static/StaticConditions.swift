/// What a GET or HEAD for a static file gets, from the file's size and validators and the
/// request's conditional and `Range` fields (RFC 9110 §13, §14) — pure, so every rule has its
/// row in `StaticConditionsTests`.
///
/// - `If-None-Match` (`*`, or a list of entity-tags compared weakly) → 304; when it is there,
///   `If-Modified-Since` is not read (§13.2.2).
/// - `If-Modified-Since` → 304 when it is our `Last-Modified` exactly, as nginx's default
///   `if_modified_since exact`: a browser sends back what it was given.
/// - `Range` (GET only): one range, `bytes=a-b`, `a-` or `-n` → 206; a range that starts past
///   the end (or `-0`) → 416. Several ranges get the whole file (200): multipart/byteranges is
///   not produced — clients that ask for several (PDF viewers) take the whole file as an answer.
///   A `Range` we cannot read, or one behind an `If-Range` that is not our `ETag` or our
///   `Last-Modified` exactly, is ignored (200).
/// - `If-Match` and `If-Unmodified-Since` are not evaluated: they guard writes, which a static
///   file never takes.
enum StaticConditions {
    enum Answer: Equatable {
        case notModified
        case whole
        /// Bytes `first` through `last`, inclusive.
        case part(first: UInt64, last: UInt64)
        case unsatisfiable
    }

    /// The request's fields that matter (each nil when absent; several fields of one name
    /// joined with commas).
    struct Fields {
        var ifNoneMatch: [UInt8]? = nil
        var ifModifiedSince: [UInt8]? = nil
        var range: [UInt8]? = nil
        var ifRange: [UInt8]? = nil
    }

    static func answer(size: UInt64, etag: [UInt8], lastModified: [UInt8], isGet: Bool, _ f: Fields) -> Answer {
        if let inm = f.ifNoneMatch {
            if matchesAny(inm, etag) { return .notModified }
        } else if let ims = f.ifModifiedSince, trimmed(ims[...]).elementsEqual(lastModified) {
            return .notModified
        }
        guard isGet, let range = f.range else { return .whole }
        if let ifRange = f.ifRange {
            let v = trimmed(ifRange[...])
            // A strong comparison for the tag (§13.1.5): a weak one never matches.
            guard v.elementsEqual(etag) || v.elementsEqual(lastModified) else { return .whole }
        }
        return parseRange(range, size: size)
    }

    /// One `bytes=` range against a file of `size` bytes (`.whole`: ignore the field).
    static func parseRange(_ value: [UInt8], size: UInt64) -> Answer {
        var v = trimmed(value[...])
        let unit: [UInt8] = Array("bytes=".utf8)
        guard v.count > unit.count, zip(v.prefix(unit.count), unit).allSatisfy({ lower($0) == $1 }) else { return .whole }
        v = trimmed(v.dropFirst(unit.count))
        guard !v.contains(UInt8(ascii: ",")), let dash = v.firstIndex(of: UInt8(ascii: "-")) else { return .whole }
        let a = trimmed(v[..<dash]), b = trimmed(v[(dash + 1)...])
        if a.isEmpty {
            guard let n = number(b) else { return .whole }
            if n == 0 || size == 0 { return .unsatisfiable }
            return .part(first: size - min(n, size), last: size - 1)
        }
        guard let first = number(a) else { return .whole }
        var last = size &- 1
        if !b.isEmpty {
            guard let l = number(b), l >= first else { return .whole }
            last = l
        }
        if first >= size { return .unsatisfiable }
        return .part(first: first, last: min(last, size - 1))
    }

    /// `If-None-Match`: `*`, or one of its entity-tags equals ours, `W/` ignored (§13.1.2).
    static func matchesAny(_ list: [UInt8], _ etag: [UInt8]) -> Bool {
        let ours = opaque(etag[...])
        for item in list.split(separator: UInt8(ascii: ",")) {
            let tag = trimmed(item)
            if tag.elementsEqual([UInt8(ascii: "*")]) { return true }
            if opaque(tag).elementsEqual(ours) { return true }
        }
        return false
    }

    /// The precompressed siblings to look for (`file.br`, `file.gz`), best first: the codings
    /// the client's `Accept-Encoding` takes (weight above 0, `*` counting), by weight, Brotli
    /// first between equals. None without the field.
    static func codings(accepting value: UnsafeRawBufferPointer?) -> [ContentCoding] {
        guard let value else { return [] }
        let br = AcceptEncoding.weight(of: .brotli, in: value), gz = AcceptEncoding.weight(of: .gzip, in: value)
        var out: [ContentCoding] = []
        if br > 0 && br >= gz { out.append(.brotli) }
        if gz > 0 { out.append(.gzip) }
        if br > 0 && br < gz { out.append(.brotli) }
        return out
    }

    /// nginx's form: `"` mtime in hex `-` size in hex `"`. A change to the file (a deploy
    /// that rewrites it) changes one or the other.
    static func etag(mtime: Int, size: UInt64) -> [UInt8] {
        Array("\"\(String(mtime, radix: 16))-\(String(size, radix: 16))\"".utf8)
    }

    private static func opaque(_ tag: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        tag.starts(with: [UInt8(ascii: "W"), UInt8(ascii: "/")]) ? tag.dropFirst(2) : tag
    }

    private static func number(_ digits: ArraySlice<UInt8>) -> UInt64? {
        guard !digits.isEmpty, digits.count <= 18 else { return nil }
        var n: UInt64 = 0
        for d in digits {
            guard ByteMatching.isDigit(d) else { return nil }
            n = n * 10 + UInt64(d - UInt8(ascii: "0"))
        }
        return n
    }

    private static func trimmed(_ s: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        var s = s
        while let f = s.first, ByteMatching.isWhitespace(f) { s.removeFirst() }
        while let l = s.last, ByteMatching.isWhitespace(l) { s.removeLast() }
        return s
    }

    private static func lower(_ b: UInt8) -> UInt8 { b >= 0x41 && b <= 0x5A ? b | 0x20 : b }
}
