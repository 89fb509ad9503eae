import Testing
@testable import ProxyCore

/// Vectors marked "llhttp" are adapted from nodejs/llhttp's test/request/*.md (strict mode):
/// HTTP/1.1 vectors without a Host field get `Host: a` so that they test what they were
/// written for, and fragments are dropped from targets that were not about fragments.
@Suite struct RequestParserTests {
    // MARK: Accepted requests

    struct Accepted: Sendable, CustomTestStringConvertible {
        let name: String
        let bytes: [UInt8]
        /// Bytes after the head (body, next request).
        var rest = 0
        var method: HTTPMethod = .get
        var methodName: String? = nil
        var target = "/"
        var path: String? = nil
        var authority: String? = nil
        var version: HTTPVersion = .http11
        var framing: BodyFraming = .none
        var keepAlive = true
        var expectContinue = false
        var upgrade = false
        var host: String? = "a"
        var connectionTokens: [String] = []
        var fields: [String]? = nil
        var testDescription: String { name }

        init(_ name: String, _ head: String, rest: String = "", configure: (inout Accepted) -> Void = { _ in }) {
            self.init(name, Array(head.utf8), rest: rest, configure: configure)
        }

        init(_ name: String, _ head: [UInt8], rest: String = "", configure: (inout Accepted) -> Void = { _ in }) {
            self.name = name
            bytes = head + Array(rest.utf8)
            self.rest = rest.utf8.count
            configure(&self)
        }
    }

    static let accepted: [Accepted] = [
        // llhttp sample.md
        Accepted("llhttp: simple request with a tab in OWS",
                 "OPTIONS /url HTTP/1.1\r\nHost: a\r\nHeader1: Value1\r\nHeader2:\t Value2\r\n\r\n") {
            $0.method = .options; $0.target = "/url"; $0.fields = ["Host: a", "Header1: Value1", "Header2: Value2"]
        },
        Accepted("llhttp: request with method starting with H", "HEAD /url HTTP/1.1\r\nHost: a\r\n\r\n") {
            $0.method = .head; $0.target = "/url"
        },
        Accepted("llhttp: curl GET",
                 "GET /test HTTP/1.1\r\nUser-Agent: curl/7.18.0 (i486-pc-linux-gnu) libcurl/7.18.0 OpenSSL/0.9.8g zlib/1.2.3.3 libidn/1.1\r\n"
                 + "Host: 0.0.0.0=5000\r\nAccept: */*\r\n\r\n") {
            $0.target = "/test"; $0.host = "0.0.0.0=5000"
            $0.fields = ["User-Agent: curl/7.18.0 (i486-pc-linux-gnu) libcurl/7.18.0 OpenSSL/0.9.8g zlib/1.2.3.3 libidn/1.1",
                         "Host: 0.0.0.0=5000", "Accept: */*"]
        },
        Accepted("llhttp: Firefox GET",
                 "GET /favicon.ico HTTP/1.1\r\nHost: 0.0.0.0=5000\r\n"
                 + "User-Agent: Mozilla/5.0 (X11; U; Linux i686; en-US; rv:1.9) Gecko/2008061015 Firefox/3.0\r\n"
                 + "Accept: text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8\r\nAccept-Language: en-us,en;q=0.5\r\n"
                 + "Accept-Encoding: gzip,deflate\r\nAccept-Charset: ISO-8859-1,utf-8;q=0.7,*;q=0.7\r\nKeep-Alive: 300\r\n"
                 + "Connection: keep-alive\r\n\r\n") {
            $0.target = "/favicon.ico"; $0.host = "0.0.0.0=5000"
        },
        Accepted("llhttp: DUMBPACK", "GET /dumbpack HTTP/1.1\r\nHost: a\r\naaaaaaaaaaaaa:++++++++++\r\n\r\n") {
            $0.target = "/dumbpack"; $0.fields = ["Host: a", "aaaaaaaaaaaaa: ++++++++++"]
        },
        Accepted("llhttp: no headers and no body", "GET /get_no_headers_no_body/world HTTP/1.1\r\nHost: a\r\n\r\n") {
            $0.target = "/get_no_headers_no_body/world"
        },
        Accepted("llhttp: one header and no body", "GET /get_one_header_no_body HTTP/1.1\r\nHost: a\r\nAccept: */*\r\n\r\n") {
            $0.target = "/get_one_header_no_body"
        },
        Accepted("llhttp: Apache bench GET over HTTP/1.0",
                 "GET /test HTTP/1.0\r\nHost: 0.0.0.0:5000\r\nUser-Agent: ApacheBench/2.3\r\nAccept: */*\r\n\r\n") {
            $0.target = "/test"; $0.version = .http10; $0.keepAlive = false; $0.host = "0.0.0.0:5000"
        },
        Accepted("llhttp: prefix newline", "\r\nGET /test HTTP/1.1\r\nHost: a\r\n\r\n") { $0.target = "/test" },
        Accepted("llhttp: request starting with CRLF", "\r\nGET /url HTTP/1.1\r\nHost: a\r\nHeader1: Value1\r\n\r\n") {
            $0.target = "/url"
        },
        Accepted("llhttp: extended characters (obs-text) in a value", "GET / HTTP/1.1\r\nHost: a\r\nTest: Düsseldorf\r\n\r\n") {
            $0.fields = ["Host: a", "Test: Düsseldorf"]
        },
        Accepted("llhttp: byte 0xFF in a value",
                 Array("OPTIONS /url HTTP/1.1\r\nHost: a\r\nHeader1: Value1\r\nHeader2: ".utf8) + [0xFF] + Array("Value2\r\n\r\n".utf8)) {
            $0.method = .options; $0.target = "/url"
        },
        // llhttp method.md
        Accepted("llhttp: REPORT request", "REPORT /test HTTP/1.1\r\nHost: a\r\n\r\n") {
            $0.method = .other; $0.methodName = "REPORT"; $0.target = "/test"
        },
        Accepted("llhttp: CONNECT request",
                 "CONNECT 0-home0.netscape.com:443 HTTP/1.0\r\nUser-agent: Mozilla/1.1N\r\nProxy-authorization: basic aGVsbG86d29ybGQ=\r\n\r\n",
                 rest: "some data\r\nand yet even more data") {
            $0.method = .connect; $0.target = "0-home0.netscape.com:443"; $0.version = .http10; $0.keepAlive = false; $0.host = nil
        },
        Accepted("llhttp: CONNECT request with CAPS",
                 "CONNECT HOME0.NETSCAPE.COM:443 HTTP/1.0\r\nUser-agent: Mozilla/1.1N\r\nProxy-authorization: basic aGVsbG86d29ybGQ=\r\n\r\n") {
            $0.method = .connect; $0.target = "HOME0.NETSCAPE.COM:443"; $0.version = .http10; $0.keepAlive = false; $0.host = nil
        },
        Accepted("llhttp: CONNECT with body",
                 "CONNECT foo.bar.com:443 HTTP/1.0\r\nUser-agent: Mozilla/1.1N\r\nProxy-authorization: basic aGVsbG86d29ybGQ=\r\nContent-Length: 10\r\n\r\n",
                 rest: "blarfcicle\"") {
            $0.method = .connect; $0.target = "foo.bar.com:443"; $0.version = .http10; $0.keepAlive = false; $0.host = nil
            $0.framing = .contentLength(10)
        },
        Accepted("llhttp: PATCH request",
                 "PATCH /file.txt HTTP/1.1\r\nHost: www.example.com\r\nContent-Type: application/example\r\nIf-Match: \"e0023aa4e\"\r\nContent-Length: 10\r\n\r\n",
                 rest: "cccccccccc") {
            $0.method = .patch; $0.target = "/file.txt"; $0.host = "www.example.com"; $0.framing = .contentLength(10)
        },
        Accepted("llhttp: PURGE request", "PURGE /file.txt HTTP/1.1\r\nHost: www.example.com\r\n\r\n") {
            $0.method = .other; $0.methodName = "PURGE"; $0.target = "/file.txt"; $0.host = "www.example.com"
        },
        Accepted("llhttp: SEARCH request", "SEARCH / HTTP/1.1\r\nHost: www.example.com\r\n\r\n") {
            $0.method = .other; $0.methodName = "SEARCH"; $0.host = "www.example.com"
        },
        Accepted("llhttp: LINK request",
                 "LINK /images/my_dog.jpg HTTP/1.1\r\nHost: example.com\r\nLink: <http://example.com/profiles/joe>; rel=\"tag\"\r\n"
                 + "Link: <http://example.com/profiles/sally>; rel=\"tag\"\r\n\r\n") {
            $0.method = .other; $0.target = "/images/my_dog.jpg"; $0.host = "example.com"
            $0.fields = ["Host: example.com", "Link: <http://example.com/profiles/joe>; rel=\"tag\"",
                         "Link: <http://example.com/profiles/sally>; rel=\"tag\""]
        },
        Accepted("llhttp: UNLINK request",
                 "UNLINK /images/my_dog.jpg HTTP/1.1\r\nHost: example.com\r\nLink: <http://example.com/profiles/sally>; rel=\"tag\"\r\n\r\n") {
            $0.method = .other; $0.methodName = "UNLINK"; $0.target = "/images/my_dog.jpg"; $0.host = "example.com"
        },
        Accepted("llhttp: SOURCE request", "SOURCE /music/sweet/music HTTP/1.1\r\nHost: example.com\r\n\r\n") {
            $0.method = .other; $0.target = "/music/sweet/music"; $0.host = "example.com"
        },
        // llhttp invalid.md refuses unknown methods; RFC 9110 §9.1 allows any token and a proxy forwards it.
        Accepted("llhttp: ANNOUNCE over HTTP/1.0 is just another token", "ANNOUNCE /music/sweet/music HTTP/1.0\r\nHost: example.com\r\n\r\n") {
            $0.method = .other; $0.methodName = "ANNOUNCE"; $0.target = "/music/sweet/music"; $0.version = .http10
            $0.keepAlive = false; $0.host = "example.com"
        },
        Accepted("llhttp: MKCOLA is a token too", "MKCOLA / HTTP/1.1\r\nHost: a\r\n\r\n") { $0.method = .other; $0.methodName = "MKCOLA" },
        // llhttp uri.md
        Accepted("llhttp: quotes in URI", "GET /with_\"lovely\"_quotes?foo=\\\"bar\\\" HTTP/1.1\r\nHost: a\r\n\r\n") {
            $0.target = "/with_\"lovely\"_quotes?foo=\\\"bar\\\""
        },
        Accepted("llhttp: query URL with question mark", "GET /test.cgi?foo=bar?baz HTTP/1.1\r\nHost: a\r\n\r\n") {
            $0.target = "/test.cgi?foo=bar?baz"
        },
        Accepted("llhttp: host terminated by a query string", "GET http://hypnotoad.org?hail=all HTTP/1.1\r\nHost: a\r\n\r\n") {
            $0.target = "http://hypnotoad.org?hail=all"; $0.authority = "hypnotoad.org"; $0.path = "?hail=all"
        },
        Accepted("llhttp: host:port terminated by a query string", "GET http://hypnotoad.org:1234?hail=all HTTP/1.1\r\nHost: a\r\n\r\n") {
            $0.target = "http://hypnotoad.org:1234?hail=all"; $0.authority = "hypnotoad.org:1234"; $0.path = "?hail=all"
        },
        Accepted("llhttp: query URL with vertical bar", "GET /test.cgi?query=| HTTP/1.1\r\nHost: a\r\n\r\n") {
            $0.target = "/test.cgi?query=|"
        },
        Accepted("llhttp: host:port terminated by a space", "GET http://hypnotoad.org:1234 HTTP/1.1\r\nHost: a\r\n\r\n") {
            $0.target = "http://hypnotoad.org:1234"; $0.authority = "hypnotoad.org:1234"; $0.path = ""
        },
        Accepted("llhttp: underscore in hostname",
                 "CONNECT home_0.netscape.com:443 HTTP/1.0\r\nUser-agent: Mozilla/1.1N\r\nProxy-authorization: basic aGVsbG86d29ybGQ=\r\n\r\n") {
            $0.method = .connect; $0.target = "home_0.netscape.com:443"; $0.version = .http10; $0.keepAlive = false; $0.host = nil
        },
        // llhttp content-length.md
        Accepted("llhttp: Content-Length with zeroes", "PUT /url HTTP/1.1\r\nHost: a\r\nContent-Length: 003\r\n\r\n", rest: "abc") {
            $0.method = .put; $0.target = "/url"; $0.framing = .contentLength(3)
        },
        Accepted("llhttp: Content-Length with follow-up headers",
                 "PUT /url HTTP/1.1\r\nHost: a\r\nContent-Length: 003\r\nOhai: world\r\n\r\n", rest: "abc") {
            $0.method = .put; $0.target = "/url"; $0.framing = .contentLength(3)
        },
        Accepted("llhttp: funky Content-Length with body",
                 "GET /get_funky_content_length_body_hello HTTP/1.0\r\nconTENT-Length: 5\r\n\r\n", rest: "HELLO") {
            $0.target = "/get_funky_content_length_body_hello"; $0.version = .http10; $0.keepAlive = false; $0.host = nil
            $0.framing = .contentLength(5)
        },
        Accepted("llhttp: spaces around Content-Length", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length:  42 \r\n\r\n") {
            $0.method = .post; $0.framing = .contentLength(42)
        },
        // llhttp transfer-encoding.md
        Accepted("llhttp: chunked sets the framing", "PUT /url HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n") {
            $0.method = .put; $0.target = "/url"; $0.framing = .chunked
        },
        Accepted("llhttp: POST with chunked",
                 "POST /post_chunked_all_your_base HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n",
                 rest: "1e\r\nall your base are belong to us\r\n0\r\n\r\n") {
            $0.method = .post; $0.target = "/post_chunked_all_your_base"; $0.framing = .chunked
        },
        Accepted("llhttp: lowercase Transfer-encoding name",
                 "POST /chunked_w_unicorns_after_length HTTP/1.1\r\nHost: localhost\r\nTransfer-encoding: chunked\r\n\r\n") {
            $0.method = .post; $0.target = "/chunked_w_unicorns_after_length"; $0.host = "localhost"; $0.framing = .chunked
        },
        // llhttp connection.md
        Accepted("llhttp: keep-alive", "PUT /url HTTP/1.1\r\nHost: a\r\nConnection: keep-alive\r\n\r\n") {
            $0.method = .put; $0.target = "/url"
        },
        Accepted("llhttp: HTTP/1.0 without keep-alive ends the connection",
                 "PUT /url HTTP/1.0\r\n\r\n", rest: "PUT /url HTTP/1.1\r\n\r\n") {
            $0.method = .put; $0.target = "/url"; $0.version = .http10; $0.keepAlive = false; $0.host = nil
        },
        Accepted("llhttp: HTTP/1.0 with Content-Length 0",
                 "PUT /url HTTP/1.0\r\nContent-Length: 0\r\n\r\n", rest: "PUT /url HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n") {
            $0.method = .put; $0.target = "/url"; $0.version = .http10; $0.keepAlive = false; $0.host = nil
        },
        Accepted("llhttp: close", "PUT /url HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n") {
            $0.method = .put; $0.target = "/url"; $0.keepAlive = false
        },
        Accepted("llhttp: CRLF between requests, explicit close",
                 "POST / HTTP/1.1\r\nHost: www.example.com\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 4\r\nConnection: close\r\n\r\n",
                 rest: "q=42\r\n\r\nGET / HTTP/1.1\r\n") {
            $0.method = .post; $0.host = "www.example.com"; $0.framing = .contentLength(4); $0.keepAlive = false
        },
        Accepted("llhttp: multiple Connection tokens",
                 "PUT /url HTTP/1.1\r\nHost: a\r\nConnection: close, token, upgrade, token, keep-alive\r\n\r\n") {
            $0.method = .put; $0.target = "/url"; $0.keepAlive = false; $0.connectionTokens = ["token", "token"]
        },
        Accepted("llhttp: keep-alive and upgrade tokens with an Upgrade field",
                 "GET /demo HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, upgrade\r\nUpgrade: WebSocket\r\n\r\n", rest: "Hot diggity dogg") {
            $0.target = "/demo"; $0.upgrade = true
        },
        Accepted("llhttp: upgrade", "PUT /url HTTP/1.1\r\nHost: a\r\nConnection: upgrade\r\nUpgrade: ws\r\n\r\n") {
            $0.method = .put; $0.target = "/url"; $0.upgrade = true
        },
        Accepted("llhttp: upgrade with a body",
                 "PUT /url HTTP/1.1\r\nHost: a\r\nConnection: upgrade\r\nContent-Length: 4\r\nUpgrade: ws\r\n\r\n", rest: "abcdefgh") {
            $0.method = .put; $0.target = "/url"; $0.upgrade = true; $0.framing = .contentLength(4)
        },
        Accepted("llhttp: upgrade GET request",
                 "GET /demo HTTP/1.1\r\nHost: example.com\r\nConnection: Upgrade\r\nSec-WebSocket-Key2: 12998 5 Y3 1  .P00\r\n"
                 + "Sec-WebSocket-Protocol: sample\r\nUpgrade: WebSocket\r\nSec-WebSocket-Key1: 4 @1  46546xW%0l 1 5\r\n"
                 + "Origin: http://example.com\r\n\r\n", rest: "Hot diggity dogg") {
            $0.target = "/demo"; $0.host = "example.com"; $0.upgrade = true
            $0.fields = ["Host: example.com", "Connection: Upgrade", "Sec-WebSocket-Key2: 12998 5 Y3 1  .P00",
                         "Sec-WebSocket-Protocol: sample", "Upgrade: WebSocket", "Sec-WebSocket-Key1: 4 @1  46546xW%0l 1 5",
                         "Origin: http://example.com"]
        },
        Accepted("llhttp: upgrade POST request",
                 "POST /demo HTTP/1.1\r\nHost: example.com\r\nConnection: Upgrade\r\nUpgrade: HTTP/2.0\r\nContent-Length: 15\r\n\r\n",
                 rest: "sweet post bodyHot diggity dogg") {
            $0.method = .post; $0.target = "/demo"; $0.host = "example.com"; $0.upgrade = true; $0.framing = .contentLength(15)
        },

        // Our own rules.
        Accepted("HTTP/1.0 keep-alive keeps the connection", "GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n") {
            $0.version = .http10; $0.host = nil
        },
        Accepted("Connection options are case-insensitive", "GET / HTTP/1.1\r\nHost: a\r\nConnection: KEEP-ALIVE, CLOSE\r\n\r\n") {
            $0.keepAlive = false
        },
        Accepted("Connection options may span fields and include empty elements",
                 "GET / HTTP/1.1\r\nHost: a\r\nConnection: , X-Foo ,\r\nConnection: x-bar\r\n\r\n") {
            $0.connectionTokens = ["X-Foo", "x-bar"]
        },
        Accepted("Expect 100-continue is recorded", "POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-Continue\r\nContent-Length: 1\r\n\r\n") {
            $0.method = .post; $0.expectContinue = true; $0.framing = .contentLength(1)
        },
        Accepted("Expect 100-continue is ignored on HTTP/1.0", "POST / HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\n") {
            $0.method = .post; $0.version = .http10; $0.keepAlive = false; $0.host = nil; $0.framing = .contentLength(1)
        },
        Accepted("an empty Expect expects nothing", "GET / HTTP/1.1\r\nHost: a\r\nExpect:\r\n\r\n") { _ in },
        Accepted("Upgrade is ignored on HTTP/1.0", "GET / HTTP/1.0\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n") {
            $0.version = .http10; $0.keepAlive = false; $0.host = nil
        },
        Accepted("an Upgrade field without the upgrade option is no upgrade", "GET / HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\n\r\n") { _ in },
        Accepted("the upgrade option without an Upgrade field is no upgrade", "GET / HTTP/1.1\r\nHost: a\r\nConnection: upgrade\r\n\r\n") { _ in },
        Accepted("identical Content-Length values in a list collapse", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 5,005\r\n\r\n") {
            $0.method = .post; $0.framing = .contentLength(5)
        },
        Accepted("identical Content-Length fields collapse", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n") {
            $0.method = .post; $0.framing = .contentLength(5)
        },
        Accepted("Content-Length 0 means no body", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n") { $0.method = .post },
        Accepted("the largest Content-Length is accepted", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 9223372036854775807\r\n\r\n") {
            $0.method = .post; $0.framing = .contentLength(9_223_372_036_854_775_807)
        },
        Accepted("chunked is case-insensitive", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: Chunked\r\n\r\n") {
            $0.method = .post; $0.framing = .chunked
        },
        Accepted("empty Transfer-Encoding list elements are ignored", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: , chunked ,\r\n\r\n") {
            $0.method = .post; $0.framing = .chunked
        },
        Accepted("absolute-form https with port, path and query",
                 "GET HTTPS://Example.com:8443/p/q?x=1&y HTTP/1.1\r\nHost: Example.com:8443\r\n\r\n") {
            $0.target = "HTTPS://Example.com:8443/p/q?x=1&y"; $0.authority = "Example.com:8443"; $0.path = "/p/q?x=1&y"
            $0.host = "Example.com:8443"
        },
        Accepted("absolute-form with an IPv6 literal", "GET http://[::1]:8080/ HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n") {
            $0.target = "http://[::1]:8080/"; $0.authority = "[::1]:8080"; $0.path = "/"; $0.host = "[::1]:8080"
        },
        Accepted("absolute-form with a percent-encoded host", "GET http://a%2Db.example/ HTTP/1.1\r\nHost: a\r\n\r\n") {
            $0.target = "http://a%2Db.example/"; $0.authority = "a%2Db.example"; $0.path = "/"
        },
        Accepted("asterisk-form with OPTIONS", "OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n") { $0.method = .options; $0.target = "*" },
        Accepted("an empty Host value is allowed", "GET / HTTP/1.1\r\nHost:\r\n\r\n") { $0.host = "" },
        Accepted("every visible ASCII byte but # is allowed in the target",
                 "GET /!$&'()*+,;=:@-._~%20?<>[]\\^`{|}\"/ HTTP/1.1\r\nHost: a\r\n\r\n") {
            $0.target = "/!$&'()*+,;=:@-._~%20?<>[]\\^`{|}\"/"
        },
        Accepted("OWS around a value is trimmed, inner whitespace kept", "GET / HTTP/1.1\r\nHost: a\r\nX: \t a \t b \t \r\nY:\r\n\r\n") {
            $0.fields = ["Host: a", "X: a \t b", "Y: "]
        },
        Accepted("four leading empty lines are skipped", "\r\n\r\n\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n") { _ in },
        Accepted("HTTP/1.0 needs no Host", "GET / HTTP/1.0\r\n\r\n") { $0.version = .http10; $0.keepAlive = false; $0.host = nil },
    ]

    @Test(arguments: accepted)
    func acceptsTheValidRequest(_ c: Accepted) {
        var head = RequestHead()
        let result = c.bytes.withUnsafeBytes { RequestParser().parseHead($0, into: &head) }
        #expect(result == .complete(headLength: c.bytes.count - c.rest))
        guard case .complete = result else { return }
        let text = { (r: ByteRange) in Self.text(c.bytes, r) }
        #expect(head.method == c.method)
        if let name = c.methodName { #expect(text(head.methodRange) == name) }
        #expect(text(head.target) == c.target)
        #expect(text(head.path) == (c.path ?? c.target))
        #expect(head.authority.map(text) == c.authority)
        #expect(head.version == c.version)
        #expect(head.framing == c.framing)
        #expect(head.keepAlive == c.keepAlive)
        #expect(head.expectContinue == c.expectContinue)
        #expect(head.upgrade == c.upgrade)
        #expect(head.hostIndex.map { text(head.headers[$0].value) } == c.host)
        #expect(head.connectionTokens.map(text) == c.connectionTokens)
        if let fields = c.fields {
            #expect(head.headers.map { text($0.name) + ": " + text($0.value) } == fields)
        }
    }

    // MARK: Refused requests

    struct Refused: Sendable, CustomTestStringConvertible {
        let name: String
        let bytes: [UInt8]
        let status: Int
        var testDescription: String { "\(name) → \(status)" }

        init(_ name: String, _ text: String, _ status: Int) {
            self.init(name, Array(text.utf8), status)
        }

        init(_ name: String, _ bytes: [UInt8], _ status: Int) {
            self.name = name
            self.bytes = bytes
            self.status = status
        }
    }

    static func withByte(_ before: String, _ byte: UInt8, _ after: String) -> [UInt8] {
        Array(before.utf8) + [byte] + Array(after.utf8)
    }

    static let refused: [Refused] = [
        // llhttp invalid.md
        Refused("llhttp: ICE protocol", "GET /music/sweet/music ICE/1.0\r\nHost: example.com\r\n\r\n", 400),
        Refused("llhttp: ICE protocol, but not really", "GET /music/sweet/music IHTTP/1.0\r\nHost: example.com\r\n\r\n", 400),
        Refused("llhttp: RTSP protocol", "PUT /music/sweet/music RTSP/1.0\r\nHost: example.com\r\n\r\n", 400),
        Refused("llhttp: headers separated by CR", "GET / HTTP/1.1\r\nFoo: 1\rBar: 2\r\n\r\n", 400),
        Refused("llhttp: headers separated by LF",
                "POST / HTTP/1.1\r\nHost: localhost:5000\r\nx:x\nTransfer-Encoding: chunked\r\n\r\n1\r\nA\r\n0\r\n\r\n", 400),
        Refused("llhttp: headers separated by dummy characters",
                "GET / HTTP/1.1\r\nConnection: close\r\nHost: a\r\n\rZGET /evil: HTTP/1.1\r\nHost: a\r\n\r\n", 400),
        Refused("llhttp: empty headers separated by CR",
                "POST / HTTP/1.1\r\nConnection: Close\r\nHost: localhost:5000\r\nx:\rTransfer-Encoding: chunked\r\n\r\n1\r\nA\r\n0\r\n\r\n", 400),
        Refused("llhttp: empty headers separated by LF",
                "POST / HTTP/1.1\r\nHost: localhost:5000\r\nx:\nTransfer-Encoding: chunked\r\n\r\n1\r\nA\r\n0\r\n\r\n", 400),
        Refused("llhttp: invalid header token #1", "GET / HTTP/1.1\r\nFo@: Failure\r\n\r\n", 400),
        Refused("llhttp: invalid header token #2", withByte("GET / HTTP/1.1\r\nFoo", 0x01, "\test: Bar\r\n\r\n"), 400),
        Refused("llhttp: invalid header token #3", "GET / HTTP/1.1\r\n: Bar\r\n\r\n", 400),
        Refused("llhttp: illegal header field name line folding", "GET / HTTP/1.1\r\nname\r\n : value\r\n\r\n", 400),
        Refused("llhttp: corrupted Connection header",
                Array("GET / HTTP/1.1\r\nHost: www.example.com\r\nConnection\r".utf8) + [0x1B, 0x35, 0xD5]
                    + Array("eep-Alive\r\nAccept-Encoding: gzip\r\n\r\n".utf8), 400),
        Refused("llhttp: corrupted header name",
                Array("GET / HTTP/1.1\r\nHost: www.example.com\r\nX-Some-Header\r".utf8) + [0x1B, 0x35, 0xD5]
                    + Array("eep-Alive\r\nAccept-Encoding: gzip\r\n\r\n".utf8), 400),
        Refused("llhttp: missing CR between headers",
                "GET / HTTP/1.1\r\nHost: localhost\r\nDummy: x\nContent-Length: 23\r\n\r\nGET / HTTP/1.1\r\nDummy: GET /admin HTTP/1.1\r\nHost: localhost\r\n\r\n", 400),
        Refused("llhttp: invalid HTTP version 5.6", "GET / HTTP/5.6\r\nHost: a\r\n\r\n", 505),
        Refused("llhttp: invalid space after start line", "GET / HTTP/1.1\r\n Host: foo\r\n\r\n", 400),
        Refused("llhttp: only LFs present",
                "POST / HTTP/1.1\nTransfer-Encoding: chunked\nTrailer: Baz\r\nFoo: abc\nBar: def\n\n1\nA\n0\n\nBaz: ghi\n\n", 400),
        Refused("llhttp: spaces before headers",
                "POST /hello HTTP/1.1\r\nHost: localhost\r\nFoo: bar\r\n Content-Length: 38\r\n\r\nGET /bye HTTP/1.1\r\nHost: localhost\r\n\r\n", 400),
        // llhttp content-length.md
        Refused("llhttp: Content-Length overflow", "PUT /url HTTP/1.1\r\nHost: a\r\nContent-Length: 1000000000000000000000\r\n\r\n", 400),
        Refused("llhttp: duplicate Content-Length", "PUT /url HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400),
        Refused("llhttp: Content-Length and Transfer-Encoding identity",
                "PUT /url HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nTransfer-Encoding: identity\r\n\r\n", 400),
        Refused("llhttp: Content-Length and Transfer-Encoding chunked",
                "PUT /url HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
        Refused("llhttp: spaces in Content-Length #2", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 4 2\r\n\r\n", 400),
        Refused("llhttp: spaces in Content-Length #3", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 13 37\r\n\r\n", 400),
        Refused("llhttp: empty Content-Length", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length:\r\n\r\n", 400),
        Refused("llhttp: Content-Length with CR instead of dash", "PUT /url HTTP/1.1\r\nHost: a\r\nContent\rLength: 003\r\n\r\nabc", 400),
        // llhttp transfer-encoding.md
        Refused("llhttp: empty Transfer-Encoding with Content-Length",
                "POST /first HTTP/1.1\r\nHost: a\r\nTransfer-Encoding:\r\nContent-Length: 5\r\n\r\nhello", 400),
        Refused("llhttp: pigeons", "PUT /url HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: pigeons\r\n\r\n", 400),
        Refused("llhttp: POST with Transfer-Encoding identity and Content-Length",
                "POST /post_identity_body_world?q=search HTTP/1.1\r\nHost: a\r\nAccept: */*\r\nTransfer-Encoding: identity\r\nContent-Length: 5\r\n\r\nWorld", 400),
        Refused("llhttp: POST with empty Transfer-Encodings and Content-Length",
                "POST / HTTP/1.1\r\nHost: foo\r\nContent-Length: 10\r\nTransfer-Encoding:\r\nTransfer-Encoding:\r\nTransfer-Encoding:\r\n\r\n2\r\nAA\r\n0\r\n", 400),
        Refused("llhttp: chunked before other transfer codings",
                "POST /post_identity_body_world?q=search HTTP/1.1\r\nHost: a\r\nAccept: */*\r\nTransfer-Encoding: chunked, deflate\r\n\r\nWorld", 400),
        Refused("llhttp: chunked and a second Transfer-Encoding field",
                "POST /post_identity_body_world?q=search HTTP/1.1\r\nHost: a\r\nAccept: */*\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: deflate\r\n\r\nWorld", 400),
        Refused("llhttp: chunked as last coding after deflate (not implemented here)",
                "POST /post_identity_body_world?q=search HTTP/1.1\r\nHost: a\r\nAccept: */*\r\nTransfer-Encoding: deflate, chunked\r\n\r\n5\r\nWorld\r\n0\r\n\r\n", 501),
        Refused("llhttp: chunked as last coding in a second field (not implemented here)",
                "POST /post_identity_body_world?q=search HTTP/1.1\r\nHost: a\r\nAccept: */*\r\nTransfer-Encoding: deflate\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nWorld\r\n0\r\n\r\n", 501),
        Refused("llhttp: chunkedchunked",
                "POST /post_identity_body_world?q=search HTTP/1.1\r\nHost: a\r\nAccept: */*\r\nTransfer-Encoding: chunkedchunked\r\n\r\n5\r\nWorld\r\n0\r\n\r\n", 400),
        Refused("llhttp: obs-fold after the chunked value",
                "PUT /url HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n  abc\r\n\r\n5\r\nWorld\r\n0\r\n\r\n", 400),
        // llhttp connection.md
        Refused("llhttp: Connection tokens with folding",
                "GET /demo HTTP/1.1\r\nHost: example.com\r\nConnection: Something,\r\n Upgrade, ,Keep-Alive\r\nUpgrade: WebSocket\r\n\r\n", 400),
        Refused("llhttp: Connection tokens with folding, LWS and CRLF",
                "GET /demo HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, \r\n upgrade\r\nUpgrade: WebSocket\r\n\r\nHot diggity dogg", 400),
        // llhttp uri.md
        Refused("llhttp: UTF-8 in the path", "GET /δ¶/δt/pope?q=1#narf HTTP/1.1\r\nHost: github.com\r\n\r\n", 400),
        Refused("llhttp: fragment in URI", "GET /forums/1/topics/2375?page=1#posts-17408 HTTP/1.1\r\nHost: a\r\n\r\n", 400),
        Refused("llhttp: host:port and basic auth (userinfo)", "GET http://a%12:b!&*$@hypnotoad.org:1234/toto HTTP/1.1\r\nHost: a\r\n\r\n", 400),
        Refused("llhttp: space in URI", "GET /foo bar/ HTTP/1.1\r\nHost: a\r\n\r\n", 400),
        // llhttp sample.md
        Refused("llhttp: no HTTP version (HTTP/0.9)", "GET /\r\n\r\n", 505),
        Refused("llhttp: line folding in header value with CRLF",
                "GET / HTTP/1.1\r\nHost: a\r\nLine1:   abc\r\n\tdef\r\n ghi\r\n\t\tjkl\r\n  mno \r\n\t \tqrs\r\nLine2: \t line2\t\r\n\r\n", 400),
        Refused("llhttp: line folding in header value with LF", "GET / HTTP/1.1\nLine1:   abc\n\tdef\n ghi\n\n", 400),
        Refused("llhttp: X-SSL-Nonsense (folded certificate)",
                "GET / HTTP/1.1\r\nHost: a\r\nX-SSL-Nonsense:   -----BEGIN CERTIFICATE-----\r\n\tMIIFbTCCBFWgAwIBAgICH4cwDQYJKoZIhvcNAQEFBQAwcDELMAkGA1UEBhMCVUsx\r\n\t-----END CERTIFICATE-----\r\n\r\n", 400),
        // llhttp method.md (asterisk-form is only for OPTIONS here)
        Refused("llhttp: M-SEARCH *", "M-SEARCH * HTTP/1.1\r\nHOST: 239.255.255.250:1900\r\nMAN: \"ssdp:discover\"\r\nST: \"ssdp:all\"\r\n\r\n", 400),
        // llhttp lenient-headers.md, strict variant
        Refused("llhttp: form feed in a value", "GET /url HTTP/1.1\r\nHost: a\r\nHeader1: \u{0C}\r\n\r\n", 400),

        // Request line
        Refused("two spaces after the method", "GET  / HTTP/1.1\r\nHost: a\r\n\r\n", 400),
        Refused("two spaces before the version", "GET /  HTTP/1.1\r\nHost: a\r\n\r\n", 400),
        Refused("a tab between method and target", "GET\t/ HTTP/1.1\r\nHost: a\r\n\r\n", 400),
        Refused("a space before the method", " GET / HTTP/1.1\r\nHost: a\r\n\r\n", 400),
        Refused("a space after the version", "GET / HTTP/1.1 \r\nHost: a\r\n\r\n", 400),
        Refused("a non-token method", "G(T / HTTP/1.1\r\nHost: a\r\n\r\n", 400),
        Refused("a method with a non-ASCII byte", withByte("G", 0xC9, "T / HTTP/1.1\r\nHost: a\r\n\r\n"), 400),
        Refused("lowercase http in the version", "GET / http/1.1\r\nHost: a\r\n\r\n", 400),
        Refused("garbage after the version", "GET / HTTP/1.1x\r\nHost: a\r\n\r\n", 400),
        Refused("a three-digit version", "GET / HTTP/1.10\r\nHost: a\r\n\r\n", 400),
        Refused("a two-digit major version", "GET / HTTP/11.1\r\nHost: a\r\n\r\n", 400),
        Refused("a truncated version", "GET / HTTP/1\r\nHost: a\r\n\r\n", 400),
        Refused("a version without a dot", "GET / HTTP/1-1\r\nHost: a\r\n\r\n", 400),
        Refused("HTTP/2.0", "GET / HTTP/2.0\r\nHost: a\r\n\r\n", 505),
        Refused("HTTP/1.2", "GET / HTTP/1.2\r\nHost: a\r\n\r\n", 505),
        Refused("HTTP/0.9 spelt out", "GET / HTTP/0.9\r\n\r\n", 505),
        Refused("an empty version", "GET / \r\nHost: a\r\n\r\n", 400),
        Refused("a bare CR in the request line", "GET / HTTP/1.1\rHost: a\r\n\r\n", 400),
        Refused("a bare LF ending the request line", "GET / HTTP/1.1\nHost: a\r\n\r\n", 400),
        Refused("a bare LF in the target", "GET /\n HTTP/1.1\r\nHost: a\r\n\r\n", 400),
        Refused("a bare LF before the request line", "\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", 400),
        Refused("a bare CR before the request line", "\rGET / HTTP/1.1\r\nHost: a\r\n\r\n", 400),
        Refused("five leading empty lines", "\r\n\r\n\r\n\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", 400),
        // Request target
        Refused("a target of another form", "GET x HTTP/1.1\r\nHost: a\r\n\r\n", 400),
        Refused("an ftp absolute-form target", "GET ftp://host/ HTTP/1.1\r\nHost: a\r\n\r\n", 400),
        Refused("absolute-form with an empty authority", "GET http:///p HTTP/1.1\r\nHost: a\r\n\r\n", 400),
        Refused("absolute-form with an empty host", "GET http://:80/ HTTP/1.1\r\nHost: a\r\n\r\n", 400),
        Refused("absolute-form with a bad port", "GET http://host:8x/ HTTP/1.1\r\nHost: a\r\n\r\n", 400),
        Refused("absolute-form with a bad percent-encoding", "GET http://a%zz/ HTTP/1.1\r\nHost: a\r\n\r\n", 400),
        Refused("absolute-form with an unclosed IP literal", "GET http://[::1/ HTTP/1.1\r\nHost: a\r\n\r\n", 400),
        Refused("the scheme alone", "GET http:// HTTP/1.1\r\nHost: a\r\n\r\n", 400),
        Refused("asterisk-form with GET", "GET * HTTP/1.1\r\nHost: a\r\n\r\n", 400),
        Refused("asterisk followed by more", "OPTIONS *x HTTP/1.1\r\nHost: a\r\n\r\n", 400),
        Refused("authority-form without CONNECT", "GET example.com:80 HTTP/1.1\r\nHost: a\r\n\r\n", 400),
        Refused("CONNECT with origin-form", "CONNECT /path HTTP/1.1\r\nHost: a\r\n\r\n", 400),
        Refused("CONNECT without a port", "CONNECT example.com HTTP/1.1\r\nHost: a\r\n\r\n", 400),
        Refused("CONNECT with an empty port", "CONNECT example.com: HTTP/1.1\r\nHost: a\r\n\r\n", 400),
        Refused("CONNECT with absolute-form", "CONNECT http://example.com:443 HTTP/1.1\r\nHost: a\r\n\r\n", 400),
        Refused("CONNECT with userinfo", "CONNECT u@example.com:443 HTTP/1.1\r\nHost: a\r\n\r\n", 400),
        Refused("a NUL in the target", withByte("GET /a", 0x00, "b HTTP/1.1\r\nHost: a\r\n\r\n"), 400),
        Refused("a control byte in the target", withByte("GET /a", 0x01, "b HTTP/1.1\r\nHost: a\r\n\r\n"), 400),
        Refused("a tab in the target", "GET /a\tb HTTP/1.1\r\nHost: a\r\n\r\n", 400),
        Refused("DEL in the target", withByte("GET /a", 0x7F, "b HTTP/1.1\r\nHost: a\r\n\r\n"), 400),
        Refused("byte 0x80 in the target", withByte("GET /a", 0x80, "b HTTP/1.1\r\nHost: a\r\n\r\n"), 400),
        Refused("byte 0xFF in the target", withByte("GET /a", 0xFF, "b HTTP/1.1\r\nHost: a\r\n\r\n"), 400),
        Refused("a fragment in an absolute-form target", "GET http://a/#x HTTP/1.1\r\nHost: a\r\n\r\n", 400),
        // Field lines
        Refused("a space before the colon", "GET / HTTP/1.1\r\nHost: a\r\nFoo : bar\r\n\r\n", 400),
        Refused("a tab before the colon", "GET / HTTP/1.1\r\nHost: a\r\nFoo\t: bar\r\n\r\n", 400),
        Refused("a tab at the start of the first field line", "GET / HTTP/1.1\r\n\tHost: a\r\n\r\n", 400),
        Refused("a field line without a colon", "GET / HTTP/1.1\r\nHost: a\r\nFoo\r\n\r\n", 400),
        Refused("a non-ASCII byte in a field name", withByte("GET / HTTP/1.1\r\nHost: a\r\nF", 0xE9, "o: bar\r\n\r\n"), 400),
        Refused("a NUL in a field value", withByte("GET / HTTP/1.1\r\nHost: a\r\nFoo: b", 0x00, "r\r\n\r\n"), 400),
        Refused("a control byte in a field value", withByte("GET / HTTP/1.1\r\nHost: a\r\nFoo: b", 0x01, "r\r\n\r\n"), 400),
        Refused("DEL in a field value", withByte("GET / HTTP/1.1\r\nHost: a\r\nFoo: b", 0x7F, "r\r\n\r\n"), 400),
        Refused("a bare CR inside a field value", "GET / HTTP/1.1\r\nHost: a\r\nFoo: a\rb\r\n\r\n", 400),
        Refused("a field line ended by a bare LF", "GET / HTTP/1.1\r\nHost: a\r\nFoo: bar\n\r\n", 400),
        Refused("the head ended by a bare LF", "GET / HTTP/1.1\r\nHost: a\r\n\n", 400),
        Refused("the head ended by CR CR LF", "GET / HTTP/1.1\r\nHost: a\r\n\r\r\n", 400),
        // Host
        Refused("HTTP/1.1 without Host", "GET / HTTP/1.1\r\n\r\n", 400),
        Refused("two Host fields", "GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n", 400),
        Refused("two Host fields on HTTP/1.0", "GET / HTTP/1.0\r\nhost: a\r\nHOST: b\r\n\r\n", 400),
        Refused("a Host with a space", "GET / HTTP/1.1\r\nHost: a b\r\n\r\n", 400),
        Refused("a Host with userinfo", "GET / HTTP/1.1\r\nHost: user@a\r\n\r\n", 400),
        Refused("a Host with a path", "GET / HTTP/1.1\r\nHost: a/b\r\n\r\n", 400),
        Refused("a Host with a bad port", "GET / HTTP/1.1\r\nHost: a:b\r\n\r\n", 400),
        // Content-Length
        Refused("a Content-Length with a sign", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +5\r\n\r\n", 400),
        Refused("a negative Content-Length", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: -5\r\n\r\n", 400),
        Refused("a hex Content-Length", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0x10\r\n\r\n", 400),
        Refused("different Content-Length values in a list", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 6\r\n\r\n", 400),
        Refused("an empty element in a Content-Length list", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5,,5\r\n\r\n", 400),
        Refused("a trailing comma in Content-Length", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5,\r\n\r\n", 400),
        Refused("a Content-Length above 2^63-1", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 9223372036854775808\r\n\r\n", 400),
        Refused("a Content-Length above 2^64-1", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 18446744073709551616\r\n\r\n", 400),
        // Transfer-Encoding
        Refused("Transfer-Encoding on HTTP/1.0", "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
        Refused("Transfer-Encoding before Content-Length", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n", 400),
        Refused("gzip alone", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n", 400),
        Refused("identity alone", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: identity\r\n\r\n", 400),
        Refused("chunked twice in a list", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, chunked\r\n\r\n", 400),
        Refused("chunked twice in two fields", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
        Refused("chunked with a parameter", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked;q=1\r\n\r\n", 400),
        Refused("a quoted coding", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: \"chunked\"\r\n\r\n", 400),
        Refused("a coding with a space inside", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chun ked\r\n\r\n", 400),
        Refused("a malformed coding parameter", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip;, chunked\r\n\r\n", 400),
        Refused("gzip before chunked", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501),
        Refused("identity before chunked", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: identity, chunked\r\n\r\n", 501),
        Refused("compress before chunked", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: compress,chunked\r\n\r\n", 501),
        Refused("an unknown coding before chunked", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: x-custom;level=\"9, 8\" , chunked\r\n\r\n", 501),
        // Connection and Expect
        Refused("a Connection option that is not a token", "GET / HTTP/1.1\r\nHost: a\r\nConnection: close; x\r\n\r\n", 400),
        Refused("a quoted Connection option", "GET / HTTP/1.1\r\nHost: a\r\nConnection: \"close\"\r\n\r\n", 400),
        Refused("an unknown expectation", "POST / HTTP/1.1\r\nHost: a\r\nExpect: something\r\n\r\n", 417),
        Refused("an expectation close to 100-continue", "POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue-x\r\n\r\n", 417),
        Refused("100-continue with another expectation", "POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue, foo\r\n\r\n", 417),
        Refused("a missing Host wins over an expectation", "POST / HTTP/1.1\r\nExpect: foo\r\n\r\n", 400),
    ]

    @Test(arguments: refused)
    func refusesTheInvalidRequest(_ c: Refused) {
        var head = RequestHead()
        let result = c.bytes.withUnsafeBytes { RequestParser().parseHead($0, into: &head) }
        guard case .error(let error) = result else {
            Issue.record("expected \(c.status), got \(result)")
            return
        }
        #expect(error.status == c.status, "\(error.reason)")
    }

    // MARK: Incremental input

    static let splitSamples: [String] = [
        "GET / HTTP/1.1\r\nHost: a\r\n\r\n",
        "\r\n\r\nPOST /upload?x=1 HTTP/1.1\r\nHost: example.com:8080\r\nContent-Length: 3\r\nConnection: keep-alive, X-Hop\r\n\r\nabc",
        "PUT http://[::1]:9/p HTTP/1.1\r\nHost: [::1]:9\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\nX-Empty:\r\n\r\n",
        "CONNECT example.com:443 HTTP/1.0\r\n\r\n",
        "OPTIONS * HTTP/1.1\r\nHost: a\r\nConnection: upgrade\r\nUpgrade: h2c\r\nX:  \t v \t \r\n\r\n",
    ]

    @Test(arguments: splitSamples)
    func everyPrefixOfAValidRequestIsIncomplete(_ sample: String) {
        let bytes = Array(sample.utf8)
        var head = RequestHead()
        let full = bytes.withUnsafeBytes { RequestParser().parseHead($0, into: &head) }
        guard case .complete(let length) = full else {
            Issue.record("sample did not parse: \(full)")
            return
        }
        for cut in 0..<length {
            let result = bytes.withUnsafeBytes { RequestParser().parseHead(UnsafeRawBufferPointer(rebasing: $0[0..<cut]), into: &head) }
            #expect(result == .incomplete, "prefix of \(cut) bytes")
        }
    }

    struct Early: Sendable, CustomTestStringConvertible {
        let prefix: String
        let status: Int
        var testDescription: String { prefix.debugDescription }
        init(_ prefix: String, _ status: Int) { self.prefix = prefix; self.status = status }
    }

    /// None of these holds a complete head: each error must be proven by the bytes seen so far.
    static let early: [Early] = [
        Early("G@", 400),
        Early("GET  ", 400),
        Early("GET /a#", 400),
        Early("GET /a\u{7F}", 400),
        Early("GET / HTTP/1.1x", 400),
        Early("GET / http", 400),
        Early("GET / HTTP/1.1\n", 400),
        Early("GET / HTTP/1.1\r\n ", 400),
        Early("GET / HTTP/1.1\r\nFo o", 400),
        Early("GET / HTTP/1.1\r\nFoo: a\u{01}", 400),
        Early("GET / HTTP/1.1\r\nFoo: a\rb", 400),
        Early("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n", 400),
        Early("GET / HTTP/1.1\r\nContent-Length: x\r\n", 400),
        Early("GET / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n", 400),
        Early("GET / HTTP/1.1\r\nTransfer-Encoding: chunked, gzip\r\n", 400),
        Early("GET / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n", 400),
        Early("GET / HTTP/2.0\r\n", 505),
        Early("GET /\r\n", 505),
    ]

    @Test(arguments: early)
    func errorsAreReportedBeforeTheHeadIsComplete(_ c: Early) {
        var head = RequestHead()
        let result = Array(c.prefix.utf8).withUnsafeBytes { RequestParser().parseHead($0, into: &head) }
        #expect(result.status == c.status, "\(result)")
    }

    // MARK: Limits

    @Test func aRequestLineAtTheLimitIsAccepted() {
        var limits = HTTPLimits()
        limits.maxRequestLine = 64
        let line = "GET /" + String(repeating: "a", count: 64 - 14) + " HTTP/1.1"
        #expect(line.utf8.count == 64)
        #expect(parse(line + "\r\nHost: a\r\n\r\n", limits: limits) == .complete(headLength: 64 + 13))
    }

    @Test func aRequestLineOverTheLimitIsRefusedBeforeItsCRLF() {
        var limits = HTTPLimits()
        limits.maxRequestLine = 64
        let line = "GET /" + String(repeating: "a", count: 64 - 13) + " HTTP/1.1"
        #expect(parse(line, limits: limits).status == 414)
        #expect(parse(line + "\r\nHost: a\r\n\r\n", limits: limits).status == 414)
        let longTarget = "GET /" + String(repeating: "a", count: 100)
        #expect(parse(longTarget, limits: limits).status == 414)
        #expect(parse(String(repeating: "G", count: 65), limits: limits).status == 414)
    }

    @Test func aHeadAtTheByteLimitIsAccepted() {
        var limits = HTTPLimits()
        limits.maxHeadBytes = 100
        let base = "GET / HTTP/1.1\r\nHost: a\r\nX: \r\n\r\n"
        let head = "GET / HTTP/1.1\r\nHost: a\r\nX: " + String(repeating: "v", count: 100 - base.utf8.count) + "\r\n\r\n"
        #expect(head.utf8.count == 100)
        #expect(parse(head + "body", limits: limits) == .complete(headLength: 100))
    }

    @Test func aHeadOverTheByteLimitIs431EvenWithoutItsEnd() {
        var limits = HTTPLimits()
        limits.maxHeadBytes = 100
        let head = "GET / HTTP/1.1\r\nHost: a\r\nX: " + String(repeating: "v", count: 100)
        #expect(parse(head, limits: limits).status == 431)
        let exact = "GET / HTTP/1.1\r\nHost: a\r\nX: " + String(repeating: "v", count: 69) + "\r\n\r\n"
        #expect(exact.utf8.count == 101)
        #expect(parse(exact, limits: limits).status == 431)
        // Fewer bytes than the limit and no end: just incomplete.
        var prefix = RequestHead()
        let first100 = Array(head.utf8.prefix(100))
        #expect(first100.withUnsafeBytes { RequestParser(limits: limits).parseHead($0, into: &prefix) } == .incomplete)
    }

    @Test func tooManyFieldsIs431() {
        var limits = HTTPLimits()
        limits.maxHeaderCount = 3
        let three = "GET / HTTP/1.1\r\nHost: a\r\nB: 1\r\nC: 2\r\n"
        #expect(parse(three + "\r\n", limits: limits) == .complete(headLength: three.utf8.count + 2))
        #expect(parse(three + "D", limits: limits).status == 431)
        #expect(parse(three + "D: 3\r\n\r\n", limits: limits).status == 431)
    }

    // MARK: Reuse and pipelining

    @Test func parsingAgainResetsEveryField() {
        let first = Array(("POST http://example.com/p HTTP/1.1\r\nHost: example.com\r\nConnection: close, X-A\r\n"
                           + "Upgrade: ws\r\nConnection: upgrade\r\nExpect: 100-continue\r\nTransfer-Encoding: chunked\r\n\r\n").utf8)
        let second = Array("GET /x HTTP/1.0\r\n\r\n".utf8)
        var head = RequestHead()
        _ = first.withUnsafeBytes { RequestParser().parseHead($0, into: &head) }
        #expect(head.upgrade && head.expectContinue && head.authority != nil && !head.connectionTokens.isEmpty)
        let capacity = head.headers.capacity
        let result = second.withUnsafeBytes { RequestParser().parseHead($0, into: &head) }
        #expect(result == .complete(headLength: second.count))
        #expect(head.method == .get)
        #expect(head.methodRange == ByteRange(start: 0, count: 3))
        #expect(head.target == ByteRange(start: 4, count: 2))
        #expect(head.path == head.target)
        #expect(head.authority == nil)
        #expect(head.version == .http10)
        #expect(head.headers.isEmpty)
        #expect(head.headers.capacity == capacity)
        #expect(head.framing == .none)
        #expect(head.keepAlive == false)
        #expect(head.expectContinue == false)
        #expect(head.upgrade == false)
        #expect(head.hostIndex == nil)
        #expect(head.connectionTokens.isEmpty)
    }

    /// llhttp pipelining.md and connection.md: requests back to back, bodies and stray CRLFs between.
    @Test func pipelinedRequestsParseOneAfterAnother() {
        let stream = Array(("POST /aaa HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nAAA\r\n"
                            + "PUT /bbb HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\n\r\nBBBB\r\n"
                            + "PATCH /ccc HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nCCCC").utf8)
        var head = RequestHead()
        var offset = 0
        var seen: [(HTTPMethod, String)] = []
        for _ in 0..<3 {
            let result = stream.withUnsafeBytes { RequestParser().parseHead(UnsafeRawBufferPointer(rebasing: $0[offset...]), into: &head) }
            guard case .complete(let length) = result, case .contentLength(let n) = head.framing else {
                Issue.record("unexpected \(result) at \(offset)")
                return
            }
            let base = offset
            seen.append((head.method, Self.text(Array(stream[base...]), head.target)))
            offset += length + Int(n)
        }
        #expect(seen.map(\.0) == [.post, .put, .patch])
        #expect(seen.map(\.1) == ["/aaa", "/bbb", "/ccc"])
        // The last body is one byte short: the stream ends inside it.
        #expect(offset == stream.count + 1)
    }

    @Test func emptyLinesBeforeAPipelinedRequestCountInItsHeadLength() {
        // llhttp connection.md "CRLF between requests, implicit keep-alive": after the body comes
        // CRLF CRLF and the start of the next request.
        let next = Array("\r\n\r\nGET / HTTP/1.1\r\n".utf8)
        var head = RequestHead()
        #expect(next.withUnsafeBytes { RequestParser().parseHead($0, into: &head) } == .incomplete)
        let complete = next + Array("Host: a\r\n\r\n".utf8)
        #expect(complete.withUnsafeBytes { RequestParser().parseHead($0, into: &head) } == .complete(headLength: complete.count))
        #expect(head.target == ByteRange(start: 8, count: 1))
    }

    @Test(arguments: [("GET", HTTPMethod.get), ("HEAD", .head), ("POST", .post), ("PUT", .put), ("DELETE", .delete),
                      ("OPTIONS", .options), ("PATCH", .patch), ("CONNECT", .connect), ("TRACE", .trace),
                      ("get", .other), ("Post", .other), ("GETS", .other)])
    func methodsAreRecognisedCaseSensitively(_ name: String, _ method: HTTPMethod) {
        let target = method == .connect ? "a:1" : (method == .options ? "*" : "/")
        var head = RequestHead()
        let result = Array("\(name) \(target) HTTP/1.1\r\nHost: a\r\n\r\n".utf8).withUnsafeBytes { RequestParser().parseHead($0, into: &head) }
        #expect(result.isComplete)
        #expect(head.method == method)
    }

    // MARK: Helpers

    func parse(_ text: String, limits: HTTPLimits = HTTPLimits()) -> HeadParseResult {
        var head = RequestHead()
        return Array(text.utf8).withUnsafeBytes { RequestParser(limits: limits).parseHead($0, into: &head) }
    }

    static func text(_ bytes: [UInt8], _ range: ByteRange) -> String {
        String(decoding: bytes[range.start..<range.end], as: UTF8.self)
    }
}

extension HeadParseResult {
    /// The error status, or nil when there is none.
    var status: Int? {
        if case .error(let e) = self { return e.status }
        return nil
    }

    var isComplete: Bool {
        if case .complete = self { return true }
        return false
    }
}

// MARK: - The byte-level helpers under the parsers

@Suite struct ByteMatchingTests {
    @Test func tokenCharactersAreExactlyRFC9110Tchar() {
        let tchar = Set("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ".utf8)
        for b in 0...255 {
            #expect(ByteMatching.isTokenChar(UInt8(b)) == tchar.contains(UInt8(b)), "byte \(b)")
        }
    }

    @Test func fieldValueCharactersAreVisibleASCIIObsTextSpaceAndTab() {
        for b in 0...255 {
            let expected = b == 0x09 || (b >= 0x20 && b != 0x7F)
            #expect(ByteMatching.isFieldValueChar(UInt8(b)) == expected, "byte \(b)")
        }
    }

    @Test func regNameCharactersAreUnreservedAndSubDelims() {
        let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~!$&'()*+,;=".utf8)
        for b in 0...255 {
            #expect(ByteMatching.isRegNameChar(UInt8(b)) == allowed.contains(UInt8(b)), "byte \(b)")
        }
    }

    @Test(arguments: [("content-length", "Content-Length", true), ("content-length", "CONTENT-LENGTH", true),
                      ("content-length", "content-lengt", false), ("content-length", "content\rlength", false),
                      ("content-length", "content\u{0D}length", false), ("host", "HoSt", true), ("host", "hosT ", false),
                      ("100-continue", "100-CONTINUE", true), ("a-b", "a\u{0D}b", false), ("{", "[", false)])
    func caseInsensitiveComparisonFoldsOnlyLetters(_ literal: String, _ text: String, _ equal: Bool) {
        // StaticString cannot come from a parameter, so the literals are matched here.
        let bytes = Array(text.utf8)
        let range = ByteRange(start: 0, count: bytes.count)
        let result = bytes.withUnsafeBytes { buffer -> Bool in
            switch literal {
            case "content-length": return ByteMatching.equalsLowercase(buffer, range, "content-length")
            case "host": return ByteMatching.equalsLowercase(buffer, range, "host")
            case "100-continue": return ByteMatching.equalsLowercase(buffer, range, "100-continue")
            case "a-b": return ByteMatching.equalsLowercase(buffer, range, "a-b")
            default: return ByteMatching.equalsLowercase(buffer, range, "{")
            }
        }
        #expect(result == equal)
    }

    @Test func findsTheFirstCRLFCRLFLikeANaiveSearch() {
        var generator = SystemRandomNumberGenerator()
        let alphabet: [UInt8] = [0x0D, 0x0A, 0x41, 0x0D, 0x0A]
        for _ in 0..<2000 {
            let count = Int.random(in: 0..<80, using: &generator)
            let bytes = (0..<count).map { _ in alphabet.randomElement(using: &generator)! }
            let start = Int.random(in: 0...max(0, count), using: &generator)
            var naive: Int? = nil
            if count >= 4 {
                for i in start..<max(start, count - 3)
                where bytes[i] == 0x0D && bytes[i + 1] == 0x0A && bytes[i + 2] == 0x0D && bytes[i + 3] == 0x0A {
                    naive = i
                    break
                }
            }
            let found = bytes.withUnsafeBytes { ByteMatching.findCRLFCRLF($0, from: start) }
            #expect(found == naive, "\(bytes) from \(start)")
        }
    }

    @Test func scanningEightBytesAtATimeFindsWhatAByteLoopFinds() {
        var generator = SystemRandomNumberGenerator()
        // Bytes on both sides of every class boundary, obs-text included.
        let alphabet: [UInt8] = [0x00, 0x09, 0x0A, 0x0D, 0x1F, 0x20, 0x21, 0x22, 0x23, 0x24, 0x41, 0x7E, 0x7F, 0x80, 0xC3, 0xFF]
        for _ in 0..<5000 {
            let count = Int.random(in: 0..<48, using: &generator)
            // Mostly plain bytes, so that the eight-byte path runs, with a few specials.
            let bytes = (0..<count).map { _ in
                Int.random(in: 0..<6, using: &generator) == 0 ? alphabet.randomElement(using: &generator)! : UInt8(ascii: "a")
            }
            let start = Int.random(in: 0...count, using: &generator)
            let end = Int.random(in: start...count, using: &generator)
            let control = (start..<end).first { bytes[$0] < 0x20 || bytes[$0] == 0x7F } ?? end
            let nonTarget = (start..<end).first { bytes[$0] < 0x21 || bytes[$0] > 0x7E || bytes[$0] == 0x23 } ?? end
            bytes.withUnsafeBytes { buffer in
                #expect(ByteMatching.firstControlByte(buffer, from: start, end: end) == control, "\(bytes) \(start)..<\(end)")
                #expect(ByteMatching.firstNonTargetByte(buffer, from: start, end: end) == nonTarget, "\(bytes) \(start)..<\(end)")
            }
        }
    }

    @Test func findsCRLFCRLFInAnHTTPHead() {
        let bytes = Array("GET / HTTP/1.1\r\nHost: a\r\n\r\nbody\r\n\r\n".utf8)
        #expect(bytes.withUnsafeBytes { ByteMatching.findCRLFCRLF($0) } == 23)
        #expect(bytes.withUnsafeBytes { ByteMatching.findCRLFCRLF($0, from: 24) } == 31)
        #expect([UInt8]().withUnsafeBytes { ByteMatching.findCRLFCRLF($0) } == nil)
    }

    @Test(arguments: [("0", UInt64(0)), ("007", 7), ("9223372036854775807", 9_223_372_036_854_775_807),
                      ("00000000000000000000000000000042", 42), ("", nil), ("9223372036854775808", nil),
                      ("18446744073709551616", nil), ("+1", nil), ("-1", nil), ("1 ", nil), (" 1", nil), ("0x1", nil),
                      ("1,1", nil), ("١", nil)] as [(String, UInt64?)])
    func contentLengthIsDigitsOnlyAndBounded(_ text: String, _ value: UInt64?) {
        let bytes = Array(text.utf8)
        #expect(bytes.withUnsafeBytes { ByteMatching.parseContentLength($0, ByteRange(start: 0, count: bytes.count)) } == value)
    }
}
