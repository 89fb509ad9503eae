import Testing
@testable import OAuthCallback

/// The reply parser: hiredis behind a scan of the sizes a reply declares (RESPBounds), fed
/// whole and in every split, as a connection's reads would.
@Suite struct RedisReplyParserTests {
    enum Fed: Equatable { case success([RedisReply]), failure(String) }

    /// Every reply in `bytes`, fed in pieces of `chunk`; the error if the stream is refused.
    func replies(_ bytes: [UInt8], chunk: Int = .max) -> Fed {
        let parser = RedisReplyParser()
        var out: [RedisReply] = []
        var offset = 0
        while offset < bytes.count {
            let end = min(bytes.count, offset + chunk)
            if let error = bytes[offset..<end].withUnsafeBytes({ parser.feed($0) }) { return .failure(error) }
            offset = end
            while case .reply(let r) = parser.next() { out.append(r) }
        }
        return .success(out)
    }

    static let stream = Array(
        ("+OK\r\n:42\r\n$-1\r\n$5\r\nhe\r\no\r\n-ERR no\r\n*2\r\n$3\r\nabc\r\n*1\r\n:7\r\n*-1\r\n"
         // a value holding what would be a huge header if it were read as one
         + "$12\r\n*288888882\r\n\r\n").utf8)

    static let expected: [RedisReply] = [
        .status("OK"), .integer(42), .null, .string(Array("he\r\no".utf8)), .error("ERR no"),
        .array([.string(Array("abc".utf8)), .array([.integer(7)])]), .null, .string(Array("*288888882\r\n".utf8)),
    ]

    @Test(arguments: [1, 2, 3, 5, 13, 1_000])
    func repliesParseInEverySplit(chunk: Int) {
        #expect(replies(Self.stream, chunk: chunk) == .success(Self.expected))
    }

    @Test(arguments: [1, 4, 1_000])
    func anAggregateAboveTheBoundIsRefusedBeforeHiredisAllocatesIt(chunk: Int) {
        // 12 bytes that made hiredis 0.14 calloc 2.3 GB
        #expect(replies(Array("*288888882\r\n".utf8), chunk: chunk)
                == .failure("redis protocol error: reply declares 288888882 elements (at most 65536)"))
        #expect(replies(Array("+OK\r\n*2\r\n*65537\r\n".utf8), chunk: chunk)
                == .failure("redis protocol error: reply declares 65537 elements (at most 65536)"))
        #expect(replies(Array("*65536\r\n".utf8), chunk: chunk) == .success([]), "the bound itself is allowed")
    }

    @Test func oversizedOrMalformedHeadersAreRefused() {
        #expect(replies(Array("$16777217\r\n".utf8)) == .failure("redis protocol error: reply declares a 16777217-byte string (at most 16777216)"))
        #expect(replies(Array("*12x\r\n".utf8)) == .failure("redis protocol error: reply length is not a number"))
        #expect(replies(Array("*-2\r\n".utf8)) == .failure("redis protocol error: reply length is not a number"))
        #expect(replies(Array(("*" + String(repeating: "9", count: 40)).utf8)) == .failure("redis protocol error: reply length line too long"))
        #expect(replies(Array("%1\r\n".utf8)) == .failure("redis protocol error: unexpected reply type byte 37"))
    }
}
