/// Strict `application/x-www-form-urlencoded` decoding of a query string (the bytes after `?`).
///
/// Stricter than the WHATWG algorithm on purpose: where a lenient decoder *repairs* input
/// (a lone `%`, `%4`, invalid UTF-8 turned into U+FFFD, a bare `&&`), two parsers can disagree
/// about what a URL says, and a value that differs from what the native app sent must never
/// reach a token endpoint or the app's callback. So anything not exactly well-formed is refused:
///
/// - raw bytes must be RFC 3986 query characters (`unreserved / sub-delims / ":" / "@" / "/" /
///   "?"`, plus `%` for escapes); a space, `"`, `<`, `\`, `#`, any non-ASCII byte… is refused;
/// - `+` is a space; `%` must be followed by exactly two hex digits;
/// - every field is `name=value` with a non-empty name (`&&`, a leading or trailing `&`, or a
///   field without `=` are refused: the apps' URL builders never produce them);
/// - the decoded bytes of names and values must be valid UTF-8 (no overlong forms, no
///   surrogates) and contain no control characters (C0, DEL, C1), so nothing decoded here
///   can split a log line or a header.
///
/// The first `=` of a field separates name from value; later ones belong to the value (some
/// URL builders leave `=` in values unescaped, and that reading is unambiguous).
enum QueryDecoding {
    /// The whole query, before decoding. Far above any real callback (a Google code is ~100
    /// bytes, a verifier ≤ 128) and small enough that decoding it cannot cost much.
    static let maxQueryBytes = 8 * 1024

    struct Field: Sendable, Equatable {
        var name: String
        var value: String
    }

    enum Problem: Error, Sendable, Equatable {
        case tooLong
        /// `&&`, a leading or trailing `&`, or `=value` without a name.
        case emptyField
        /// A field with no `=`.
        case missingEquals
        /// A raw byte that may not appear in a URI query.
        case invalidCharacter
        case badPercentEncoding
        case invalidUTF8
        case controlCharacter

        var reason: String {
            switch self {
            case .tooLong: return "the query exceeds \(QueryDecoding.maxQueryBytes) bytes"
            case .emptyField: return "an empty field or name"
            case .missingEquals: return "a field without '='"
            case .invalidCharacter: return "a character not allowed in a URI query"
            case .badPercentEncoding: return "bad percent-encoding"
            case .invalidUTF8: return "invalid UTF-8"
            case .controlCharacter: return "a control character"
            }
        }
    }

    /// Where decoding failed. `name` is the field's decoded name when the failure is in its
    /// value (the caller decides whether that name is safe to log); nil when the name itself
    /// could not be decoded.
    struct Failure: Error, Sendable, Equatable {
        var problem: Problem
        var name: String?
    }

    static func decode(_ query: String) -> Result<[Field], Failure> {
        // Checked before copying: `utf8.count` is O(1) for native strings.
        guard query.utf8.count <= maxQueryBytes else { return .failure(Failure(problem: .tooLong, name: nil)) }
        return decode(Array(query.utf8))
    }

    static func decode(_ query: [UInt8]) -> Result<[Field], Failure> {
        guard query.count <= maxQueryBytes else { return .failure(Failure(problem: .tooLong, name: nil)) }
        var fields: [Field] = []
        if query.isEmpty { return .success(fields) }
        var start = 0
        while start <= query.count {
            var end = start
            while end < query.count && query[end] != amp { end += 1 }
            let field = query[start..<end]
            guard !field.isEmpty else { return .failure(Failure(problem: .emptyField, name: nil)) }
            guard let eq = field.firstIndex(of: equals) else {
                return .failure(Failure(problem: .missingEquals, name: nil))
            }
            guard eq > field.startIndex else { return .failure(Failure(problem: .emptyField, name: nil)) }
            let name: String
            switch decodeComponent(field[field.startIndex..<eq]) {
            case .success(let n): name = n
            case .failure(let p): return .failure(Failure(problem: p, name: nil))
            }
            switch decodeComponent(field[(eq + 1)..<field.endIndex]) {
            case .success(let value): fields.append(Field(name: name, value: value))
            case .failure(let p): return .failure(Failure(problem: p, name: name))
            }
            start = end + 1
        }
        return .success(fields)
    }

    /// Decodes one name or value.
    static func decodeComponent(_ raw: ArraySlice<UInt8>) -> Result<String, Problem> {
        var out: [UInt8] = []
        out.reserveCapacity(raw.count)
        var i = raw.startIndex
        while i < raw.endIndex {
            let b = raw[i]
            if b == percent {
                guard i + 2 < raw.endIndex,
                      let high = hexValue(raw[i + 1]), let low = hexValue(raw[i + 2]) else {
                    return .failure(.badPercentEncoding)
                }
                out.append(high << 4 | low)
                i += 3
                continue
            }
            if b == plus {
                out.append(0x20)
            } else if isQueryCharacter(b) {
                out.append(b)
            } else {
                return .failure(.invalidCharacter)
            }
            i += 1
        }
        guard let text = String(validating: out, as: UTF8.self) else { return .failure(.invalidUTF8) }
        for scalar in text.unicodeScalars where isControl(scalar) {
            return .failure(.controlCharacter)
        }
        return .success(text)
    }

    static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value)
    }

    private static let amp = UInt8(ascii: "&")
    private static let equals = UInt8(ascii: "=")
    private static let percent = UInt8(ascii: "%")
    private static let plus = UInt8(ascii: "+")

    @inline(__always) static func hexValue(_ b: UInt8) -> UInt8? {
        switch b {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return b - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return b - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return b - UInt8(ascii: "A") + 10
        default: return nil
        }
    }

    /// RFC 3986 `query` characters other than `%` (handled by the caller): unreserved,
    /// sub-delims, `:`, `@`, `/`, `?`. `&` and the first `=` never get here as data.
    @inline(__always) static func isQueryCharacter(_ b: UInt8) -> Bool {
        switch b {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
             UInt8(ascii: "0")...UInt8(ascii: "9"),
             UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"),
             UInt8(ascii: "!"), UInt8(ascii: "$"), UInt8(ascii: "&"), UInt8(ascii: "'"), UInt8(ascii: "("),
             UInt8(ascii: ")"), UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: ","), UInt8(ascii: ";"),
             UInt8(ascii: "="), UInt8(ascii: ":"), UInt8(ascii: "@"), UInt8(ascii: "/"), UInt8(ascii: "?"):
            return true
        default:
            return false
        }
    }
}
