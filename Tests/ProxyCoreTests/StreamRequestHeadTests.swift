import Testing
@testable import ProxyCore

/// An HTTP/2 request becomes the HTTP/1.1 bytes it stands for, and those are what the engine's
/// `RequestParser` accepts like any HTTP/1.1 request (the HTTP/2 path has no rules of its own).
@Suite struct StreamRequestHeadTests {
    static let limit = 36 * 1024

    func decoded(_ fields: [(String, String)], endStream: Bool, limit: Int = limit) -> (StreamRequestHead, String) {
        var request = StreamRequestHead()
        for (name, value) in fields {
            Array(name.utf8).withUnsafeBufferPointer { n in
                Array(value.utf8).withUnsafeBufferPointer { v in request.field(name: n, value: v, limit: limit) }
            }
        }
        var input = ByteBuffer()
        defer { input.free() }
        request.deliverHead(into: &input, endStream: endStream)
        return (request, String(decoding: input.readableBytes, as: UTF8.self))
    }

    static let get: [(String, String)] = [(":method", "GET"), (":scheme", "https"), (":authority", "example.com"), (":path", "/a?b=1")]

    @Test func aGetBecomesItsHTTP11HeadWithHostFromAuthorityAndOneCookieField() {
        let (request, head) = decoded(Self.get + [("cookie", "a=1"), ("accept", "*/*"), ("cookie", "b=2")], endStream: true)
        #expect(request.refusal == nil && !request.chunked && request.bodyEnded)
        #expect(head == "GET /a?b=1 HTTP/1.1\r\nHost: example.com\r\naccept: */*\r\nCookie: a=1; b=2\r\n\r\n")
        var parsed = RequestHead()
        let result = Array(head.utf8).withUnsafeBytes { RequestParser().parseHead($0, into: &parsed) }
        #expect(result == .complete(headLength: head.utf8.count))
        #expect(parsed.framing == .none && parsed.hostIndex == 0 && parsed.method == .get)
    }

    @Test func aBodyWithoutContentLengthIsReframedAsChunkedAndEndsWithTheLastChunk() {
        var (request, head) = decoded([(":method", "POST"), (":scheme", "https"), (":authority", "h"), (":path", "/up")],
                                      endStream: false)
        #expect(request.chunked)
        #expect(head == "POST /up HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n")
        var body = ByteBuffer()
        defer { body.free() }
        Array("hello".utf8).withUnsafeBytes { request.deliverData($0, into: &body) }
        request.deliverEnd(into: &body)
        request.deliverEnd(into: &body)  // once only
        #expect(String(decoding: body.readableBytes, as: UTF8.self) == "5\r\nhello\r\n0\r\n\r\n")
        var parsed = RequestHead()
        _ = Array(head.utf8).withUnsafeBytes { RequestParser().parseHead($0, into: &parsed) }
        #expect(parsed.framing == .chunked)
    }

    @Test func aDeclaredLengthIsForwardedAsIsAndTheBodyIsNotReframed() {
        var (request, head) = decoded([(":method", "PUT"), (":scheme", "https"), (":authority", "h"), (":path", "/x"),
                                       ("content-length", "3")], endStream: false)
        #expect(!request.chunked)
        #expect(head.hasSuffix("content-length: 3\r\n\r\n"))
        var body = ByteBuffer()
        defer { body.free() }
        Array("abc".utf8).withUnsafeBytes { request.deliverData($0, into: &body) }
        request.deliverEnd(into: &body)
        #expect(String(decoding: body.readableBytes, as: UTF8.self) == "abc")
    }

    @Test func hostMustNameWhatAuthorityNames() {
        #expect(decoded(Self.get + [("host", "other.example")], endStream: true).0.refusal?.status == 400)
        let (same, head) = decoded(Self.get + [("host", "EXAMPLE.com")], endStream: true)
        #expect(same.refusal == nil)
        #expect(head.split(separator: "\r\n").filter { $0.hasPrefix("Host:") }.count == 1, "one Host field")
        // no :authority: the host field is the Host
        let (_, hostOnly) = decoded([(":method", "GET"), (":scheme", "https"), (":path", "/"), ("host", "h.example")], endStream: true)
        #expect(hostOnly.hasPrefix("GET / HTTP/1.1\r\nHost: h.example\r\n"))
    }

    @Test func aHeaderListPastTheLimitIsRefusedAnd431NamesTheLimit() {
        let big = (0..<40).map { ("x-h\($0)", String(repeating: "v", count: 100)) }
        let (request, head) = decoded(Self.get + big, endStream: true, limit: 4096)
        #expect(request.refusal?.status == 431)
        #expect(request.refusal?.reason == "request header list larger than 4096 bytes")
        #expect(head.isEmpty, "nothing is delivered for a refused request")
    }

    @Test func connectsTargetIsItsAuthority() {
        let (_, head) = decoded([(":method", "CONNECT"), (":authority", "example.com:443")], endStream: false)
        #expect(head.hasPrefix("CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n"))
    }

    @Test func theAdvertisedHeaderListLimitIsTheHeadLimitWithRFC9113Overhead() {
        var limits = HTTPLimits()
        limits.maxHeadBytes = 4096
        #expect(HTTP2Stream.headerListLimit(limits) == 4096 + 32 * limits.maxHeaderCount)
    }
}
