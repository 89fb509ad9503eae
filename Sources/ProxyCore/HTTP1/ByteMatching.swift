// The byte-level grammar of HTTP/1.1 shared by RequestParser, ResponseParser, ChunkedDecoder
// and the engine. Everything works on an UnsafeRawBufferPointer plus offsets: no String, no
// Foundation, no allocation. Character classes are 128-bit masks (two UInt64 constants), so a
// lookup is a shift and an AND with nothing to initialise; the long runs (targets, field values,
// the search for CRLFCRLF) are scanned eight bytes at a time.

public enum ByteMatching {
    /// Whether the bytes at `range` hold `byte` (eight at a time: runs for every forwarded field).
    @inline(__always)
    public static func contains(_ buffer: UnsafeRawBufferPointer, _ range: ByteRange, _ byte: UInt8) -> Bool {
        let base = buffer.baseAddress!
        var p = range.start
        let end = range.end
        let pattern = SWAR.repeating(byte)
        while p &+ 8 <= end {
            if SWAR.zeroBytes(SWAR.load(base, p) ^ pattern) != 0 { return true }
            p &+= 8
        }
        while p < end {
            if buffer[p] == byte { return true }
            p &+= 1
        }
        return false
    }

    /// Whether the bytes at `range` equal `lowercase`, ignoring ASCII case in the buffer.
    /// `lowercase` must be lowercase ASCII (field names, tokens such as `chunked`).
    /// - Parameter underscoreMatchesDash: `_` in the buffer also matches `-` in the literal
    ///   (header names as CGI, Rack and WSGI fold them).
    @inlinable
    public static func equalsLowercase(_ buffer: UnsafeRawBufferPointer, _ range: ByteRange,
                                       _ lowercase: StaticString, underscoreMatchesDash: Bool = false) -> Bool {
        guard range.count == lowercase.utf8CodeUnitCount else { return false }
        let literal = lowercase.utf8Start
        for i in 0..<range.count {
            let b = buffer[range.start &+ i]
            let l = literal[i]
            // Only letters may fold: OR-ing 0x20 into other bytes would let CR (0x0D) match `-`.
            if l >= UInt8(ascii: "a") && l <= UInt8(ascii: "z") {
                if b | 0x20 != l { return false }
            } else if b != l && !(underscoreMatchesDash && l == UInt8(ascii: "-") && b == UInt8(ascii: "_")) {
                return false
            }
        }
        return true
    }

    /// Whether the bytes at `range` equal `literal` exactly (method names are case-sensitive,
    /// RFC 9110 §9.1).
    @inlinable
    public static func equals(_ buffer: UnsafeRawBufferPointer, _ range: ByteRange,
                              _ literal: StaticString) -> Bool {
        guard range.count == literal.utf8CodeUnitCount else { return false }
        let bytes = literal.utf8Start
        for i in 0..<range.count where buffer[range.start &+ i] != bytes[i] { return false }
        return true
    }

    /// RFC 9110 §5.6.2: tchar = "!" / "#" / "$" / "%" / "&" / "'" / "*" / "+" / "-" / "." /
    /// "^" / "_" / "`" / "|" / "~" / DIGIT / ALPHA.
    @inlinable
    public static func isTokenChar(_ b: UInt8) -> Bool {
        inMask(b, low: 0x03FF_6CFA_0000_0000, high: 0x57FF_FFFF_C7FF_FFFE)
    }

    /// RFC 9110 §5.5: a field-value byte is VCHAR, obs-text (0x80–0xFF), SP or HTAB; every other
    /// control byte (NUL, CR, LF, DEL, …) is refused.
    @inlinable
    public static func isFieldValueChar(_ b: UInt8) -> Bool {
        b >= 0x20 ? b != 0x7F : b == 0x09
    }

    /// RFC 3986 §3.2.2 reg-name characters: unreserved / sub-delims (pct-encoding handled apart).
    @inlinable
    static func isRegNameChar(_ b: UInt8) -> Bool {
        inMask(b, low: 0x2BFF_7FD2_0000_0000, high: 0x47FF_FFFE_87FF_FFFE)
    }

    @inlinable
    static func inMask(_ b: UInt8, low: UInt64, high: UInt64) -> Bool {
        if b < 64 { return (low >> UInt64(b)) & 1 == 1 }
        if b < 128 { return (high >> UInt64(b &- 64)) & 1 == 1 }
        return false
    }

    @inlinable
    static func isDigit(_ b: UInt8) -> Bool { b &- UInt8(ascii: "0") < 10 }

    @inlinable
    static func hexValue(_ b: UInt8) -> UInt8? {
        if b &- UInt8(ascii: "0") < 10 { return b &- UInt8(ascii: "0") }
        let folded = b | 0x20
        if folded &- UInt8(ascii: "a") < 6 { return folded &- UInt8(ascii: "a") &+ 10 }
        return nil
    }

    /// The byte at `i` of a path, a `%XX` escape decoded: the byte and how many bytes it took
    /// (1 or 3); nil for a `%` without two hex digits after it.
    @inlinable
    static func decodedByte(_ path: UnsafeRawBufferPointer, at i: Int) -> (byte: UInt8, width: Int)? {
        let b = path[i]
        guard b == UInt8(ascii: "%") else { return (b, 1) }
        guard i + 2 < path.count, let hi = hexValue(path[i + 1]), let lo = hexValue(path[i + 2]) else { return nil }
        return (hi << 4 | lo, 3)
    }

    @inlinable
    static func isWhitespace(_ b: UInt8) -> Bool { b == UInt8(ascii: " ") || b == 0x09 }

    /// The offset of the first CR of the first CRLFCRLF at or after `start`, or nil.
    /// Looks for LF eight bytes at a time, then checks the three bytes before each one.
    public static func findCRLFCRLF(_ buffer: UnsafeRawBufferPointer, from start: Int = 0) -> Int? {
        guard let base = buffer.baseAddress, start >= 0 else { return nil }
        let count = buffer.count
        var i = start &+ 3
        while i &+ 8 <= count {
            var candidates = SWAR.zeroBytes(SWAR.load(base, i) ^ SWAR.repeating(0x0A))
            while candidates != 0 {
                let j = i &+ candidates.trailingZeroBitCount &>> 3
                if isCRLFCRLF(base, endingAt: j) { return j &- 3 }
                candidates &= candidates &- 1
            }
            i &+= 8
        }
        while i < count {
            if isCRLFCRLF(base, endingAt: i) { return i &- 3 }
            i &+= 1
        }
        return nil
    }

    @inline(__always)
    static func isCRLFCRLF(_ base: UnsafeRawPointer, endingAt i: Int) -> Bool {
        base.load(fromByteOffset: i, as: UInt8.self) == 0x0A
            && base.load(fromByteOffset: i &- 1, as: UInt8.self) == 0x0D
            && base.load(fromByteOffset: i &- 2, as: UInt8.self) == 0x0A
            && base.load(fromByteOffset: i &- 3, as: UInt8.self) == 0x0D
    }

    /// The first offset in `start..<end` holding a byte that cannot continue a field value
    /// without a closer look: a control byte (HTAB and CR included) or DEL. `end` if none.
    @inline(__always)
    static func firstControlByte(_ buffer: UnsafeRawBufferPointer, from start: Int, end: Int) -> Int {
        guard let base = buffer.baseAddress else { return start }
        var p = start
        while p &+ 8 <= end {
            let x = SWAR.load(base, p)
            let special = SWAR.bytesBelow(x, 0x20) | SWAR.zeroBytes(x ^ SWAR.repeating(0x7F))
            if special != 0 { return p &+ special.trailingZeroBitCount &>> 3 }
            p &+= 8
        }
        while p < end {
            let b = buffer[p]
            if b < 0x20 || b == 0x7F { return p }
            p &+= 1
        }
        return end
    }

    /// The first offset in `start..<end` holding a byte that is not plain request-target
    /// material (anything but 0x21–0x7E, and `#`). `end` if none.
    @inline(__always)
    static func firstNonTargetByte(_ buffer: UnsafeRawBufferPointer, from start: Int, end: Int) -> Int {
        guard let base = buffer.baseAddress else { return start }
        var p = start
        while p &+ 8 <= end {
            let x = SWAR.load(base, p)
            let special = SWAR.bytesBelow(x, 0x21) | (x & SWAR.repeating(0x80))
                | SWAR.zeroBytes(x ^ SWAR.repeating(0x7F)) | SWAR.zeroBytes(x ^ SWAR.repeating(0x23))
            if special != 0 { return p &+ special.trailingZeroBitCount &>> 3 }
            p &+= 8
        }
        while p < end {
            let b = buffer[p]
            if b < 0x21 || b > 0x7E || b == UInt8(ascii: "#") { return p }
            p &+= 1
        }
        return end
    }

    /// The largest body length accepted, so that the engine may convert it to Int.
    public static let maxContentLength = UInt64(Int64.max)

    /// RFC 9110 §8.6: Content-Length = 1*DIGIT. No sign, no spaces, no hex; nil when malformed
    /// or above `maxContentLength`. Leading zeros are allowed.
    public static func parseContentLength(_ buffer: UnsafeRawBufferPointer, _ range: ByteRange) -> UInt64? {
        guard range.count > 0 else { return nil }
        var n: UInt64 = 0
        for i in range.start..<range.end {
            let digit = buffer[i] &- UInt8(ascii: "0")
            guard digit < 10 else { return nil }
            let (times10, o1) = n.multipliedReportingOverflow(by: 10)
            let (sum, o2) = times10.addingReportingOverflow(UInt64(digit))
            guard !o1, !o2, sum <= maxContentLength else { return nil }
            n = sum
        }
        return n
    }

    /// `host [":" port]` as in RFC 3986 §3.2.2–3.2.3, with a non-empty host (RFC 9110 §4.2.1)
    /// and no userinfo (RFC 9110 §4.2.4 tells recipients to treat it as an error).
    /// `requirePort` is for CONNECT's authority-form (RFC 9112 §3.2.3).
    static func isAuthority(_ buffer: UnsafeRawBufferPointer, _ range: ByteRange, requirePort: Bool) -> Bool {
        var p = range.start
        let end = range.end
        guard p < end else { return false }
        if buffer[p] == UInt8(ascii: "[") {
            // IP-literal: IPv6address / IPvFuture, checked only for its character set.
            p += 1
            let literalStart = p
            while p < end && buffer[p] != UInt8(ascii: "]") {
                guard isRegNameChar(buffer[p]) || buffer[p] == UInt8(ascii: ":") else { return false }
                p += 1
            }
            guard p < end, p > literalStart else { return false }
            p += 1
        } else {
            let hostStart = p
            while p < end && buffer[p] != UInt8(ascii: ":") {
                let b = buffer[p]
                if b == UInt8(ascii: "%") {
                    guard p + 2 < end, hexValue(buffer[p + 1]) != nil, hexValue(buffer[p + 2]) != nil else { return false }
                    p += 3
                    continue
                }
                guard isRegNameChar(b) else { return false }
                p += 1
            }
            guard p > hostStart else { return false }
        }
        if p == end { return !requirePort }
        guard buffer[p] == UInt8(ascii: ":") else { return false }
        p += 1
        let digits = end - p
        guard digits <= 5, digits > 0 || !requirePort else { return false }
        while p < end {
            guard isDigit(buffer[p]) else { return false }
            p += 1
        }
        return true
    }

    /// The index just past a quoted-string starting at the DQUOTE at `start` (RFC 9110 §5.6.4),
    /// or nil when it is unterminated or holds a byte it may not.
    static func endOfQuotedString(_ buffer: UnsafeRawBufferPointer, from start: Int, end: Int) -> Int? {
        var p = start + 1
        while p < end {
            let b = buffer[p]
            if b == UInt8(ascii: "\"") { return p + 1 }
            if b == UInt8(ascii: "\\") {
                // quoted-pair = "\" ( HTAB / SP / VCHAR / obs-text )
                guard p + 1 < end, isFieldValueChar(buffer[p + 1]) else { return nil }
                p += 2
                continue
            }
            // qdtext = HTAB / SP / %x21 / %x23-5B / %x5D-7E / obs-text
            guard isFieldValueChar(b) else { return nil }
            p += 1
        }
        return nil
    }

    /// RFC 9112 §7: transfer-coding = token *( OWS ";" OWS transfer-parameter ),
    /// transfer-parameter = token BWS "=" BWS ( token / quoted-string ).
    /// `element` is one list element with OWS already trimmed.
    static func transferCoding(_ buffer: UnsafeRawBufferPointer, _ element: ByteRange)
        -> (name: ByteRange, hasParameters: Bool)? {
        let end = element.end
        var p = element.start
        while p < end && isTokenChar(buffer[p]) { p += 1 }
        guard p > element.start else { return nil }
        let name = ByteRange(start: element.start, count: p - element.start)
        var hasParameters = false
        while true {
            while p < end && isWhitespace(buffer[p]) { p += 1 }
            if p == end { return (name, hasParameters) }
            guard buffer[p] == UInt8(ascii: ";") else { return nil }
            p += 1
            while p < end && isWhitespace(buffer[p]) { p += 1 }
            let parameterStart = p
            while p < end && isTokenChar(buffer[p]) { p += 1 }
            guard p > parameterStart else { return nil }
            while p < end && isWhitespace(buffer[p]) { p += 1 }
            guard p < end, buffer[p] == UInt8(ascii: "=") else { return nil }
            p += 1
            while p < end && isWhitespace(buffer[p]) { p += 1 }
            guard p < end else { return nil }
            if buffer[p] == UInt8(ascii: "\"") {
                guard let after = endOfQuotedString(buffer, from: p, end: end) else { return nil }
                p = after
            } else {
                let valueStart = p
                while p < end && isTokenChar(buffer[p]) { p += 1 }
                guard p > valueStart else { return nil }
            }
            hasParameters = true
        }
    }

    /// Whether all of `range` is one token.
    static func isToken(_ buffer: UnsafeRawBufferPointer, _ range: ByteRange) -> Bool {
        guard range.count > 0 else { return false }
        for i in range.start..<range.end where !isTokenChar(buffer[i]) { return false }
        return true
    }
}

// MARK: - Eight bytes at a time

/// Byte-parallel tests on a UInt64 ("SIMD within a register"). Each returns a word with the
/// high bit set in flagged bytes. The lowest flagged byte is always a true match, and every
/// true match is flagged; bytes above a true match may be flagged falsely, so callers either
/// use only the lowest flag or re-check each candidate.
enum SWAR {
    @inline(__always)
    static func load(_ base: UnsafeRawPointer, _ offset: Int) -> UInt64 {
        UInt64(littleEndian: base.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
    }

    @inline(__always)
    static func repeating(_ byte: UInt8) -> UInt64 { 0x0101_0101_0101_0101 &* UInt64(byte) }

    /// Bytes equal to zero.
    @inline(__always)
    static func zeroBytes(_ x: UInt64) -> UInt64 {
        (x &- repeating(0x01)) & ~x & repeating(0x80)
    }

    /// Bytes below `n` (n <= 128).
    @inline(__always)
    static func bytesBelow(_ x: UInt64, _ n: UInt8) -> UInt64 {
        (x &- repeating(n)) & ~x & repeating(0x80)
    }
}

// MARK: - Lists

/// The elements of an RFC 9110 §5.6.1 list (`#element`) in a field value: split on commas
/// outside quoted strings, OWS trimmed. Empty elements are returned with count 0 so that each
/// field can decide (Content-Length refuses them; Connection and Transfer-Encoding ignore them,
/// as §5.6.1.2 requires).
struct ListElements {
    let buffer: UnsafeRawBufferPointer
    var position: Int
    let end: Int
    var finished = false

    init(_ buffer: UnsafeRawBufferPointer, _ value: ByteRange) {
        self.buffer = buffer
        position = value.start
        end = value.end
    }

    mutating func next() -> ByteRange? {
        guard !finished else { return nil }
        var p = position
        while p < end && ByteMatching.isWhitespace(buffer[p]) { p += 1 }
        let start = p
        var contentEnd = p
        var inQuotes = false
        var escaped = false
        while p < end {
            let b = buffer[p]
            p += 1
            if inQuotes {
                if escaped { escaped = false } else if b == UInt8(ascii: "\\") { escaped = true } else if b == UInt8(ascii: "\"") { inQuotes = false }
                contentEnd = p
                continue
            }
            if b == UInt8(ascii: ",") { p -= 1; break }
            if b == UInt8(ascii: "\"") { inQuotes = true }
            if !ByteMatching.isWhitespace(b) { contentEnd = p }
        }
        if p < end { position = p + 1 } else { finished = true }
        return ByteRange(start: start, count: contentEnd - start)
    }
}

// MARK: - Field lines

/// Why a head parse stopped before completing: both parsers throw this internally
/// (typed throws: no allocation) and turn it into a HeadParseResult at the boundary.
enum HeadStop: Error {
    case needMore
    case failed(HTTPParseError)
}

enum FieldLine {
    case field(HeaderField, next: Int)
    /// The empty line that ends the head; `next` is the first byte after it.
    case endOfHead(next: Int)
    case needMore
    case invalid(String)
}

extension ByteMatching {
    /// How many empty lines may precede a request-line or status-line (RFC 9112 §2.2 asks
    /// servers to ignore "at least one"; clients send a stray CRLF after a POST body).
    static let maxLeadingEmptyLines = 4

    /// Skips up to `maxLeadingEmptyLines` CRLFs at the start of the buffer.
    static func skipLeadingEmptyLines(_ buffer: UnsafeRawBufferPointer, end: Int, status: Int) throws(HeadStop) -> Int {
        var p = 0
        var lines = 0
        while true {
            guard p < end else { throw .needMore }
            switch buffer[p] {
            case 0x0D:
                guard p + 1 < end else { throw .needMore }
                guard buffer[p + 1] == 0x0A else { throw .failed(HTTPParseError(status: status, reason: "CR not followed by LF")) }
                lines += 1
                guard lines <= maxLeadingEmptyLines else {
                    throw .failed(HTTPParseError(status: status, reason: "too many empty lines before the start line"))
                }
                p += 2
            case 0x0A:
                throw .failed(HTTPParseError(status: status, reason: "bare LF"))
            default:
                return p
            }
        }
    }

    /// Scans one field line (RFC 9112 §5: field-name ":" OWS field-value OWS CRLF) or the
    /// empty line ending the head, starting at `start`, reading no further than `end`.
    @inline(__always)
    static func scanFieldLine(_ buffer: UnsafeRawBufferPointer, from start: Int, end: Int) -> FieldLine {
        var p = start
        guard p < end else { return .needMore }
        let first = buffer[p]
        if first == 0x0D {
            guard p + 1 < end else { return .needMore }
            guard buffer[p + 1] == 0x0A else { return .invalid("CR not followed by LF") }
            return .endOfHead(next: p + 2)
        }
        // RFC 9112 §5.2: obs-fold must be refused by a server; §2.2: whitespace before the
        // first field must not be taken as a field either.
        if isWhitespace(first) { return .invalid("line folding or whitespace at the start of a field line") }
        while true {
            guard p < end else { return .needMore }
            let b = buffer[p]
            if b == UInt8(ascii: ":") { break }
            if isTokenChar(b) { p += 1; continue }
            // RFC 9112 §5.1: no whitespace is allowed between the field name and colon.
            if isWhitespace(b) { return .invalid("whitespace between field name and colon") }
            if b == 0x0A { return .invalid("bare LF") }
            return .invalid("invalid character in field name")
        }
        guard p > start else { return .invalid("empty field name") }
        let name = ByteRange(start: start, count: p - start)
        p += 1
        while p < end && isWhitespace(buffer[p]) { p += 1 }
        let valueStart = p
        while true {
            p = firstControlByte(buffer, from: p, end: end)
            guard p < end else { return .needMore }
            let b = buffer[p]
            if b == 0x0D { break }
            if b == 0x09 { p += 1; continue }
            if b == 0x0A { return .invalid("bare LF") }
            return .invalid("control character in field value")
        }
        guard p + 1 < end else { return .needMore }
        guard buffer[p + 1] == 0x0A else { return .invalid("CR not followed by LF") }
        // Trailing OWS is not part of the value (RFC 9112 §5).
        var valueEnd = p
        while valueEnd > valueStart && isWhitespace(buffer[valueEnd - 1]) { valueEnd -= 1 }
        return .field(HeaderField(name: name, value: ByteRange(start: valueStart, count: valueEnd - valueStart)),
                      next: p + 2)
    }
}

// MARK: - Framing fields

/// The fields that decide framing and connection reuse, accumulated field by field:
/// Content-Length (RFC 9110 §8.6), Transfer-Encoding (RFC 9112 §6.1), Connection
/// (RFC 9110 §7.6.1) and whether an Upgrade field is present. Each `add` returns a reason
/// when the value is malformed; the parsers decide the status and what combinations mean.
struct FramingFields {
    var contentLength: UInt64? = nil
    var hasTransferEncoding = false
    var chunkedCount = 0
    var lastCodingIsChunked = false
    /// A coding (even a second `chunked`) followed `chunked`.
    var codingAfterChunked = false
    /// A coding other than `chunked` was listed.
    var hasOtherCoding = false
    var close = false
    var keepAlive = false
    var upgradeOption = false
    var hasUpgradeField = false

    /// Several Content-Length values (repeated fields or a list) are accepted only when they
    /// are all the same number.
    mutating func addContentLength(_ buffer: UnsafeRawBufferPointer, _ value: ByteRange) -> String? {
        guard value.count > 0 else { return "empty Content-Length" }
        var elements = ListElements(buffer, value)
        while let element = elements.next() {
            guard let n = ByteMatching.parseContentLength(buffer, element) else { return "invalid Content-Length" }
            if let previous = contentLength, previous != n { return "conflicting Content-Length values" }
            contentLength = n
        }
        return nil
    }

    mutating func addTransferEncoding(_ buffer: UnsafeRawBufferPointer, _ value: ByteRange) -> String? {
        guard value.count > 0 else { return "empty Transfer-Encoding" }
        hasTransferEncoding = true
        var elements = ListElements(buffer, value)
        while let element = elements.next() {
            if element.count == 0 { continue }
            guard let coding = ByteMatching.transferCoding(buffer, element) else { return "invalid Transfer-Encoding" }
            if chunkedCount > 0 { codingAfterChunked = true }
            if ByteMatching.equalsLowercase(buffer, coding.name, "chunked") {
                // RFC 9112 §7.1 defines no parameters for chunked.
                if coding.hasParameters { return "parameters on the chunked coding" }
                chunkedCount += 1
                lastCodingIsChunked = true
            } else {
                hasOtherCoding = true
                lastCodingIsChunked = false
            }
        }
        return nil
    }

    /// Connection = #connection-option (tokens). Options other than close, keep-alive and
    /// upgrade name hop-by-hop fields; their ranges are appended to `tokens`.
    mutating func addConnection(_ buffer: UnsafeRawBufferPointer, _ value: ByteRange,
                                tokens: inout [ByteRange]) -> String? {
        var elements = ListElements(buffer, value)
        while let element = elements.next() {
            if element.count == 0 { continue }
            guard ByteMatching.isToken(buffer, element) else { return "invalid Connection option" }
            if ByteMatching.equalsLowercase(buffer, element, "close") {
                close = true
            } else if ByteMatching.equalsLowercase(buffer, element, "keep-alive") {
                keepAlive = true
            } else if ByteMatching.equalsLowercase(buffer, element, "upgrade") {
                upgradeOption = true
            } else {
                tokens.append(element)
            }
        }
        return nil
    }
}
