/// `Accept-Encoding` (RFC 9110 §12.5.3): which of our codings a client takes, and which it
/// prefers. Read in place from the request head's bytes, without allocating.
///
/// - Tokens are case-insensitive; `x-gzip` is `gzip` (§8.4.1.3).
/// - A coding's weight is its own entry's `q`, else the `*` entry's, else 0 (not listed: not
///   acceptable — a client that lists none gets the body as it is).
/// - `q=0` refuses a coding; a malformed `q` is read as 0, so a header we cannot read never
///   gets a coding the client did not ask for.
/// - The highest weight wins; between equal weights, the order of `offered` (ours).
enum AcceptEncoding {
    /// The coding to use for a client that sent `value` (all of its Accept-Encoding fields,
    /// joined with commas), or nil for none.
    static func choose(_ value: UnsafeRawBufferPointer, offered: [ContentCoding]) -> ContentCoding? {
        var best: ContentCoding? = nil
        var bestWeight = 0
        for coding in offered {
            let w = weight(of: coding, in: value)
            if w > bestWeight {
                best = coding
                bestWeight = w
            }
        }
        return best
    }

    /// The weight (0…1000) the header gives `coding`.
    static func weight(of coding: ContentCoding, in value: UnsafeRawBufferPointer) -> Int {
        var own: Int? = nil
        var star: Int? = nil
        forEachEntry(value) { token, q in
            if matches(token, coding) {
                own = max(own ?? 0, q)
            } else if token.count == 1 && token[0] == UInt8(ascii: "*") {
                star = max(star ?? 0, q)
            }
        }
        return own ?? star ?? 0
    }

    private static func matches(_ token: UnsafeRawBufferPointer, _ coding: ContentCoding) -> Bool {
        switch coding {
        case .brotli: return equalsLowercase(token, "br")
        case .gzip: return equalsLowercase(token, "gzip") || equalsLowercase(token, "x-gzip")
        }
    }

    /// Calls `body` with each entry's coding token and weight (1000 when no `q` is given).
    static func forEachEntry(_ value: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer, Int) -> Void) {
        var i = 0
        let n = value.count
        while i < n {
            // One entry: up to the next comma.
            var end = i
            while end < n && value[end] != UInt8(ascii: ",") { end += 1 }
            var tokenEnd = i
            while tokenEnd < end && value[tokenEnd] != UInt8(ascii: ";") { tokenEnd += 1 }
            let token = trimmed(value, i, tokenEnd)
            if token.count > 0 {
                body(token, tokenEnd < end ? qValue(trimmed(value, tokenEnd + 1, end)) : 1000)
            }
            i = end + 1
        }
    }

    /// `q=0.5` (RFC 9110 §12.4.2: `0(.ddd)?` or `1(.000)?`) as 500; anything else as 0. Other
    /// parameters (none are defined for Accept-Encoding) make the entry unreadable: 0.
    static func qValue(_ parameter: UnsafeRawBufferPointer) -> Int {
        guard parameter.count >= 3, parameter[0] | 0x20 == UInt8(ascii: "q"), parameter[1] == UInt8(ascii: "=") else { return 0 }
        let digits = UnsafeRawBufferPointer(rebasing: parameter[2...])
        let first = digits[0]
        guard first == UInt8(ascii: "0") || first == UInt8(ascii: "1") else { return 0 }
        var value = Int(first - UInt8(ascii: "0")) * 1000
        if digits.count == 1 { return value }
        guard digits[1] == UInt8(ascii: "."), digits.count <= 5 else { return 0 }
        var scale = 100
        for d in digits[2...] {
            guard d >= UInt8(ascii: "0") && d <= UInt8(ascii: "9") else { return 0 }
            value += Int(d - UInt8(ascii: "0")) * scale
            scale /= 10
        }
        return value <= 1000 ? value : 0
    }

    private static func trimmed(_ b: UnsafeRawBufferPointer, _ start: Int, _ end: Int) -> UnsafeRawBufferPointer {
        var s = start, e = end
        while s < e && (b[s] == 0x20 || b[s] == 0x09) { s += 1 }
        while e > s && (b[e - 1] == 0x20 || b[e - 1] == 0x09) { e -= 1 }
        return UnsafeRawBufferPointer(rebasing: b[s..<e])
    }

    private static func equalsLowercase(_ b: UnsafeRawBufferPointer, _ lower: StaticString) -> Bool {
        guard b.count == lower.utf8CodeUnitCount else { return false }
        let l = lower.utf8Start
        for i in 0..<b.count where b[i] | 0x20 != l[i] { return false }
        return true
    }
}
