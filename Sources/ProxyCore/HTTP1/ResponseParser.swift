// Strict HTTP/1.1 response-head parser for upstream responses (RFC 9112 §4–§6). Same grammar
// and strictness as RequestParser; every refusal is a 502 for the client, since the fault is
// the upstream's. Stateless: call again after every read.

public struct ResponseParser: Sendable {
    public var limits: HTTPLimits

    public init(limits: HTTPLimits = HTTPLimits()) { self.limits = limits }

    /// Parses the response head at the start of `buffer` for a request made with `requestMethod`
    /// (which decides whether a body follows). 1xx heads, 101 included, are returned as complete
    /// heads with framing `.none`; the engine reads the final response after them.
    ///
    /// `Content-Length: 0` is reported as `.none`: `.contentLength(n)` always has n > 0.
    public func parseHead(_ buffer: UnsafeRawBufferPointer, requestMethod: HTTPMethod,
                          into head: inout ResponseHead) -> HeadParseResult {
        Self.reset(&head)
        do throws(HeadStop) {
            return .complete(headLength: try parse(buffer, requestMethod: requestMethod, into: &head))
        } catch {
            switch error {
            case .needMore:
                return buffer.count > limits.maxHeadBytes ? .error(Self.fail("response head too large")) : .incomplete
            case .failed(let e):
                return .error(e)
            }
        }
    }

    @inline(__always)
    static func fail(_ reason: String) -> HTTPParseError {
        HTTPParseError(status: 502, reason: reason)
    }

    static func reset(_ head: inout ResponseHead) {
        head.version = .http11
        head.status = 0
        head.reason = .empty
        head.headers.removeAll(keepingCapacity: true)
        if head.headers.capacity == 0 { head.headers.reserveCapacity(16) }
        head.framing = .none
        head.keepAlive = true
        head.connectionTokens.removeAll(keepingCapacity: true)
    }

    private func parse(_ buffer: UnsafeRawBufferPointer, requestMethod: HTTPMethod,
                       into head: inout ResponseHead) throws(HeadStop) -> Int {
        let end = min(buffer.count, limits.maxHeadBytes)
        var p = try ByteMatching.skipLeadingEmptyLines(buffer, end: end, status: 502)
        p = try statusLine(buffer, from: p, end: end, into: &head)
        var fields = FramingFields()
        while true {
            if p < end, ByteMatching.isTokenChar(buffer[p]), head.headers.count >= limits.maxHeaderCount {
                throw .failed(Self.fail("too many header fields"))
            }
            switch ByteMatching.scanFieldLine(buffer, from: p, end: end) {
            case .needMore:
                throw .needMore
            case .invalid(let reason):
                throw .failed(Self.fail(reason))
            case .endOfHead(let next):
                Self.decideFraming(&head, fields, requestMethod: requestMethod)
                return next
            case .field(let field, let next):
                head.headers.append(field)
                try Self.apply(field, buffer, &head, &fields)
                p = next
            }
        }
    }

    /// status-line = HTTP-version SP status-code SP [ reason-phrase ] CRLF (RFC 9112 §4).
    /// Only HTTP/1.1 and HTTP/1.0 are accepted; the status must be 100–599 (RFC 9110 §15).
    /// A missing SP before an empty reason is tolerated: common, and harmless to framing.
    private func statusLine(_ buffer: UnsafeRawBufferPointer, from start: Int, end: Int,
                            into head: inout ResponseHead) throws(HeadStop) -> Int {
        var p = start
        let prefix = ("HTTP/1." as StaticString).utf8Start
        for i in 0..<7 {
            guard p < end else { throw .needMore }
            guard buffer[p] == prefix[i] else { throw .failed(Self.fail("malformed or unsupported HTTP version")) }
            p += 1
        }
        guard p < end else { throw .needMore }
        switch buffer[p] {
        case UInt8(ascii: "1"): head.version = .http11
        case UInt8(ascii: "0"): head.version = .http10
        default: throw .failed(Self.fail("malformed or unsupported HTTP version"))
        }
        p += 1
        guard p < end else { throw .needMore }
        guard buffer[p] == UInt8(ascii: " ") else { throw .failed(Self.fail("malformed status line")) }
        p += 1

        var status = 0
        for i in 0..<3 {
            guard p < end else { throw .needMore }
            let b = buffer[p]
            let digit = Int(b &- UInt8(ascii: "0"))
            guard ByteMatching.isDigit(b), i > 0 || (1...5).contains(digit) else {
                throw .failed(Self.fail("invalid status code"))
            }
            status = status * 10 + digit
            p += 1
        }
        head.status = status

        guard p < end else { throw .needMore }
        if buffer[p] == UInt8(ascii: " ") {
            p += 1
            let reasonStart = p
            while true {
                guard p < end else { throw .needMore }
                let b = buffer[p]
                if b == 0x0D { break }
                // reason-phrase = 1*( HTAB / SP / VCHAR / obs-text )
                guard ByteMatching.isFieldValueChar(b) else { throw .failed(Self.fail("invalid character in reason phrase")) }
                p += 1
            }
            head.reason = ByteRange(start: reasonStart, count: p - reasonStart)
        } else if buffer[p] != 0x0D {
            throw .failed(Self.fail("invalid status code"))
        }
        guard p + 1 < end else { throw .needMore }
        guard buffer[p + 1] == 0x0A else { throw .failed(Self.fail("CR not followed by LF")) }
        return p + 2
    }

    private static func apply(_ field: HeaderField, _ buffer: UnsafeRawBufferPointer,
                              _ head: inout ResponseHead, _ fields: inout FramingFields) throws(HeadStop) {
        let name = field.name
        let value = field.value
        switch name.count {
        case 7 where ByteMatching.equalsLowercase(buffer, name, "upgrade"):
            fields.hasUpgradeField = true
        case 10 where ByteMatching.equalsLowercase(buffer, name, "connection"):
            if let reason = fields.addConnection(buffer, value, tokens: &head.connectionTokens) { throw .failed(fail(reason)) }
        case 14 where ByteMatching.equalsLowercase(buffer, name, "content-length"):
            if let reason = fields.addContentLength(buffer, value) { throw .failed(fail(reason)) }
            if fields.hasTransferEncoding { throw .failed(fail("both Content-Length and Transfer-Encoding")) }
        case 17 where ByteMatching.equalsLowercase(buffer, name, "transfer-encoding"):
            // RFC 9112 §6.1: Transfer-Encoding in an HTTP/1.0 message means faulty framing.
            guard head.version == .http11 else { throw .failed(fail("Transfer-Encoding in an HTTP/1.0 response")) }
            if let reason = fields.addTransferEncoding(buffer, value) { throw .failed(fail(reason)) }
            if fields.contentLength != nil { throw .failed(fail("both Content-Length and Transfer-Encoding")) }
            // RFC 9112 §7: chunked must not be applied more than once.
            if fields.chunkedCount > 1 { throw .failed(fail("chunked applied more than once")) }
        default:
            break
        }
    }

    /// RFC 9112 §6.3, in order: no body after HEAD, 1xx, 204, 304 or a 2xx to CONNECT; then
    /// Transfer-Encoding (chunked last, else the body runs to close); then Content-Length;
    /// else the body runs until the upstream closes.
    static func decideFraming(_ head: inout ResponseHead, _ fields: FramingFields, requestMethod: HTTPMethod) {
        let status = head.status
        head.keepAlive = !fields.close && (head.version == .http11 || fields.keepAlive)
        if requestMethod == .head || status < 200 || status == 204 || status == 304
            || (requestMethod == .connect && status < 300) {
            head.framing = .none
        } else if fields.hasTransferEncoding {
            if fields.lastCodingIsChunked {
                head.framing = .chunked
            } else {
                head.framing = .untilClose
                head.keepAlive = false
            }
        } else if let length = fields.contentLength {
            head.framing = length > 0 ? .contentLength(length) : .none
        } else {
            head.framing = .untilClose
            head.keepAlive = false
        }
    }
}
