/// Strict base64 (RFC 4648 §4) and base64url (§5) codecs over raw bytes.
///
/// Decoding accepts exactly one spelling per byte string: no whitespace, no characters from
/// the other alphabet, padding only where the variant requires it, and zero trailing bits in
/// the last character (RFC 4648 §3.5), so a token cannot be altered without changing its bytes.
public enum Base64 {
    public enum Variant: Sendable {
        /// `+` `/`, padded with `=` to a multiple of 4 (key material, PEM bodies).
        case standard
        /// `-` `_`, no padding (JOSE, cookies).
        case urlUnpadded
    }

    public static func encode(_ bytes: [UInt8], _ variant: Variant) -> String {
        bytes.withUnsafeBytes { encode($0, variant) }
    }

    public static func encode(_ bytes: UnsafeRawBufferPointer, _ variant: Variant) -> String {
        let padded = variant == .standard
        let fullGroups = bytes.count / 3
        let remainder = bytes.count % 3
        let length = fullGroups * 4 + (remainder == 0 ? 0 : (padded ? 4 : remainder + 1))
        let table: StaticString = variant == .standard
            ? "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
            : "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
        return String(unsafeUninitializedCapacity: length) { out in
            let alphabet = table.utf8Start
            var o = 0
            var i = 0
            while i + 3 <= bytes.count {
                let n = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2])
                out[o] = alphabet[Int(n >> 18)]
                out[o + 1] = alphabet[Int(n >> 12 & 63)]
                out[o + 2] = alphabet[Int(n >> 6 & 63)]
                out[o + 3] = alphabet[Int(n & 63)]
                i += 3
                o += 4
            }
            if remainder == 1 {
                let n = UInt32(bytes[i]) << 16
                out[o] = alphabet[Int(n >> 18)]
                out[o + 1] = alphabet[Int(n >> 12 & 63)]
                o += 2
                if padded { out[o] = UInt8(ascii: "="); out[o + 1] = UInt8(ascii: "="); o += 2 }
            } else if remainder == 2 {
                let n = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8
                out[o] = alphabet[Int(n >> 18)]
                out[o + 1] = alphabet[Int(n >> 12 & 63)]
                out[o + 2] = alphabet[Int(n >> 6 & 63)]
                o += 3
                if padded { out[o] = UInt8(ascii: "="); o += 1 }
            }
            return o
        }
    }

    public static func decode(_ text: String, _ variant: Variant) -> [UInt8]? {
        var text = text
        return text.withUTF8 { decode(UnsafeRawBufferPointer($0), variant) }
    }

    public static func decode(_ bytes: ArraySlice<UInt8>, _ variant: Variant) -> [UInt8]? {
        bytes.withUnsafeBytes { decode($0, variant) }
    }

    /// Returns nil for anything that is not the canonical encoding of some byte string.
    public static func decode(_ input: UnsafeRawBufferPointer, _ variant: Variant) -> [UInt8]? {
        var count = input.count
        if variant == .standard {
            guard count % 4 == 0 else { return nil }
            // Up to two '=' at the very end; any other '=' fails the alphabet check below.
            if count > 0, input[count - 1] == UInt8(ascii: "=") {
                count -= 1
                if input[count - 1] == UInt8(ascii: "=") { count -= 1 }
            }
        }
        // One leftover character cannot hold a whole byte.
        let tail = count % 4
        guard tail != 1 else { return nil }
        let outputLength = count / 4 * 3 + (tail == 0 ? 0 : tail - 1)
        let urlAlphabet = variant == .urlUnpadded
        var valid = true
        let output = [UInt8](unsafeUninitializedCapacity: outputLength) { out, initialized in
            var i = 0
            var o = 0
            while i + 4 <= count {
                let a = value(input[i], urlAlphabet), b = value(input[i + 1], urlAlphabet)
                let c = value(input[i + 2], urlAlphabet), d = value(input[i + 3], urlAlphabet)
                if (a | b | c | d) & 0x80 != 0 { valid = false; break }
                let n = UInt32(a) << 18 | UInt32(b) << 12 | UInt32(c) << 6 | UInt32(d)
                out[o] = UInt8(truncatingIfNeeded: n >> 16)
                out[o + 1] = UInt8(truncatingIfNeeded: n >> 8)
                out[o + 2] = UInt8(truncatingIfNeeded: n)
                i += 4
                o += 3
            }
            if valid && tail == 2 {
                let a = value(input[i], urlAlphabet), b = value(input[i + 1], urlAlphabet)
                // The low 4 bits of the second character fall outside the byte: must be zero.
                if (a | b) & 0x80 != 0 || b & 0x0F != 0 { valid = false } else {
                    out[o] = a << 2 | b >> 4
                    o += 1
                }
            } else if valid && tail == 3 {
                let a = value(input[i], urlAlphabet), b = value(input[i + 1], urlAlphabet)
                let c = value(input[i + 2], urlAlphabet)
                // The low 2 bits of the third character fall outside the bytes: must be zero.
                if (a | b | c) & 0x80 != 0 || c & 0x03 != 0 { valid = false } else {
                    out[o] = a << 2 | b >> 4
                    out[o + 1] = (b & 0x0F) << 4 | c >> 2
                    o += 2
                }
            }
            initialized = valid ? o : 0
        }
        return valid ? output : nil
    }

    /// The 6-bit value of one character, or 0xFF when it is not in the variant's alphabet.
    @inline(__always)
    private static func value(_ c: UInt8, _ urlAlphabet: Bool) -> UInt8 {
        switch c {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): return c &- 65
        case UInt8(ascii: "a")...UInt8(ascii: "z"): return c &- 71
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c &+ 4
        case UInt8(ascii: "-"): return urlAlphabet ? 62 : 0xFF
        case UInt8(ascii: "_"): return urlAlphabet ? 63 : 0xFF
        case UInt8(ascii: "+"): return urlAlphabet ? 0xFF : 62
        case UInt8(ascii: "/"): return urlAlphabet ? 0xFF : 63
        default: return 0xFF
        }
    }
}
