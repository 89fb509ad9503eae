// Incremental decoder for the chunked transfer coding (RFC 9112 §7.1). The caller feeds
// whatever bytes it has; the decoder keeps its place between calls and never buffers, so
// chunk data is handed back as ranges of the caller's buffer. Chunk extensions and trailer
// fields are checked strictly and then dropped: the engine re-frames bodies, so none of it is
// ever forwarded.

public struct ChunkedDecoder: Sendable {
    enum State: Sendable {
        case size
        /// BWS after the size: only `;` may follow.
        case sizeWhitespace
        case extensionBeforeName
        case extensionName
        /// BWS after a name: `=` or `;` must follow.
        case extensionAfterName
        case extensionBeforeValue
        case extensionToken
        case extensionQuoted
        case extensionQuotedPair
        /// Just after a closing DQUOTE: `;`, BWS or CR.
        case extensionAfterQuote
        /// BWS after a value: only `;` may follow.
        case extensionAfterValueWhitespace
        case sizeLF
        case data
        case dataCR
        case dataLF
        case trailerLineStart
        case trailerName
        case trailerValue
        case trailerValueLF
        case endLF
        case done
        case failed
    }

    /// Longest chunk-size line (size, extensions, CRLF). Extensions are discarded, so an
    /// endless one would keep a connection busy without progress.
    static let maxChunkLineBytes = 4096
    /// RFC 9112 §7.1: chunk sizes over 16 hex digits are refused (overflow guard).
    static let maxSizeDigits = 16

    let maxTrailerBytes: Int
    var state = State.size
    var sizeDigits = 0
    /// The chunk size being read, then the data bytes still to come.
    var remaining = 0
    var lineBytes = 0
    var trailerBytes = 0
    var failure: HTTPParseError? = nil

    public init(maxTrailerBytes: Int = 8192) {
        self.maxTrailerBytes = maxTrailerBytes
    }

    /// Decodes from `offset` up to the end of `buffer` until one event happens. `consumed`
    /// counts bytes from `offset`; a `.data` range lies inside the consumed bytes. After `.end`
    /// the bytes past the consumed ones belong to the next message.
    public mutating func decode(_ buffer: UnsafeRawBufferPointer, from offset: Int) -> (event: ChunkedEvent, consumed: Int) {
        let end = buffer.count
        var p = offset
        while true {
            switch state {
            case .data:
                guard p < end else { return (.needMore, p - offset) }
                let n = min(remaining, end - p)
                remaining -= n
                if remaining == 0 { state = .dataCR }
                return (.data(ByteRange(start: p, count: n)), p + n - offset)
            case .done:
                return (.end, p - offset)
            case .failed:
                return (.error(failure ?? HTTPParseError(status: 400, reason: "invalid chunked body")), p - offset)
            default:
                break
            }
            guard p < end else { return (.needMore, p - offset) }
            let b = buffer[p]
            p += 1
            if let reason = step(b) {
                let error = HTTPParseError(status: 400, reason: reason)
                failure = error
                state = .failed
                return (.error(error), p - offset)
            }
            if state == .done { return (.end, p - offset) }
        }
    }

    /// Advances the state machine by one byte outside chunk data; returns a reason on error.
    @inline(__always)
    private mutating func step(_ b: UInt8) -> String? {
        let cr: UInt8 = 0x0D, lf: UInt8 = 0x0A
        switch state {
        case .size, .sizeWhitespace, .extensionBeforeName, .extensionName, .extensionAfterName,
             .extensionBeforeValue, .extensionToken, .extensionQuoted, .extensionQuotedPair,
             .extensionAfterQuote, .extensionAfterValueWhitespace, .sizeLF:
            lineBytes += 1
            if lineBytes > Self.maxChunkLineBytes { return "chunk size line too long" }
        case .trailerLineStart, .trailerName, .trailerValue, .trailerValueLF, .endLF:
            trailerBytes += 1
            if trailerBytes > maxTrailerBytes { return "trailer section too large" }
        default:
            break
        }

        switch state {
        case .size:
            // chunk-size = 1*HEXDIG: no sign, no "0x", no leading whitespace.
            if let digit = ByteMatching.hexValue(b) {
                guard sizeDigits < Self.maxSizeDigits else { return "chunk size too long" }
                let (shifted, o1) = remaining.multipliedReportingOverflow(by: 16)
                let (sum, o2) = shifted.addingReportingOverflow(Int(digit))
                guard !o1, !o2 else { return "chunk size too large" }
                remaining = sum
                sizeDigits += 1
                return nil
            }
            guard sizeDigits > 0 else { return "invalid character in chunk size" }
            switch b {
            case UInt8(ascii: ";"): state = .extensionBeforeName
            case UInt8(ascii: " "), 0x09: state = .sizeWhitespace
            case cr: state = .sizeLF
            default: return "invalid character in chunk size"
            }
        case .sizeWhitespace:
            // chunk-ext = *( BWS ";" BWS name [ BWS "=" BWS value ] ): BWS must lead to ";".
            if ByteMatching.isWhitespace(b) { return nil }
            guard b == UInt8(ascii: ";") else { return "invalid character in chunk size" }
            state = .extensionBeforeName
        case .extensionBeforeName:
            if ByteMatching.isWhitespace(b) { return nil }
            guard ByteMatching.isTokenChar(b) else { return "invalid chunk extension name" }
            state = .extensionName
        case .extensionName:
            if ByteMatching.isTokenChar(b) { return nil }
            switch b {
            case UInt8(ascii: "="): state = .extensionBeforeValue
            case UInt8(ascii: ";"): state = .extensionBeforeName
            case UInt8(ascii: " "), 0x09: state = .extensionAfterName
            case cr: state = .sizeLF
            default: return "invalid character in chunk extension"
            }
        case .extensionAfterName:
            if ByteMatching.isWhitespace(b) { return nil }
            switch b {
            case UInt8(ascii: "="): state = .extensionBeforeValue
            case UInt8(ascii: ";"): state = .extensionBeforeName
            default: return "invalid character in chunk extension"
            }
        case .extensionBeforeValue:
            if ByteMatching.isWhitespace(b) { return nil }
            if b == UInt8(ascii: "\"") {
                state = .extensionQuoted
            } else if ByteMatching.isTokenChar(b) {
                state = .extensionToken
            } else {
                return "invalid chunk extension value"
            }
        case .extensionToken:
            if ByteMatching.isTokenChar(b) { return nil }
            switch b {
            case UInt8(ascii: ";"): state = .extensionBeforeName
            case UInt8(ascii: " "), 0x09: state = .extensionAfterValueWhitespace
            case cr: state = .sizeLF
            default: return "invalid character in chunk extension"
            }
        case .extensionQuoted:
            // qdtext = HTAB / SP / %x21 / %x23-5B / %x5D-7E / obs-text (RFC 9110 §5.6.4)
            if b == UInt8(ascii: "\"") {
                state = .extensionAfterQuote
            } else if b == UInt8(ascii: "\\") {
                state = .extensionQuotedPair
            } else if !ByteMatching.isFieldValueChar(b) {
                return "invalid character in chunk extension quoted value"
            }
        case .extensionQuotedPair:
            guard ByteMatching.isFieldValueChar(b) else { return "invalid character in chunk extension quoted value" }
            state = .extensionQuoted
        case .extensionAfterQuote:
            switch b {
            case UInt8(ascii: ";"): state = .extensionBeforeName
            case UInt8(ascii: " "), 0x09: state = .extensionAfterValueWhitespace
            case cr: state = .sizeLF
            default: return "invalid character in chunk extension"
            }
        case .extensionAfterValueWhitespace:
            if ByteMatching.isWhitespace(b) { return nil }
            guard b == UInt8(ascii: ";") else { return "invalid character in chunk extension" }
            state = .extensionBeforeName
        case .sizeLF:
            guard b == lf else { return "CR not followed by LF after chunk size" }
            lineBytes = 0
            sizeDigits = 0
            state = remaining == 0 ? .trailerLineStart : .data
        case .dataCR:
            guard b == cr else { return "chunk data not followed by CRLF" }
            state = .dataLF
        case .dataLF:
            guard b == lf else { return "chunk data not followed by CRLF" }
            state = .size
        case .trailerLineStart:
            if b == cr {
                state = .endLF
            } else if ByteMatching.isTokenChar(b) {
                state = .trailerName
            } else if ByteMatching.isWhitespace(b) {
                // RFC 9112 §5.2: obs-fold is refused in trailers as in heads.
                return "line folding in trailer section"
            } else {
                return "invalid character in trailer field name"
            }
        case .trailerName:
            if ByteMatching.isTokenChar(b) { return nil }
            guard b == UInt8(ascii: ":") else {
                return ByteMatching.isWhitespace(b) ? "whitespace between field name and colon" : "invalid character in trailer field name"
            }
            state = .trailerValue
        case .trailerValue:
            if b == cr {
                state = .trailerValueLF
            } else if !ByteMatching.isFieldValueChar(b) {
                return "invalid character in trailer field value"
            }
        case .trailerValueLF:
            guard b == lf else { return "CR not followed by LF in trailer section" }
            state = .trailerLineStart
        case .endLF:
            guard b == lf else { return "CR not followed by LF after trailer section" }
            state = .done
        case .data, .done, .failed:
            break
        }
        return nil
    }
}
