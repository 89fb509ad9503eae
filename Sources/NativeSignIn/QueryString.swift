import Foundation

/// Reading and writing query strings, the two ways this library needs.
///
/// Reading follows application/x-www-form-urlencoded (`+` is a space), because that is how web
/// stacks write authorization URLs (Ruby's `URI.encode_www_form`, Python's `urlencode`):
/// `scope=openid+email` means "openid email", and `URLComponents.queryItems` would keep the `+`.
/// Decoding is the library's own and strict — a `%` without two hex digits, a byte outside ASCII
/// as written, or bytes that are not UTF-8 give no value — because Foundation's
/// `removingPercentEncoding` is not the same code on Linux and on Apple platforms, and the Android
/// core (`QueryString.decode`) must decide exactly as this one does.
///
/// Writing escapes everything but RFC 3986's unreserved characters, so that no value — a
/// provider's code with `/` or `+`, a state with `&` or `=` — can be read back differently by
/// any parser on the way (the proxy, a WebView, a provider).
enum QueryString {
    struct Field: Equatable {
        var name: String
        var value: String
    }

    /// The fields of a raw (still percent-encoded) query, in order. A field whose name or
    /// value is not valid percent-encoded UTF-8 is returned with `value == nil` so that callers
    /// can refuse it when it matters to them and ignore it otherwise.
    static func fields(_ rawQuery: String?) -> [(name: String, value: String?)] {
        guard let rawQuery, !rawQuery.isEmpty else { return [] }
        return rawQuery.split(separator: "&", omittingEmptySubsequences: true).map { pair in
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = decode(parts[0]) ?? String(parts[0])
            return (name, parts.count == 2 ? decode(parts[1]) : "")
        }
    }

    /// `name=value&…` with every name and value strictly percent-encoded.
    static func encode(_ fields: [Field]) -> String {
        fields.map { escape($0.name) + "=" + escape($0.value) }.joined(separator: "&")
    }

    static func escape(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for byte in text.utf8 {
            if isUnreserved(byte) {
                out.unicodeScalars.append(Unicode.Scalar(byte))
            } else {
                out += "%" + String(byte >> 4, radix: 16, uppercase: true)
                    + String(byte & 0x0F, radix: 16, uppercase: true)
            }
        }
        return out
    }

    /// RFC 3986 §2.3: `ALPHA / DIGIT / "-" / "." / "_" / "~"` (also RFC 7636's verifier alphabet).
    static func isUnreserved(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
             UInt8(ascii: "0")...UInt8(ascii: "9"),
             UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
            return true
        default:
            return false
        }
    }

    /// Form decoding: `+` is a space, `%XX` a byte; the bytes must be UTF-8. Nil otherwise.
    static func decode<Raw: StringProtocol>(_ raw: Raw) -> String? {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(raw.utf8.count)
        var input = raw.utf8.makeIterator()
        while let byte = input.next() {
            switch byte {
            case UInt8(ascii: "+"):
                bytes.append(UInt8(ascii: " "))
            case UInt8(ascii: "%"):
                guard let high = input.next().flatMap(hexValue), let low = input.next().flatMap(hexValue) else { return nil }
                bytes.append(high << 4 | low)
            case 0x80...:
                return nil
            default:
                bytes.append(byte)
            }
        }
        // Unicode.UTF8's decoder rejects overlong forms, surrogates and truncated sequences;
        // String(decoding:) would replace them with U+FFFD instead.
        var decoded = String.UnicodeScalarView()
        var scalars = bytes.makeIterator()
        var utf8 = Unicode.UTF8()
        while true {
            switch utf8.decode(&scalars) {
            case .scalarValue(let scalar): decoded.append(scalar)
            case .emptyInput: return String(decoded)
            case .error: return nil
            }
        }
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}
