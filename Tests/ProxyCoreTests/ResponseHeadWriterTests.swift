import Testing
@testable import ProxyCore

/// One response head, two downstreams: HTTP/1.1 text and HTTP/2 HEADERS fields, written from the
/// same calls, and the HTTP/2 fields are the HTTP/1.1 ones less what RFC 9113 §8.2.2 forbids.
@Suite struct ResponseHeadWriterTests {
    /// A head as the exchange writes one: status, fields, framing.
    func write<W: ResponseHeadWriter>(_ w: inout W, status: Int = 200, reason: String = "", fields: [(String, String)],
                                      contentLength: UInt64? = nil, chunked: Bool = false,
                                      connection: Exchange.ConnectionField = .keepAlive) {
        Array(reason.utf8).withUnsafeBytes { w.begin(status: status, reason: $0) }
        for (name, value) in fields { w.field(name, value) }
        w.end(contentLength: contentLength, chunked: chunked, connection: connection)
    }

    func http1(http10: Bool = false, _ body: (inout HTTP1HeadWriter) -> Void) -> String {
        var w = HTTP1HeadWriter(into: ByteBuffer(), http10: http10)
        body(&w)
        var out = w.out
        defer { out.free() }
        return String(decoding: out.readableBytes, as: UTF8.self)
    }

    func http2(_ body: (inout StreamHeadWriter) -> Void) -> (StreamHeadWriter, [String]) {
        var w = StreamHeadWriter()
        body(&w)
        let fields = w.withNameValues { nva, count in
            (0..<count).map { i in
                String(decoding: UnsafeBufferPointer(start: nva[i].name, count: nva[i].namelen), as: UTF8.self) + ": "
                    + String(decoding: UnsafeBufferPointer(start: nva[i].value, count: nva[i].valuelen), as: UTF8.self)
            }
        }
        return (w, fields)
    }

    static let fields = [("Content-Type", "text/html"), ("Set-Cookie", "a=1"), ("Connection", "x-private"),
                         ("Keep-Alive", "timeout=5"), ("Transfer-Encoding", "chunked"), ("Upgrade", "h2c"),
                         ("Proxy-Connection", "keep-alive"), ("Set-Cookie", "b=2"), ("ETag", "\"v1\"")]

    @Test func http11WritesTheStatusLineFieldsAndFramingAsText() {
        let text = http1 { write(&$0, reason: "Fine", fields: [("Content-Type", "text/plain"), ("X-A", "1")], contentLength: 12) }
        #expect(text == "HTTP/1.1 200 Fine\r\nContent-Type: text/plain\r\nX-A: 1\r\nContent-Length: 12\r\n\r\n")
        var parsed = ResponseHead()
        let result = Array(text.utf8).withUnsafeBytes { ResponseParser().parseHead($0, requestMethod: .get, into: &parsed) }
        #expect(result == .complete(headLength: text.utf8.count))
        #expect(parsed.framing == .contentLength(12))
    }

    @Test func http11SaysChunkedCloseUpgradeAndHTTP10KeepAliveInFields() {
        #expect(http1 { write(&$0, status: 404, fields: [], chunked: true, connection: .close) }
                == "HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n")
        #expect(http1 { write(&$0, status: 101, fields: [("Upgrade", "websocket")], connection: .upgrade) }
                == "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\n")
        #expect(http1(http10: true) { write(&$0, fields: [], contentLength: 0) }
                == "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: keep-alive\r\n\r\n")
        #expect(http1 { write(&$0, fields: [], contentLength: 0) } == "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
    }

    @Test func http2HasStatusFirstLowercaseNamesNoConnectionFieldsAndContentLengthLast() {
        let (head, fields) = http2 { write(&$0, reason: "Fine", fields: Self.fields, contentLength: 5, connection: .close) }
        #expect(fields == [":status: 200", "content-type: text/html", "set-cookie: a=1", "set-cookie: b=2",
                           "etag: \"v1\"", "content-length: 5"])
        #expect(head.isFinal && head.status == 200)
        #expect(head.byteCount == fields.joined().utf8.count - 2 * fields.count)  // less the ": "s
    }

    @Test func an1xxHeadIsNotFinalAndEveryStatusIsThreeDigits() {
        let (early, fields) = http2 { write(&$0, status: 103, fields: [("Link", "</a.css>; rel=preload")]) }
        #expect(!early.isFinal)
        #expect(fields == [":status: 103", "link: </a.css>; rel=preload"])
        for status in [100, 204, 304, 418, 599] {
            #expect(http2 { write(&$0, status: status, fields: []) }.1 == [":status: \(status)"])
        }
    }

    /// What the HTTP/2 path once got by parsing the HTTP/1.1 text: the same fields, in order.
    @Test func http2FieldsAreTheParsedHTTP11FieldsLessConnectionSpecificOnes() {
        // (Transfer-Encoding beside Content-Length is a parse error; the exchange never passes the upstream's.)
        let passed = Self.fields.filter { $0.0 != "Transfer-Encoding" } + [("Location", "/x")]
        let text = http1 { write(&$0, status: 302, fields: passed, contentLength: 0) }
        var parsed = ResponseHead()
        let bytes = Array(text.utf8)
        let result = bytes.withUnsafeBytes { ResponseParser().parseHead($0, requestMethod: .get, into: &parsed) }
        #expect(result == .complete(headLength: bytes.count))
        let dropped: Set<String> = ["connection", "keep-alive", "transfer-encoding", "upgrade", "proxy-connection"]
        let fromText = parsed.headers.compactMap { f -> String? in
            let name = String(decoding: bytes[f.name.start..<f.name.end], as: UTF8.self).lowercased()
            return dropped.contains(name) ? nil : name + ": " + String(decoding: bytes[f.value.start..<f.value.end], as: UTF8.self)
        }
        let fromFields = http2 { write(&$0, status: 302, fields: passed, contentLength: 0) }.1
        #expect(fromFields == [":status: 302"] + fromText)
    }
}
