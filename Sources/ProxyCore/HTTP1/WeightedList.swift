/// A field value that lists tokens with weights — `Accept-Encoding: br;q=1.0, gzip;q=0.5`,
/// `Accept: text/html, */*;q=0.8` (RFC 9110 §12.4.2) — read in place, without allocating.
enum WeightedList {
    /// Calls `body` with each entry's token (the media type or coding, trimmed, parameters
    /// left out) and its weight, 0…1000 (1000 when no `q` is given).
    static func forEach(_ value: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer, Int) -> Void) {
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
                body(token, tokenEnd < end ? weight(parameters: trimmed(value, tokenEnd + 1, end)) : 1000)
            }
            i = end + 1
        }
    }

    /// The weight the parameters give: `q=0.5` (`0(.ddd)?` or `1(.000)?`) as 500. Anything
    /// unreadable — another parameter first, a malformed number — is 0: an entry we cannot
    /// read never grants anything.
    static func weight(parameters: UnsafeRawBufferPointer) -> Int {
        guard parameters.count >= 3, parameters[0] | 0x20 == UInt8(ascii: "q"), parameters[1] == UInt8(ascii: "=") else { return 0 }
        let digits = UnsafeRawBufferPointer(rebasing: parameters[2...])
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

    /// Whether `token` equals `lowercase` ignoring ASCII case (`lowercase` must be lowercase).
    static func equalsLowercase(_ token: UnsafeRawBufferPointer, _ lowercase: StaticString) -> Bool {
        guard token.count == lowercase.utf8CodeUnitCount else { return false }
        let l = lowercase.utf8Start
        for i in 0..<token.count where lower(token[i]) != l[i] { return false }
        return true
    }

    @inline(__always)
    static func lower(_ c: UInt8) -> UInt8 {
        c >= UInt8(ascii: "A") && c <= UInt8(ascii: "Z") ? c | 0x20 : c
    }

    /// Whether a comma-separated value lists `token` (`token` lowercase; parameters and weights
    /// ignored): `no-transform` in Cache-Control, `accept-encoding` in Vary.
    static func contains(_ value: UnsafeRawBufferPointer, _ token: StaticString) -> Bool {
        var found = false
        forEach(value) { entry, _ in
            if equalsLowercase(entry, token) { found = true }
        }
        return found
    }

    /// `b[start..<end]` without the spaces and tabs around it.
    static func trimmed(_ b: UnsafeRawBufferPointer, _ start: Int, _ end: Int) -> UnsafeRawBufferPointer {
        var s = start, e = end
        while s < e && (b[s] == 0x20 || b[s] == 0x09) { s += 1 }
        while e > s && (b[e - 1] == 0x20 || b[e - 1] == 0x09) { e -= 1 }
        return UnsafeRawBufferPointer(rebasing: b[s..<e])
    }
}
