import Testing
@testable import ProxyCore

/// RFC 9114 §4.2–4.3 on requests as a QPACK encoder writes them: every rule breaks the request
/// (H3_MESSAGE_ERROR), and a well-formed one becomes the HTTP/1.1 head `RequestParser` reads —
/// the same as an HTTP/2 request with the same fields.
@Suite struct HTTP3RequestHeadTests {
    static let limit = 36 * 1024
    static let get = [(":method", "GET"), (":scheme", "https"), (":authority", "example.com"), (":path", "/a?b=1")]

    /// The request's fields through QPACK; its verdict and the head it delivered.
    func request(_ fields: [(String, String)], endStream: Bool = true) -> (HTTP3RequestHead, String) {
        var request = HTTP3RequestHead()
        let decoded = QPACKFixture.decode(QPACKFixture.encode(fields)) { n, v in request.field(name: n, value: v, limit: Self.limit) }
        #expect(decoded)
        var input = ByteBuffer()
        defer { input.free() }
        request.deliverHead(into: &input, endStream: endStream)
        return (request, String(decoding: input.readableBytes, as: UTF8.self))
    }

    @Test func aWellFormedRequestBecomesTheHeadTheParserReads() {
        let (r, head) = request(Self.get + [("accept", "text/html"), ("cookie", "a=1"), ("cookie", "b=2")])
        #expect(r.malformed == nil && r.refusal == nil)
        #expect(head == "GET /a?b=1 HTTP/1.1\r\nHost: example.com\r\naccept: text/html\r\nCookie: a=1; b=2\r\n\r\n")
        var parsed = RequestHead()
        let bytes = Array(head.utf8)
        let result = bytes.withUnsafeBytes { RequestParser().parseHead($0, into: &parsed) }
        guard case .complete(let length) = result else { Issue.record("not parsed: \(result)"); return }
        #expect(length == bytes.count && parsed.method == .get)
    }

    @Test func aBodyWithoutContentLengthIsChunkedAsOverHTTP2() {
        let (r, head) = request([(":method", "POST"), (":scheme", "https"), (":authority", "x"), (":path", "/p")], endStream: false)
        #expect(r.malformed == nil && head.hasSuffix("Transfer-Encoding: chunked\r\n\r\n"))
    }

    @Test(arguments: [
        // §4.2: names are lowercase; connection-specific fields mean nothing in HTTP/3.
        ([("Accept", "x")], "uppercase field name"),
        ([("connection", "close")], "connection-specific field connection"),
        ([("keep-alive", "5")], "connection-specific field keep-alive"),
        ([("proxy-connection", "x")], "connection-specific field proxy-connection"),
        ([("transfer-encoding", "chunked")], "connection-specific field transfer-encoding"),
        ([("upgrade", "websocket")], "connection-specific field upgrade"),
        ([("te", "gzip")], "te other than trailers"),
        ([("bad name", "x")], "invalid character in a field name"),
        ([("x", "a\r\nInjected: 1")], "invalid character in a field value"),
        ([("x", "a\u{0}b")], "invalid character in a field value"),
        ([("x", " padded")], "whitespace at the start of a field value"),
        ([("x", "padded\t")], "whitespace at the end of a field value"),
        ([("content-length", "5"), ("content-length", "6")], "content-length values differ"),
        ([("host", "a"), ("host", "a")], "host twice"),
        // §4.3: pseudo-headers first, once, only the request's four.
        ([(":path", "/again")], ":path twice"),
        ([(":status", "200")], "unknown pseudo-header field :status"),
        ([(":protocol", "websocket")], "unknown pseudo-header field :protocol"),
        ([(":x", "1")], "unknown pseudo-header field :x"),
    ] as [([(String, String)], String)])
    func aBrokenRuleMakesTheRequestMalformed(_ extra: [(String, String)], _ reason: String) {
        // Pseudo-header fields stay ahead of the regular ones, so only the rule named breaks.
        let pseudo = extra.filter { $0.0.hasPrefix(":") }, regular = extra.filter { !$0.0.hasPrefix(":") }
        let (r, head) = request(Self.get + pseudo + regular)
        #expect(r.malformed?.reason == reason)
        #expect(head.isEmpty)
    }

    @Test(arguments: [
        ([(":method", "GET"), (":scheme", "https"), ("accept", "x"), (":path", "/")], "pseudo-header field after a regular field"),
        ([(":scheme", "https"), (":authority", "a"), (":path", "/")], "no :method"),
        ([(":method", "GET"), (":authority", "a"), (":path", "/")], "no :scheme"),
        ([(":method", "GET"), (":scheme", "https"), (":authority", "a")], "no :path"),
        ([(":method", "GET"), (":scheme", "https"), (":authority", "a"), (":path", "")], "no :path"),
        ([(":method", "GET"), (":scheme", "https"), (":authority", "a"), (":path", "*")], "invalid :path"),
        ([(":method", "GET"), (":scheme", "https"), (":authority", "a"), (":path", "a/b")], "invalid :path"),
        ([(":method", "GET"), (":scheme", "https"), (":path", "/")], "no :authority or host"),
        ([(":method", "G T"), (":scheme", "https"), (":authority", "a"), (":path", "/")], "invalid :method"),
        ([(":method", "CONNECT"), (":authority", "a:443"), (":path", "/")], "CONNECT with :scheme or :path"),
        ([(":method", "CONNECT")], "CONNECT without :authority"),
        ([(":method", "GET"), (":scheme", "https"), (":authority", ""), (":path", "/"), ("host", "x")], "empty :authority"),
        ([(":method", "GET"), (":scheme", "https"), (":path", "/"), ("host", "")], "empty host"),
    ] as [([(String, String)], String)])
    func theRequestsPseudoHeadersAreChecked(_ fields: [(String, String)], _ reason: String) {
        #expect(request(fields).0.malformed?.reason == reason)
    }

    @Test func optionsAsteriskAndAHostInsteadOfAuthorityAreWellFormed() {
        let (o, head) = request([(":method", "OPTIONS"), (":scheme", "https"), (":authority", "a"), (":path", "*")])
        #expect(o.malformed == nil && head.hasPrefix("OPTIONS * HTTP/1.1\r\n"))
        let (h, head2) = request([(":method", "GET"), (":scheme", "https"), (":path", "/"), ("host", "b.example")])
        #expect(h.malformed == nil && head2.hasPrefix("GET / HTTP/1.1\r\nHost: b.example\r\n"))
        // A CONNECT with its authority only is well-formed: the engine refuses the method itself.
        #expect(request([(":method", "CONNECT"), (":authority", "a:443")]).0.malformed == nil)
    }

    @Test func authorityAndHostThatDifferAreRefusedAsOverHTTP2() {
        let (r, head) = request(Self.get + [("host", "other.example")])
        #expect(r.malformed == nil && r.refusal?.status == 400 && head.isEmpty)
        #expect(request(Self.get + [("host", "EXAMPLE.com")]).0.refusal == nil)
    }

    @Test func aFieldSectionPastTheLimitIsRefusedWith431() {
        let (r, _) = request(Self.get + [("x-big", String(repeating: "a", count: Self.limit))])
        #expect(r.refusal?.status == 431)
    }

    @Test func trailersAreCheckedNotForwarded() {
        var request = HTTP3RequestHead()
        QPACKFixture.decode(QPACKFixture.encode(Self.get)) { n, v in request.field(name: n, value: v, limit: Self.limit) }
        var input = ByteBuffer()
        defer { input.free() }
        request.deliverHead(into: &input, endStream: false)
        let before = input.readable
        QPACKFixture.decode(QPACKFixture.encode([("x-checksum", "abc")])) { n, v in request.field(name: n, value: v, limit: Self.limit) }
        #expect(request.malformed == nil && input.readable == before)
        QPACKFixture.decode(QPACKFixture.encode([(":path", "/smuggled")])) { n, v in request.field(name: n, value: v, limit: Self.limit) }
        #expect(request.malformed?.reason == "pseudo-header field in trailers")
        var other = HTTP3RequestHead()
        QPACKFixture.decode(QPACKFixture.encode(Self.get)) { n, v in other.field(name: n, value: v, limit: Self.limit) }
        other.deliverHead(into: &input, endStream: false)
        QPACKFixture.decode(QPACKFixture.encode([("transfer-encoding", "chunked")])) { n, v in other.field(name: n, value: v, limit: Self.limit) }
        #expect(other.malformed?.reason == "connection-specific field transfer-encoding")
    }

    @Test func qpackThatDoesNotDecodeIsCaughtByTheDecoder() {
        // A prefix naming a dynamic table entry that a capacity-0 table cannot have.
        #expect(!QPACKFixture.decode([0x02, 0x00, 0x80]) { _, _ in })
    }
}
