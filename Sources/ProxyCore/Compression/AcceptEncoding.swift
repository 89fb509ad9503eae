/// `Accept-Encoding` (RFC 9110 §12.5.3): which of our codings a client takes, and which it
/// prefers. Read in place from the request head's bytes, without allocating.
///
/// - Tokens are case-insensitive; `x-gzip` is `gzip` (§8.4.1.3).
/// - A coding's weight is its own entry's `q`, else the `*` entry's, else 0 (not listed: not
///   acceptable — a client that lists none gets the body as it is).
/// - `q=0` refuses a coding; a malformed `q` is read as 0 (`WeightedList`), so a header we
///   cannot read never gets a coding the client did not ask for.
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
        WeightedList.forEach(value) { token, q in
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
        case .brotli: return WeightedList.equalsLowercase(token, "br")
        case .gzip: return WeightedList.equalsLowercase(token, "gzip") || WeightedList.equalsLowercase(token, "x-gzip")
        }
    }
}
