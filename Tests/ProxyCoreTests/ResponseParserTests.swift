import Testing
@testable import ProxyCore

/// Vectors marked "llhttp" are adapted from nodejs/llhttp's test/response/*.md (strict mode).
@Suite struct ResponseParserTests {
    // MARK: Accepted responses

    struct Accepted: Sendable, CustomTestStringConvertible {
        let name: String
        let bytes: [UInt8]
        var rest = 0
        var method: HTTPMethod = .get
        var version: HTTPVersion = .http11
        var status = 200
        var reason = "OK"
        var framing: BodyFraming = .untilClose
        var keepAlive = false
        var connectionTokens: [String] = []
        var fields: [String]? = nil
        var testDescription: String { name }

        init(_ name: String, _ head: String, rest: String = "", configure: (inout Accepted) -> Void = { _ in }) {
            self.name = name
            bytes = Array(head.utf8) + Array(rest.utf8)
            self.rest = rest.utf8.count
            configure(&self)
        }
    }

    static let accepted: [Accepted] = [
        // llhttp sample.md
        Accepted("llhttp: simple response", "HTTP/1.1 200 OK\r\nHeader1: Value1\r\nHeader2:\t Value2\r\nContent-Length: 0\r\n\r\n") {
            $0.framing = .none; $0.keepAlive = true; $0.fields = ["Header1: Value1", "Header2: Value2", "Content-Length: 0"]
        },
        Accepted("llhttp: empty body runs until close", "HTTP/1.1 200 OK\r\n\r\n") { _ in },
        Accepted("llhttp: Google 301",
                 "HTTP/1.1 301 Moved Permanently\r\nLocation: http://www.google.com/\r\nContent-Type: text/html; charset=UTF-8\r\n"
                 + "Date: Sun, 26 Apr 2009 11:11:49 GMT\r\nExpires: Tue, 26 May 2009 11:11:49 GMT\r\nX-$PrototypeBI-Version: 1.6.0.3\r\n"
                 + "Cache-Control: public, max-age=2592000\r\nServer: gws\r\nContent-Length:  219  \r\n\r\n",
                 rest: "<HTML><HEAD><meta http-equiv=content-type content=text/html;charset=utf-8>\n") {
            $0.status = 301; $0.reason = "Moved Permanently"; $0.framing = .contentLength(219); $0.keepAlive = true
        },
        Accepted("llhttp: amazon.com",
                 "HTTP/1.1 301 MovedPermanently\r\nDate: Wed, 15 May 2013 17:06:33 GMT\r\nServer: Server\r\nx-amz-id-1: 0GPHKXSJQ826RK7GZEB2\r\n"
                 + "p3p: policyref=\"http://www.amazon.com/w3c/p3p.xml\",CP=\"CAO DSP LAW CUR ADM IVAo IVDo CONo OTPo OUR DELi PUBi OTRi BUS PHY ONL UNI PUR FIN COM NAV INT DEM CNT STA HEA PRE LOC GOV OTC \"\r\n"
                 + "x-amz-id-2: STN69VZxIFSz9YJLbz1GDbxpbjG6Qjmmq5E3DxRhOUw+Et0p4hr7c/Q8qNcx4oAD\r\n"
                 + "Location: http://www.amazon.com/Dan-Brown/e/B000AP9DSU/ref=s9_pop_gw_al1?_encoding=UTF8&refinementId=618073011\r\n"
                 + "Vary: Accept-Encoding,User-Agent\r\nContent-Type: text/html; charset=ISO-8859-1\r\nTransfer-Encoding: chunked\r\n\r\n",
                 rest: "1\r\n\n\r\n0\r\n\r\n") {
            $0.status = 301; $0.reason = "MovedPermanently"; $0.framing = .chunked; $0.keepAlive = true
        },
        Accepted("llhttp: no headers and no body", "HTTP/1.1 404 Not Found\r\n\r\n") { $0.status = 404; $0.reason = "Not Found" },
        Accepted("llhttp: no reason phrase", "HTTP/1.1 301\r\n\r\n") { $0.status = 301; $0.reason = "" },
        Accepted("llhttp: empty reason phrase after space", "HTTP/1.1 200 \r\n\r\n") { $0.reason = "" },
        Accepted("llhttp: underscore in header key",
                 "HTTP/1.1 200 OK\r\nServer: DCLK-AdSvr\r\nContent-Type: text/xml\r\nContent-Length: 0\r\n"
                 + "DCLK_imp: v7;x;114750856;0-0;0;17820020;0/0;21603567/21621457/1;;~okv=;dcmt=text/xml;;~cs=o\r\n\r\n") {
            $0.framing = .none; $0.keepAlive = true
        },
        Accepted("llhttp: bonjourmadame.fr (empty value, HTTP/1.0 keep-alive)",
                 "HTTP/1.0 301 Moved Permanently\r\nDate: Thu, 03 Jun 2010 09:56:32 GMT\r\nServer: Apache/2.2.3 (Red Hat)\r\n"
                 + "Cache-Control: public\r\nPragma: \r\nLocation: http://www.bonjourmadame.fr/\r\nVary: Accept-Encoding\r\n"
                 + "Content-Length: 0\r\nContent-Type: text/html; charset=UTF-8\r\nConnection: keep-alive\r\n\r\n") {
            $0.version = .http10; $0.status = 301; $0.reason = "Moved Permanently"; $0.framing = .none; $0.keepAlive = true
            $0.fields = ["Date: Thu, 03 Jun 2010 09:56:32 GMT", "Server: Apache/2.2.3 (Red Hat)", "Cache-Control: public", "Pragma: ",
                         "Location: http://www.bonjourmadame.fr/", "Vary: Accept-Encoding", "Content-Length: 0",
                         "Content-Type: text/html; charset=UTF-8", "Connection: keep-alive"]
        },
        Accepted("llhttp: spaces in header value",
                 "HTTP/1.1 200 OK\r\nDate: Tue, 28 Sep 2010 01:14:13 GMT\r\nServer: Apache\r\nCache-Control: no-cache, must-revalidate\r\n"
                 + "Expires: Mon, 26 Jul 1997 05:00:00 GMT\r\n.et-Cookie: PlaxoCS=1274804622353690521; path=/; domain=.plaxo.com\r\n"
                 + "Vary: Accept-Encoding\r\n_eep-Alive: timeout=45\r\n_onnection: Keep-Alive\r\nTransfer-Encoding: chunked\r\n"
                 + "Content-Type: text/html\r\nConnection: close\r\n\r\n", rest: "0\r\n\r\n") {
            $0.framing = .chunked
        },
        Accepted("llhttp: non-ASCII in the status line",
                 "HTTP/1.1 500 Oriëntatieprobleem\r\nDate: Fri, 5 Nov 2010 23:07:12 GMT+2\r\nContent-Length: 0\r\nConnection: close\r\n\r\n") {
            $0.status = 500; $0.reason = "Oriëntatieprobleem"; $0.framing = .none
        },
        Accepted("llhttp: no Content-Length, no Transfer-Encoding",
                 "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n", rest: "hello world") { _ in },
        Accepted("llhttp: response starting with CRLF",
                 "\r\nHTTP/1.1 200 OK\r\nHeader1: Value1\r\nHeader2:\t Value2\r\nContent-Length: 0\r\n\r\n") {
            $0.framing = .none; $0.keepAlive = true
        },
        // llhttp invalid.md: a second SP is part of the reason phrase.
        Accepted("llhttp: extra space between status code and reason", "HTTP/1.1 200  OK\r\n\r\n") { $0.reason = " OK" },
        // llhttp connection.md (llhttp honours Proxy-Connection; it is not a standard field, so it is ignored here)
        Accepted("llhttp: Proxy-Connection is not Connection",
                 "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=UTF-8\r\nContent-Length: 11\r\nProxy-Connection: close\r\n"
                 + "Date: Thu, 31 Dec 2009 20:55:48 +0000\r\n\r\n", rest: "hello world") {
            $0.framing = .contentLength(11); $0.keepAlive = true
        },
        Accepted("llhttp: HTTP/1.0 keep-alive with an EOF-terminated body",
                 "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\n\r\n", rest: "HTTP/1.0 200 OK") { $0.version = .http10 },
        Accepted("llhttp: HTTP/1.0 keep-alive with 204",
                 "HTTP/1.0 204 No content\r\nConnection: keep-alive\r\n\r\n", rest: "HTTP/1.0 200 OK\r\n") {
            $0.version = .http10; $0.status = 204; $0.reason = "No content"; $0.framing = .none; $0.keepAlive = true
        },
        Accepted("llhttp: HTTP/1.1 with an EOF-terminated body", "HTTP/1.1 200 OK\r\n\r\n", rest: "HTTP/1.1 200 OK") { _ in },
        Accepted("llhttp: HTTP/1.1 204", "HTTP/1.1 204 No content\r\n\r\n", rest: "HTTP/1.1 200 OK\r\n") {
            $0.status = 204; $0.reason = "No content"; $0.framing = .none; $0.keepAlive = true
        },
        Accepted("llhttp: HTTP/1.1 204 with close", "HTTP/1.1 204 No content\r\nConnection: close\r\n\r\n", rest: "HTTP/1.1 200 OK\r\n") {
            $0.status = 204; $0.reason = "No content"; $0.framing = .none
        },
        Accepted("llhttp: close with Content-Length",
                 "HTTP/1.1 200 No content\r\nContent-Length: 5\r\nConnection: close\r\n\r\n", rest: "2ad731e3-4dcd-4f70-b871-0ad284b29ffc") {
            $0.reason = "No content"; $0.framing = .contentLength(5)
        },
        Accepted("llhttp: 101 with Upgrade and Content-Length has no body",
                 "HTTP/1.1 101 Switching Protocols\r\nConnection: upgrade\r\nUpgrade: h2c\r\nContent-Length: 4\r\n\r\n", rest: "bodyproto") {
            $0.status = 101; $0.reason = "Switching Protocols"; $0.framing = .none; $0.keepAlive = true
        },
        Accepted("llhttp: 101 with Upgrade and Transfer-Encoding has no body",
                 "HTTP/1.1 101 Switching Protocols\r\nConnection: upgrade\r\nUpgrade: h2c\r\nTransfer-Encoding: chunked\r\n\r\n",
                 rest: "2\r\nbo\r\n2\r\ndy\r\n0\r\n\r\nproto") {
            $0.status = 101; $0.reason = "Switching Protocols"; $0.framing = .none; $0.keepAlive = true
        },
        Accepted("llhttp: 200 with Upgrade", "HTTP/1.1 200 OK\r\nConnection: upgrade\r\nUpgrade: h2c\r\n\r\n", rest: "body") { _ in },
        Accepted("llhttp: 200 with Upgrade and Content-Length",
                 "HTTP/1.1 200 OK\r\nConnection: upgrade\r\nUpgrade: h2c\r\nContent-Length: 4\r\n\r\n", rest: "body") {
            $0.framing = .contentLength(4); $0.keepAlive = true
        },
        Accepted("llhttp: 200 with Upgrade and Transfer-Encoding",
                 "HTTP/1.1 200 OK\r\nConnection: upgrade\r\nUpgrade: h2c\r\nTransfer-Encoding: chunked\r\n\r\n", rest: "2\r\nbo\r\n2\r\ndy\r\n0\r\n\r\n") {
            $0.framing = .chunked; $0.keepAlive = true
        },
        // llhttp content-length.md
        Accepted("llhttp: body without Content-Length ends at close",
                 "HTTP/1.1 200 OK\r\nDate: Tue, 04 Aug 2009 07:59:32 GMT\r\nServer: Apache\r\nX-Powered-By: Servlet/2.5 JSP/2.1\r\n"
                 + "Content-Type: text/xml; charset=utf-8\r\nConnection: close\r\n\r\n", rest: "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n") { _ in },
        Accepted("llhttp: Content-Length-X is not Content-Length",
                 "HTTP/1.1 200 OK\r\nContent-Length-X: 0\r\nTransfer-Encoding: chunked\r\n\r\n", rest: "2\r\nOK\r\n0\r\n\r\n") {
            $0.framing = .chunked; $0.keepAlive = true
        },
        Accepted("llhttp: Content-Length of a HEAD response is not a body",
                 "HTTP/1.1 200 OK\r\nContent-Length: 123\r\n\r\n", rest: "HTTP/1.1 200 OK\r\nContent-Length: 456\r\n\r\n") {
            $0.method = .head; $0.framing = .none; $0.keepAlive = true
        },
        Accepted("llhttp: tabs around Content-Length", "HTTP/1.1 200 OK\r\nContent-Length:\t42\t\r\n\r\n") {
            $0.framing = .contentLength(42); $0.keepAlive = true
        },
        // llhttp transfer-encoding.md: without chunked last, a response body runs to close (RFC 9112 §6.3).
        Accepted("llhttp: chunked before another coding", "HTTP/1.1 200 OK\r\nAccept: */*\r\nTransfer-Encoding: chunked, deflate\r\n\r\n", rest: "World") { _ in },
        Accepted("llhttp: chunked then identity in two fields",
                 "HTTP/1.1 200 OK\r\nAccept: */*\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n\r\n", rest: "World") { _ in },
        Accepted("llhttp: chunkedchunked is not chunked",
                 "HTTP/1.1 200 OK\r\nAccept: */*\r\nTransfer-Encoding: chunkedchunked\r\n\r\n", rest: "2\r\nOK\r\n0\r\n\r\n") { _ in },
        Accepted("llhttp: chunk extensions (head)", "HTTP/1.1 200 OK\r\nHost: localhost\r\nTransfer-encoding: chunked\r\n\r\n",
                 rest: "5;ilovew3;somuchlove=aretheseparametersfor\r\nhello\r\n6;blahblah;blah\r\n world\r\n0\r\n\r\n") {
            $0.framing = .chunked; $0.keepAlive = true
        },

        // Our own rules.
        Accepted("Connection options are recorded", "HTTP/1.1 200 OK\r\nConnection: X-Foo, close\r\nContent-Length: 1\r\n\r\n", rest: "x") {
            $0.framing = .contentLength(1); $0.connectionTokens = ["X-Foo"]
        },
        Accepted("HTTP/1.0 closes by default", "HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n", rest: "x") {
            $0.version = .http10; $0.framing = .contentLength(1)
        },
        Accepted("gzip then chunked is chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n") {
            $0.framing = .chunked; $0.keepAlive = true
        },
        Accepted("obs-text in the reason phrase", "HTTP/1.1 200 \u{00E9}t\u{00E9}\r\n\r\n") { $0.reason = "\u{00E9}t\u{00E9}" },
        Accepted("a tab in the reason phrase", "HTTP/1.1 200 O\tK\r\n\r\n") { $0.reason = "O\tK" },
        Accepted("status 599 is the highest", "HTTP/1.1 599 X\r\n\r\n") { $0.status = 599; $0.reason = "X" },
        Accepted("100 Continue is a complete head", "HTTP/1.1 100 Continue\r\n\r\n", rest: "HTTP/1.1 200 OK\r\n") {
            $0.status = 100; $0.reason = "Continue"; $0.framing = .none; $0.keepAlive = true
        },
    ]

    @Test(arguments: accepted)
    func acceptsTheValidResponse(_ c: Accepted) {
        var head = ResponseHead()
        let result = c.bytes.withUnsafeBytes { ResponseParser().parseHead($0, requestMethod: c.method, into: &head) }
        #expect(result == .complete(headLength: c.bytes.count - c.rest))
        guard case .complete = result else { return }
        let text = { (r: ByteRange) in String(decoding: c.bytes[r.start..<r.end], as: UTF8.self) }
        #expect(head.version == c.version)
        #expect(head.status == c.status)
        #expect(text(head.reason) == c.reason)
        #expect(head.framing == c.framing)
        #expect(head.keepAlive == c.keepAlive)
        #expect(head.connectionTokens.map(text) == c.connectionTokens)
        if let fields = c.fields {
            #expect(head.headers.map { text($0.name) + ": " + text($0.value) } == fields)
        }
    }

    // MARK: Framing (RFC 9112 §6.3)

    struct FramingCase: Sendable, CustomTestStringConvertible {
        let method: HTTPMethod
        let status: Int
        let fields: String
        let framing: BodyFraming
        var testDescription: String { "\(method) → \(status) \(fields.debugDescription) → \(framing)" }
        init(_ method: HTTPMethod, _ status: Int, _ fields: String, _ framing: BodyFraming) {
            self.method = method; self.status = status; self.fields = fields; self.framing = framing
        }
    }

    static let framingCases: [FramingCase] = [
        FramingCase(.head, 200, "Content-Length: 100\r\n", .none),
        FramingCase(.head, 200, "Transfer-Encoding: chunked\r\n", .none),
        FramingCase(.head, 200, "", .none),
        FramingCase(.get, 100, "", .none),
        FramingCase(.get, 103, "Link: </s.css>\r\n", .none),
        FramingCase(.get, 101, "Connection: upgrade\r\nUpgrade: websocket\r\n", .none),
        FramingCase(.get, 204, "Content-Length: 0\r\n", .none),
        FramingCase(.get, 204, "", .none),
        FramingCase(.get, 304, "Content-Length: 42\r\n", .none),
        FramingCase(.connect, 200, "", .none),
        FramingCase(.connect, 299, "Content-Length: 5\r\n", .none),
        FramingCase(.connect, 407, "Content-Length: 5\r\n", .contentLength(5)),
        FramingCase(.get, 200, "Transfer-Encoding: chunked\r\n", .chunked),
        FramingCase(.post, 201, "Transfer-Encoding: deflate\r\nTransfer-Encoding: chunked\r\n", .chunked),
        FramingCase(.get, 200, "Transfer-Encoding: gzip\r\n", .untilClose),
        FramingCase(.get, 200, "Content-Length: 7\r\n", .contentLength(7)),
        FramingCase(.get, 200, "Content-Length: 7\r\nContent-Length: 7\r\n", .contentLength(7)),
        FramingCase(.get, 200, "Content-Length: 0\r\n", .none),
        FramingCase(.get, 200, "", .untilClose),
        FramingCase(.get, 500, "", .untilClose),
    ]

    @Test(arguments: framingCases)
    func framingFollowsTheRequestMethodStatusAndFields(_ c: FramingCase) {
        let bytes = Array("HTTP/1.1 \(c.status) X\r\n\(c.fields)\r\n".utf8)
        var head = ResponseHead()
        let result = bytes.withUnsafeBytes { ResponseParser().parseHead($0, requestMethod: c.method, into: &head) }
        #expect(result == .complete(headLength: bytes.count))
        #expect(head.framing == c.framing)
        #expect(head.keepAlive == (c.framing != .untilClose))
    }

    // MARK: Refused responses

    struct Refused: Sendable, CustomTestStringConvertible {
        let name: String
        let bytes: [UInt8]
        var testDescription: String { name }
        init(_ name: String, _ text: String) { self.name = name; bytes = Array(text.utf8) }
        init(_ name: String, _ bytes: [UInt8]) { self.name = name; self.bytes = bytes }
    }

    static let refused: [Refused] = [
        // llhttp invalid.md
        Refused("llhttp: incomplete HTTP protocol", "HTP/1.1 200 OK\r\n\r\n"),
        Refused("llhttp: extra digit in major version", "HTTP/01.1 200 OK\r\n\r\n"),
        Refused("llhttp: extra digit in major version #2", "HTTP/11.1 200 OK\r\n\r\n"),
        Refused("llhttp: extra digit in minor version", "HTTP/1.01 200 OK\r\n\r\n"),
        Refused("llhttp: tab after HTTP version", "HTTP/1.1\t200 OK\r\n\r\n"),
        Refused("llhttp: CR before response and tab after version", "\rHTTP/1.1\t200 OK\r\n\r\n"),
        Refused("llhttp: headers separated by CR", "HTTP/1.1 200 OK\r\nFoo: 1\rBar: 2\r\n\r\n"),
        Refused("llhttp: invalid HTTP version", "HTTP/5.6 200 OK\r\n\r\n"),
        Refused("llhttp: invalid space after start line", "HTTP/1.1 200 OK\r\n Host: foo\r\n"),
        Refused("llhttp: extra space between version and status", "HTTP/1.1  200 OK\r\n\r\n"),
        Refused("llhttp: one-digit status code", "HTTP/1.1 2 OK\r\n\r\n"),
        Refused("llhttp: only LFs present and no body", "HTTP/1.1 200 OK\nContent-Length: 0\n\n"),
        Refused("llhttp: only LFs present", "HTTP/1.1 200 OK\nFoo: abc\nBar: def\n\nBODY\n"),
        // llhttp sample.md
        Refused("llhttp: RTSP response", "RTSP/1.1 200 OK\r\n\r\n"),
        Refused("llhttp: ICE response", "ICE/1.1 200 OK\r\n\r\n"),
        Refused("llhttp: invalid response start", "HTTPER/1.1 200 OK\r\n\r\n"),
        Refused("llhttp: no carriage return",
                "HTTP/1.1 200 OK\nContent-Type: text/html; charset=utf-8\nConnection: close\n\nthese headers are from http://news.ycombinator.com/"),
        Refused("llhttp: spaces in header name",
                "HTTP/1.1 200 OK\r\nServer: Microsoft-IIS/6.0\r\nX-Powered-By: ASP.NET\r\nen-US Content-Type: text/xml\r\nContent-Type: text/xml\r\n"
                + "Content-Length: 16\r\nDate: Fri, 23 Jul 2010 18:45:38 GMT\r\nConnection: keep-alive\r\n\r\n<xml>hello</xml>"),
        Refused("llhttp: HTTP version 0.9", "HTTP/0.9 200 OK\r\n\r\n"),
        // llhttp transfer-encoding.md
        Refused("llhttp: empty Transfer-Encoding with Content-Length", "HTTP/1.1 200 OK\r\nTransfer-Encoding:\r\nContent-Length: 5\r\n\r\nhello"),
        Refused("llhttp: obs-fold after the chunked value", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n  abc\r\n\r\n5\r\nWorld\r\n0\r\n\r\n"),

        // Status line
        Refused("HTTP/2.0", "HTTP/2.0 200 OK\r\n\r\n"),
        Refused("lowercase http", "http/1.1 200 OK\r\n\r\n"),
        Refused("status 600", "HTTP/1.1 600 X\r\n\r\n"),
        Refused("status 099", "HTTP/1.1 099 X\r\n\r\n"),
        Refused("a two-digit status", "HTTP/1.1 20 OK\r\n\r\n"),
        Refused("a four-digit status", "HTTP/1.1 2000 OK\r\n\r\n"),
        Refused("a letter in the status", "HTTP/1.1 2x0 OK\r\n\r\n"),
        Refused("a control byte in the reason", Array("HTTP/1.1 200 O".utf8) + [0x01] + Array("K\r\n\r\n".utf8)),
        Refused("a bare LF after the status line", "HTTP/1.1 200 OK\n\r\n"),
        Refused("a bare CR in the status line", "HTTP/1.1 200 OK\rX\r\n\r\n"),
        Refused("five leading empty lines", "\r\n\r\n\r\n\r\n\r\nHTTP/1.1 200 OK\r\n\r\n"),
        // Fields
        Refused("whitespace before the colon", "HTTP/1.1 200 OK\r\nContent-Length : 1\r\n\r\n"),
        Refused("a NUL in a value", Array("HTTP/1.1 200 OK\r\nX: a".utf8) + [0] + Array("\r\n\r\n".utf8)),
        Refused("a bare LF ending a field", "HTTP/1.1 200 OK\r\nX: a\n\r\n"),
        Refused("an invalid Content-Length", "HTTP/1.1 200 OK\r\nContent-Length: 1a\r\n\r\n"),
        Refused("conflicting Content-Length values", "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"),
        Refused("Content-Length then Transfer-Encoding", "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n"),
        Refused("Transfer-Encoding then Content-Length", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 1\r\n\r\n"),
        Refused("Content-Length and Transfer-Encoding on a 204", "HTTP/1.1 204 No Content\r\nTransfer-Encoding: chunked\r\nContent-Length: 0\r\n\r\n"),
        Refused("Transfer-Encoding in HTTP/1.0", "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"),
        Refused("chunked twice", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, chunked\r\n\r\n"),
        Refused("a malformed transfer coding", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked;\r\n\r\n"),
        Refused("an invalid Connection option", "HTTP/1.1 200 OK\r\nConnection: a b\r\n\r\n"),
    ]

    @Test(arguments: refused)
    func refusesTheInvalidResponseWith502(_ c: Refused) {
        var head = ResponseHead()
        let result = c.bytes.withUnsafeBytes { ResponseParser().parseHead($0, requestMethod: .get, into: &head) }
        guard case .error(let error) = result else {
            Issue.record("expected 502, got \(result)")
            return
        }
        #expect(error.status == 502, "\(error.reason)")
    }

    // MARK: Incremental input, limits, pipelining

    static let splitSamples: [String] = [
        "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc",
        "HTTP/1.1 301\r\nLocation: /x\r\nTransfer-Encoding: gzip, chunked\r\nConnection: close, X\r\n\r\n",
        "\r\nHTTP/1.0 204 \r\nX:  \t \r\n\r\n",
    ]

    @Test(arguments: splitSamples)
    func everyPrefixOfAValidResponseIsIncomplete(_ sample: String) {
        let bytes = Array(sample.utf8)
        var head = ResponseHead()
        let full = bytes.withUnsafeBytes { ResponseParser().parseHead($0, requestMethod: .get, into: &head) }
        guard case .complete(let length) = full else {
            Issue.record("sample did not parse: \(full)")
            return
        }
        for cut in 0..<length {
            let result = bytes.withUnsafeBytes {
                ResponseParser().parseHead(UnsafeRawBufferPointer(rebasing: $0[0..<cut]), requestMethod: .get, into: &head)
            }
            #expect(result == .incomplete, "prefix of \(cut) bytes")
        }
    }

    @Test(arguments: ["HTTP/1.2", "HTTP/1.1 2a", "HTTP/1.1 200 OK\r\nX : ", "HTTP/1.1 200 OK\r\n\t", "HTTP/1.1 200 OK\r\nX: a\u{7F}"])
    func errorsAreReportedBeforeTheHeadIsComplete(_ prefix: String) {
        var head = ResponseHead()
        let result = Array(prefix.utf8).withUnsafeBytes { ResponseParser().parseHead($0, requestMethod: .get, into: &head) }
        #expect(result.status == 502, "\(result)")
    }

    @Test func limitsAreEnforcedWith502() {
        var limits = HTTPLimits()
        limits.maxHeadBytes = 64
        limits.maxHeaderCount = 2
        let parser = ResponseParser(limits: limits)
        var head = ResponseHead()
        let big = Array(("HTTP/1.1 200 OK\r\nX: " + String(repeating: "a", count: 64)).utf8)
        #expect(big.withUnsafeBytes { parser.parseHead($0, requestMethod: .get, into: &head) }.status == 502)
        let many = Array("HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n".utf8)
        #expect(many.withUnsafeBytes { parser.parseHead($0, requestMethod: .get, into: &head) }.status == 502)
        let two = Array("HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\n\r\n".utf8)
        #expect(two.withUnsafeBytes { parser.parseHead($0, requestMethod: .get, into: &head) } == .complete(headLength: two.count))
    }

    /// llhttp pipelining.md: responses back to back with a CRLF after each body.
    @Test func pipelinedResponsesParseOneAfterAnother() {
        let stream = Array(("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nAAA\r\n"
                            + "HTTP/1.1 201 Created\r\nContent-Length: 4\r\n\r\nBBBB\r\n"
                            + "HTTP/1.1 202 Accepted\r\nContent-Length: 5\r\n\r\nCCCC").utf8)
        var head = ResponseHead()
        var offset = 0
        var statuses: [Int] = []
        for _ in 0..<3 {
            let result = stream.withUnsafeBytes {
                ResponseParser().parseHead(UnsafeRawBufferPointer(rebasing: $0[offset...]), requestMethod: .get, into: &head)
            }
            guard case .complete(let length) = result, case .contentLength(let n) = head.framing else {
                Issue.record("unexpected \(result) at \(offset)")
                return
            }
            statuses.append(head.status)
            offset += length + Int(n)
        }
        #expect(statuses == [200, 201, 202])
        #expect(offset == stream.count + 1)
    }

    @Test func parsingAgainResetsEveryField() {
        var head = ResponseHead()
        let first = Array("HTTP/1.0 404 Nope\r\nConnection: X-A\r\nContent-Length: 3\r\n\r\n".utf8)
        _ = first.withUnsafeBytes { ResponseParser().parseHead($0, requestMethod: .get, into: &head) }
        let second = Array("HTTP/1.1 204\r\n\r\n".utf8)
        #expect(second.withUnsafeBytes { ResponseParser().parseHead($0, requestMethod: .get, into: &head) }
                == .complete(headLength: second.count))
        #expect(head.version == .http11)
        #expect(head.status == 204)
        #expect(head.reason == .empty)
        #expect(head.headers.isEmpty)
        #expect(head.connectionTokens.isEmpty)
        #expect(head.framing == .none)
        #expect(head.keepAlive)
    }
}
