// Strict HTTP/1.1 request-head parser (RFC 9112 §2–§7, RFC 9110). Stateless: each call parses
// from the start of the buffer, so the engine can call again after every read; every error is
// reported as soon as the bytes read so far prove it, without waiting for the end of the head.
// Anything ambiguous is refused rather than guessed at, because a proxy that reads a message
// differently from its upstream enables request smuggling.

public struct RequestParser: Sendable {
    public var limits: HTTPLimits

    public init(limits: HTTPLimits = HTTPLimits()) { self.limits = limits }

    /// Parses the request head at the start of `buffer`, which may hold more bytes after it
    /// (body, pipelined requests). `head` is reset first and keeps its arrays' capacity.
    ///
    /// A body of `Content-Length: 0` is reported as `.none`: `.contentLength(n)` always has n > 0.
    /// Each call rescans from the start (about 0.3 µs for a 450-byte head in release builds), so
    /// a client trickling a byte per read costs a rescan per read, bounded by `maxHeadBytes`.
    public func parseHead(_ buffer: UnsafeRawBufferPointer, into head: inout RequestHead) -> HeadParseResult {
        Self.reset(&head)
        do throws(HeadStop) {
            return .complete(headLength: try parse(buffer, into: &head))
        } catch {
            switch error {
            case .needMore:
                // Out of bytes: read more, unless the limit is what cut the scan short.
                return buffer.count > limits.maxHeadBytes ? .error(Self.fail(431, "request head too large")) : .incomplete
            case .failed(let e):
                return .error(e)
            }
        }
    }

    @inline(__always)
    static func fail(_ status: Int, _ reason: String) -> HTTPParseError {
        HTTPParseError(status: status, reason: reason)
    }

    static func reset(_ head: inout RequestHead) {
        head.method = .get
        head.methodRange = .empty
        head.target = .empty
        head.path = .empty
        head.pathOnly = .empty
        head.canonicalPath.removeAll(keepingCapacity: true)
        head.pathTraits = []
        head.authority = nil
        head.version = .http11
        head.headers.removeAll(keepingCapacity: true)
        if head.headers.capacity == 0 { head.headers.reserveCapacity(16) }
        head.framing = .none
        head.keepAlive = true
        head.expectContinue = false
        head.upgrade = false
        head.hostIndex = nil
        head.connectionTokens.removeAll(keepingCapacity: true)
    }

    /// Request-local facts that only matter once the whole head is read.
    struct Pending {
        var fields = FramingFields()
        var expectsContinue = false
        var unsupportedExpectation = false
    }

    private func parse(_ buffer: UnsafeRawBufferPointer, into head: inout RequestHead) throws(HeadStop) -> Int {
        let end = min(buffer.count, limits.maxHeadBytes)
        var p = try ByteMatching.skipLeadingEmptyLines(buffer, end: end, status: 400)
        p = try requestLine(buffer, from: p, end: end, into: &head)
        var pending = Pending()
        while true {
            // The field that would exceed the count is refused as soon as its line starts.
            if p < end, ByteMatching.isTokenChar(buffer[p]), head.headers.count >= limits.maxHeaderCount {
                throw .failed(Self.fail(431, "too many header fields"))
            }
            switch ByteMatching.scanFieldLine(buffer, from: p, end: end) {
            case .needMore:
                throw .needMore
            case .invalid(let reason):
                throw .failed(Self.fail(400, reason))
            case .endOfHead(let next):
                try finish(&head, &pending)
                return next
            case .field(let field, let next):
                head.headers.append(field)
                try apply(field, at: head.headers.count - 1, buffer, &head, &pending)
                p = next
            }
        }
    }

    // MARK: Request line

    /// request-line = method SP request-target SP HTTP-version CRLF (RFC 9112 §3), with
    /// exactly one SP between the parts. Any byte at or beyond `maxRequestLine` that is not the
    /// line's CR proves the line too long (414), even before the CR arrives.
    private func requestLine(_ buffer: UnsafeRawBufferPointer, from start: Int, end: Int,
                             into head: inout RequestHead) throws(HeadStop) -> Int {
        let maxLine = limits.maxRequestLine
        var p = start

        while true {
            guard p < end else { throw .needMore }
            let b = buffer[p]
            if p - start >= maxLine && b != 0x0D { throw .failed(Self.fail(414, "request line too long")) }
            if b == UInt8(ascii: " ") { break }
            // RFC 9110 §9.1: method = token.
            guard ByteMatching.isTokenChar(b) else { throw .failed(Self.fail(400, "invalid character in method")) }
            p += 1
        }
        guard p > start else { throw .failed(Self.fail(400, "empty method")) }
        head.methodRange = ByteRange(start: start, count: p - start)
        head.method = Self.knownMethod(buffer, head.methodRange)
        p += 1

        let targetStart = p
        // Bytes past the line limit are looked at one by one, for the 414 check.
        let plainEnd = maxLine < end - start ? start + maxLine : end
        while true {
            p = ByteMatching.firstNonTargetByte(buffer, from: p, end: plainEnd)
            guard p < end else { throw .needMore }
            let b = buffer[p]
            if p - start >= maxLine && b != 0x0D { throw .failed(Self.fail(414, "request line too long")) }
            if b == UInt8(ascii: " ") { break }
            if b > 0x20 && b < 0x7F {
                // RFC 9112 §3.2: the target never carries a fragment.
                if b == UInt8(ascii: "#") { throw .failed(Self.fail(400, "fragment in request target")) }
                p += 1
                continue
            }
            if b == 0x0D && p > targetStart {
                // `GET /` CRLF is an HTTP/0.9 simple request: understood, not supported.
                guard p + 1 < end else { throw .needMore }
                guard buffer[p + 1] == 0x0A else { throw .failed(Self.fail(400, "CR not followed by LF")) }
                throw .failed(Self.fail(505, "HTTP/0.9 is not supported"))
            }
            throw .failed(Self.fail(400, "invalid character in request target"))
        }
        guard p > targetStart else { throw .failed(Self.fail(400, "empty request target")) }
        head.target = ByteRange(start: targetStart, count: p - targetStart)
        try Self.classifyTarget(buffer, &head)
        p += 1

        // RFC 9112 §2.3: HTTP-version = "HTTP/" DIGIT "." DIGIT, case-sensitive.
        let versionStart = p
        let prefix = ("HTTP/" as StaticString).utf8Start
        for i in 0..<8 {
            guard p < end else { throw .needMore }
            let b = buffer[p]
            if p - start >= maxLine && b != 0x0D { throw .failed(Self.fail(414, "request line too long")) }
            let valid: Bool
            switch i {
            case 0..<5: valid = b == prefix[i]
            case 6: valid = b == UInt8(ascii: ".")
            default: valid = ByteMatching.isDigit(b)
            }
            guard valid else { throw .failed(Self.fail(400, "malformed HTTP version")) }
            p += 1
        }
        guard p < end else { throw .needMore }
        if p - start >= maxLine && buffer[p] != 0x0D { throw .failed(Self.fail(414, "request line too long")) }
        guard buffer[p] == 0x0D else { throw .failed(Self.fail(400, "malformed HTTP version")) }
        guard p + 1 < end else { throw .needMore }
        guard buffer[p + 1] == 0x0A else { throw .failed(Self.fail(400, "CR not followed by LF")) }

        switch (buffer[versionStart + 5], buffer[versionStart + 7]) {
        case (UInt8(ascii: "1"), UInt8(ascii: "1")): head.version = .http11
        case (UInt8(ascii: "1"), UInt8(ascii: "0")): head.version = .http10
        default: throw .failed(Self.fail(505, "HTTP version not supported"))
        }
        return p + 2
    }

    static func knownMethod(_ buffer: UnsafeRawBufferPointer, _ range: ByteRange) -> HTTPMethod {
        switch range.count {
        case 3:
            if ByteMatching.equals(buffer, range, "GET") { return .get }
            if ByteMatching.equals(buffer, range, "PUT") { return .put }
        case 4:
            if ByteMatching.equals(buffer, range, "POST") { return .post }
            if ByteMatching.equals(buffer, range, "HEAD") { return .head }
        case 5:
            if ByteMatching.equals(buffer, range, "PATCH") { return .patch }
            if ByteMatching.equals(buffer, range, "TRACE") { return .trace }
        case 6:
            if ByteMatching.equals(buffer, range, "DELETE") { return .delete }
        case 7:
            if ByteMatching.equals(buffer, range, "OPTIONS") { return .options }
            if ByteMatching.equals(buffer, range, "CONNECT") { return .connect }
        default:
            break
        }
        return .other
    }

    /// RFC 9112 §3.2: origin-form for every method but CONNECT, which takes authority-form and
    /// nothing else; asterisk-form only for OPTIONS; absolute-form only with an http or https
    /// scheme and a non-empty authority.
    static func classifyTarget(_ buffer: UnsafeRawBufferPointer, _ head: inout RequestHead) throws(HeadStop) {
        let target = head.target
        let first = buffer[target.start]
        if head.method == .connect {
            guard ByteMatching.isAuthority(buffer, target, requirePort: true) else {
                throw .failed(fail(400, "CONNECT needs a host:port target"))
            }
            head.path = target
            head.pathOnly = target
            return
        }
        if first == UInt8(ascii: "/") {
            head.path = target
            try canonicalizePath(buffer, &head)
            return
        }
        if first == UInt8(ascii: "*") {
            guard target.count == 1, head.method == .options else {
                throw .failed(fail(400, "asterisk-form is only for OPTIONS"))
            }
            head.path = target
            head.pathOnly = target
            return
        }
        let schemeLength: Int
        if ByteMatching.equalsLowercase(buffer, ByteRange(start: target.start, count: min(7, target.count)), "http://") {
            schemeLength = 7
        } else if ByteMatching.equalsLowercase(buffer, ByteRange(start: target.start, count: min(8, target.count)), "https://") {
            schemeLength = 8
        } else {
            throw .failed(fail(400, "invalid request target"))
        }
        var p = target.start + schemeLength
        let authorityStart = p
        while p < target.end && buffer[p] != UInt8(ascii: "/") && buffer[p] != UInt8(ascii: "?") { p += 1 }
        let authority = ByteRange(start: authorityStart, count: p - authorityStart)
        guard ByteMatching.isAuthority(buffer, authority, requirePort: false) else {
            throw .failed(fail(400, "invalid authority in request target"))
        }
        head.authority = authority
        head.path = ByteRange(start: p, count: target.end - p)
        try canonicalizePath(buffer, &head)
    }

    /// One request target, one meaning: the path every phase decides on and the one forwarded
    /// is the canonical one (`PathCanonicalizer`); spellings no server agrees on are refused here.
    static func canonicalizePath(_ buffer: UnsafeRawBufferPointer, _ head: inout RequestHead) throws(HeadStop) {
        let path = head.path
        var end = path.start
        while end < path.end && buffer[end] != UInt8(ascii: "?") { end += 1 }
        head.pathOnly = ByteRange(start: path.start, count: end - path.start)
        let bytes = UnsafeRawBufferPointer(rebasing: buffer[path.start..<end])
        switch PathCanonicalizer.canonicalize(bytes, into: &head.canonicalPath) {
        case .canonical(let traits):
            head.canonicalPath.removeAll(keepingCapacity: true)
            head.pathTraits = traits
        case .rewritten(let traits):
            head.pathTraits = traits
        case .refused(let reason):
            throw .failed(fail(400, reason))
        }
    }

    // MARK: Fields

    /// Applies the fields with request semantics. Errors that a single field proves are thrown
    /// here; those that need the whole head wait for `finish`.
    private func apply(_ field: HeaderField, at index: Int, _ buffer: UnsafeRawBufferPointer,
                       _ head: inout RequestHead, _ pending: inout Pending) throws(HeadStop) {
        let name = field.name
        let value = field.value
        switch name.count {
        case 4 where ByteMatching.equalsLowercase(buffer, name, "host"):
            // RFC 9112 §3.2: one Host field with a valid value; empty is allowed (RFC 9110 §7.2).
            guard head.hostIndex == nil else { throw .failed(Self.fail(400, "more than one Host field")) }
            guard value.count == 0 || ByteMatching.isAuthority(buffer, value, requirePort: false) else {
                throw .failed(Self.fail(400, "invalid Host"))
            }
            head.hostIndex = index
        case 6 where ByteMatching.equalsLowercase(buffer, name, "expect"):
            // RFC 9110 §10.1.1: 100-continue is the only expectation defined; an empty
            // list (§5.6.1) expects nothing.
            if ByteMatching.equalsLowercase(buffer, value, "100-continue") {
                pending.expectsContinue = true
            } else if value.count > 0 {
                pending.unsupportedExpectation = true
            }
        case 7 where ByteMatching.equalsLowercase(buffer, name, "upgrade"):
            pending.fields.hasUpgradeField = true
        case 10 where ByteMatching.equalsLowercase(buffer, name, "connection"):
            if let reason = pending.fields.addConnection(buffer, value, tokens: &head.connectionTokens) {
                throw .failed(Self.fail(400, reason))
            }
        case 14 where ByteMatching.equalsLowercase(buffer, name, "content-length"):
            if let reason = pending.fields.addContentLength(buffer, value) { throw .failed(Self.fail(400, reason)) }
            // RFC 9112 §6.3: a request with both is a smuggling attempt until proven otherwise.
            if pending.fields.hasTransferEncoding {
                throw .failed(Self.fail(400, "both Content-Length and Transfer-Encoding"))
            }
        case 17 where ByteMatching.equalsLowercase(buffer, name, "transfer-encoding"):
            // RFC 9112 §6.1: an HTTP/1.0 message with Transfer-Encoding has faulty framing.
            guard head.version == .http11 else { throw .failed(Self.fail(400, "Transfer-Encoding in an HTTP/1.0 request")) }
            if let reason = pending.fields.addTransferEncoding(buffer, value) { throw .failed(Self.fail(400, reason)) }
            if pending.fields.contentLength != nil {
                throw .failed(Self.fail(400, "both Content-Length and Transfer-Encoding"))
            }
            // RFC 9112 §6.1: chunked at most once, and last.
            if pending.fields.chunkedCount > 1 { throw .failed(Self.fail(400, "chunked applied more than once")) }
            if pending.fields.codingAfterChunked { throw .failed(Self.fail(400, "chunked is not the final coding")) }
        default:
            break
        }
    }

    private func finish(_ head: inout RequestHead, _ pending: inout Pending) throws(HeadStop) {
        let http11 = head.version == .http11
        // RFC 9112 §3.2: an HTTP/1.1 request without Host is refused.
        if http11 && head.hostIndex == nil { throw .failed(Self.fail(400, "missing Host")) }
        let fields = pending.fields
        if fields.hasTransferEncoding {
            // RFC 9112 §6.3: without chunked last the request body length cannot be known.
            guard fields.lastCodingIsChunked else { throw .failed(Self.fail(400, "chunked is not the final coding")) }
            // RFC 9112 §6.1: a coding the proxy does not implement.
            guard !fields.hasOtherCoding else { throw .failed(Self.fail(501, "unsupported transfer coding")) }
            head.framing = .chunked
        } else if let length = fields.contentLength, length > 0 {
            head.framing = .contentLength(length)
        }
        if pending.unsupportedExpectation { throw .failed(Self.fail(417, "unsupported expectation")) }
        // RFC 9112 §9.3: 1.1 persists unless closed; 1.0 only when keep-alive is asked for.
        head.keepAlive = !fields.close && (http11 || fields.keepAlive)
        // RFC 9110 §7.8 and §10.1.1: Upgrade and 100-continue are ignored in HTTP/1.0 requests.
        head.upgrade = http11 && fields.upgradeOption && fields.hasUpgradeField
        head.expectContinue = http11 && pending.expectsContinue
    }
}
