import Testing
@testable import ProxyCore

/// Vectors marked "llhttp" are chunked bodies from nodejs/llhttp's test/request/transfer-encoding.md,
/// test/response/transfer-encoding.md, test/response/sample.md and test/request/invalid.md (strict mode).
@Suite struct ChunkedDecoderTests {
    struct Valid: Sendable, CustomTestStringConvertible {
        let name: String
        let body: [UInt8]
        let decoded: [UInt8]
        /// Bytes after the chunked body that belong to the next message.
        let after: Int
        var testDescription: String { name }

        init(_ name: String, _ body: String, _ decoded: String, after: String = "") {
            self.name = name
            self.body = Array(body.utf8) + Array(after.utf8)
            self.decoded = Array(decoded.utf8)
            self.after = after.utf8.count
        }
    }

    static let valid: [Valid] = [
        Valid("llhttp: lowercase size", "a\r\n0123456789\r\n0\r\n\r\n", "0123456789"),
        Valid("llhttp: uppercase size", "A\r\n0123456789\r\n0\r\n\r\n", "0123456789"),
        Valid("llhttp: all your base", "1e\r\nall your base are belong to us\r\n0\r\n\r\n", "all your base are belong to us"),
        Valid("llhttp: two chunks and a triple-zero last chunk", "5\r\nhello\r\n6\r\n world\r\n000\r\n\r\n", "hello world"),
        Valid("llhttp: trailer fields", "5\r\nhello\r\n6\r\n world\r\n0\r\nVary: *\r\nContent-Type: text/plain\r\n\r\n", "hello world"),
        Valid("llhttp: chunk extensions",
              "5;ilovew3;somuchlove=aretheseparametersfor;another=withvalue\r\nhello\r\n6;blahblah;blah\r\n world\r\n0\r\n\r\n", "hello world"),
        Valid("llhttp: chunk extensions with quoted values and escapes",
              "5;ilovew3=\"I \\\"love\\\"; \\\\extensions\\\\\";somuchlove=\"aretheseparametersfor\";blah;foo=bar\r\nhello\r\n6;blahblah;blah\r\n world\r\n0\r\n\r\n",
              "hello world"),
        Valid("llhttp: chunk extensions quoting (response)",
              "5;ilovew3=\"I love; extensions\";somuchlove=\"aretheseparametersfor\";blah;foo=bar\r\nhello\r\n6;blahblah;blah\r\n world\r\n0\r\n\r\n",
              "hello world"),
        Valid("llhttp: amazon.com (a chunk holding one LF)", "1\r\n\n\r\n0\r\n\r\n", "\n"),
        Valid("llhttp: deflate, chunked body", "5\r\nWorld\r\n0\r\n\r\n", "World"),
        Valid("llhttp: 101 with Transfer-Encoding", "2\r\nbo\r\n2\r\ndy\r\n0\r\n\r\n", "body", after: "proto"),
        Valid("llhttp: spaces in header value (only the last chunk)", "0\r\n\r\n", ""),
        // Our own rules
        Valid("leading zeros up to sixteen digits", "000000000000000a\r\n0123456789\r\n0\r\n\r\n", "0123456789"),
        Valid("whitespace before a semicolon (BWS)", "3 \t;a = b ; c=\"d\"\r\nabc\r\n0\r\n\r\n", "abc"),
        Valid("obs-text in a quoted extension", "3;a=\"\u{00E9}\"\r\nabc\r\n0\r\n\r\n", "abc"),
        Valid("a trailer field with an empty value and obs-text", "1\r\nx\r\n0\r\nA:\r\nB: \u{00E9} \t\r\n\r\n", "x"),
        Valid("a quoted extension with a space, a zero-padded size and a trailer",
              "5;ext=\"a b\"\r\nhello\r\n000A\r\n0123456789\r\n0\r\nX-Trailer: dropped\r\n\r\n", "hello0123456789", after: "NEXT"),
        Valid("the next message follows the final CRLF", "1\r\nx\r\n0\r\n\r\n", "x", after: "GET / HTTP/1.1\r\n\r\n"),
    ]

    @Test(arguments: valid)
    func decodesTheBodyFedAllAtOnce(_ c: Valid) {
        let run = Self.decode(c.body, step: c.body.count)
        #expect(run.error == nil)
        #expect(run.ended)
        #expect(run.data == c.decoded)
        #expect(run.consumed == c.body.count - c.after)
    }

    @Test(arguments: valid)
    func decodesTheBodyFedOneByteAtATime(_ c: Valid) {
        let run = Self.decode(c.body, step: 1)
        #expect(run.error == nil)
        #expect(run.ended)
        #expect(run.data == c.decoded)
        #expect(run.consumed == c.body.count - c.after)
    }

    @Test(arguments: valid)
    func decodesTheBodySplitAtEveryPoint(_ c: Valid) {
        for split in 1..<max(2, c.body.count) {
            let run = Self.decode(c.body, firstPart: split)
            #expect(run.error == nil, "split at \(split)")
            #expect(run.ended, "split at \(split)")
            #expect(run.data == c.decoded, "split at \(split)")
            #expect(run.consumed == c.body.count - c.after, "split at \(split)")
        }
    }

    struct Invalid: Sendable, CustomTestStringConvertible {
        let name: String
        let body: [UInt8]
        var testDescription: String { name }
        init(_ name: String, _ body: String) { self.name = name; self.body = Array(body.utf8) }
        init(_ name: String, _ body: [UInt8]) { self.name = name; self.body = body }
    }

    static let invalid: [Invalid] = [
        Invalid("llhttp: no semicolon before chunk extensions", "2 erfrferferf\r\naa\r\n0 rrrr\r\n\r\n"),
        Invalid("llhttp: no extension after semicolon", "2;\r\naa\r\n0\r\n\r\n"),
        Invalid("llhttp: unbalanced chunk extension quoting", "5;ilovew3=\"abc\";somuchlove=\"def; ghi\r\nhello\r\n6;blahblah;blah\r\n world\r\n0\r\n\r\n"),
        Invalid("llhttp: missing last-chunk", "3\r\nfoo\r\n\r\n"),
        Invalid("llhttp: validate chunk parameters (bare LF)", "3 \n  \r\nfoo\r\n\r\n"),
        Invalid("llhttp: chunk header not terminated by CRLF", "5\r\r;ABCD\r\n34\r\nE\r\n0\r\n\r\n"),
        Invalid("llhttp: chunk data not terminated by CRLF", "5\r\nABCDE0\r\n\r\n"),
        Invalid("llhttp: space after chunk size", "a \r\n0123456789\r\n0\r\n\r\n"),
        Invalid("llhttp: trailing spaces on a chunked body", "25  \r\nThis is the data in the first chunk\r\n\r\n1C\r\nand this is the second one\r\n\r\n0  \r\n\r\n"),
        Invalid("llhttp: only LFs", "1\nA\n0\n\n"),
        // Chunk size
        Invalid("an empty chunk size", "\r\n"),
        Invalid("a sign", "+5\r\nhello\r\n0\r\n\r\n"),
        Invalid("a minus sign", "-5\r\nhello\r\n0\r\n\r\n"),
        Invalid("a 0x prefix", "0x5\r\nhello\r\n0\r\n\r\n"),
        Invalid("a leading space", " 5\r\nhello\r\n0\r\n\r\n"),
        Invalid("seventeen digits", "00000000000000005\r\nhello\r\n0\r\n\r\n"),
        Invalid("a size of 2^63", "8000000000000000\r\n"),
        Invalid("a size of 2^64-1", "ffffffffffffffff\r\n"),
        Invalid("a non-hex letter", "5g\r\nhello\r\n0\r\n\r\n"),
        Invalid("a bare LF after the size", "5\nhello\r\n0\r\n\r\n"),
        // Extensions
        Invalid("an extension name that is not a token", "5;a@b\r\nhello\r\n0\r\n\r\n"),
        Invalid("an empty extension value", "5;a=\r\nhello\r\n0\r\n\r\n"),
        Invalid("whitespace before CR after an extension name", "5;a \r\nhello\r\n0\r\n\r\n"),
        Invalid("whitespace before CR after an extension value", "5;a=b \r\nhello\r\n0\r\n\r\n"),
        Invalid("text after a quoted extension value", "5;a=\"b\"c\r\nhello\r\n0\r\n\r\n"),
        Invalid("a control byte in a quoted extension value", Array("5;a=\"".utf8) + [0x01] + Array("\"\r\nhello\r\n0\r\n\r\n".utf8)),
        Invalid("a bare LF in an extension", "5;a\nhello\r\n0\r\n\r\n"),
        Invalid("a chunk line longer than 4096 bytes", "5;a=" + String(repeating: "b", count: 4100) + "\r\nhello\r\n0\r\n\r\n"),
        // Data framing
        Invalid("data followed by LF only", "5\r\nhello\n0\r\n\r\n"),
        Invalid("data followed by CR and garbage", "5\r\nhello\rX0\r\n\r\n"),
        Invalid("data longer than announced", "3\r\nhello\r\n0\r\n\r\n"),
        // Trailer section
        Invalid("an obs-fold in the trailer section", "0\r\nA: b\r\n c\r\n\r\n"),
        Invalid("whitespace before a trailer colon", "0\r\nA : b\r\n\r\n"),
        Invalid("a trailer line without a colon", "0\r\nAb\r\n\r\n"),
        Invalid("a trailer starting with a colon", "0\r\n: b\r\n\r\n"),
        Invalid("a NUL in a trailer value", Array("0\r\nA: ".utf8) + [0] + Array("\r\n\r\n".utf8)),
        Invalid("a trailer line ended by a bare LF", "0\r\nA: b\n\r\n"),
        Invalid("a bare CR ending the trailer section", "0\r\n\rX"),
    ]

    @Test(arguments: invalid)
    func refusesTheInvalidBodyWith400(_ c: Invalid) {
        for step in [c.body.count, 1] {
            let run = Self.decode(c.body, step: step)
            #expect(run.error?.status == 400, "fed \(step) bytes at a time")
            #expect(!run.ended)
        }
    }

    @Test func theTrailerSectionIsLimited() {
        let trailer = "0\r\nX: " + String(repeating: "v", count: 30) + "\r\n\r\n"
        var fits = ChunkedDecoder(maxTrailerBytes: trailer.utf8.count - 3)
        var tooBig = ChunkedDecoder(maxTrailerBytes: trailer.utf8.count - 4)
        let bytes = Array(trailer.utf8)
        bytes.withUnsafeBytes { buffer in
            #expect(fits.decode(buffer, from: 0).event == .end)
            #expect(tooBig.decode(buffer, from: 0).event.isError)
        }
    }

    @Test func aChunkSplitAcrossReadsYieldsSeveralDataEvents() {
        let bytes = Array("a\r\n0123456789\r\n0\r\n\r\n".utf8)
        var decoder = ChunkedDecoder()
        bytes.withUnsafeBytes { all in
            let first = UnsafeRawBufferPointer(rebasing: all[0..<7])
            let (e1, c1) = decoder.decode(first, from: 0)
            #expect(e1 == .data(ByteRange(start: 3, count: 4)))
            #expect(c1 == 7)
            let (e, c) = decoder.decode(first, from: 7)
            #expect(e == .needMore && c == 0)
            let (e2, c2) = decoder.decode(all, from: 7)
            #expect(e2 == .data(ByteRange(start: 7, count: 6)))
            #expect(c2 == 6)
            let (e3, c3) = decoder.decode(all, from: 13)
            #expect(e3 == .end)
            #expect(c3 == bytes.count - 13)
        }
    }

    @Test func needMoreConsumesWhatItCouldParse() {
        let bytes = Array("1f;name=\"val".utf8)
        var decoder = ChunkedDecoder()
        let (event, consumed) = bytes.withUnsafeBytes { decoder.decode($0, from: 0) }
        #expect(event == .needMore)
        #expect(consumed == bytes.count)
    }

    @Test func theDecoderStaysEndedOrFailed() {
        var ended = ChunkedDecoder()
        var failed = ChunkedDecoder()
        Array("0\r\n\r\nXYZ".utf8).withUnsafeBytes { buffer in
            let (e1, c1) = ended.decode(buffer, from: 0)
            #expect(e1 == .end && c1 == 5)
            let (e2, c2) = ended.decode(buffer, from: 5)
            #expect(e2 == .end && c2 == 0)
        }
        Array("g\r\n0\r\n\r\n".utf8).withUnsafeBytes { buffer in
            #expect(failed.decode(buffer, from: 0).event.isError)
            #expect(failed.decode(buffer, from: 1).event.isError)
        }
    }

    // MARK: Driver

    struct Run {
        var data: [UInt8] = []
        var consumed = 0
        var ended = false
        var error: HTTPParseError? = nil
    }

    /// Feeds `bytes` with `step` more bytes visible after each `.needMore` (the buffer is the
    /// same array, so ranges stay absolute), checking the decoder's contract on every event.
    static func decode(_ bytes: [UInt8], step: Int) -> Run {
        decode(bytes, visible: { $0 + step })
    }

    /// Feeds `firstPart` bytes, then all of them.
    static func decode(_ bytes: [UInt8], firstPart: Int) -> Run {
        decode(bytes, visible: { $0 < firstPart ? firstPart : bytes.count }, start: firstPart)
    }

    static func decode(_ bytes: [UInt8], visible next: (Int) -> Int, start: Int? = nil) -> Run {
        var decoder = ChunkedDecoder()
        var run = Run()
        var visible = min(bytes.count, start ?? next(0))
        var offset = 0
        bytes.withUnsafeBytes { all in
            for _ in 0..<(bytes.count * 4 + 8) {
                let buffer = UnsafeRawBufferPointer(rebasing: all[0..<visible])
                let (event, consumed) = decoder.decode(buffer, from: offset)
                #expect(consumed >= 0 && offset + consumed <= visible)
                switch event {
                case .data(let range):
                    #expect(range.count > 0)
                    #expect(range.start >= offset && range.end <= offset + consumed)
                    run.data += bytes[range.start..<range.end]
                    offset += consumed
                case .needMore:
                    offset += consumed
                    #expect(offset == visible, "needMore must consume everything it was given")
                    guard visible < bytes.count else { run.consumed = offset; return }
                    visible = min(bytes.count, next(visible))
                case .end:
                    run.ended = true
                    run.consumed = offset + consumed
                    return
                case .error(let error):
                    run.error = error
                    run.consumed = offset + consumed
                    return
                }
            }
            Issue.record("the decoder made no progress")
        }
        return run
    }
}

extension ChunkedEvent {
    var isError: Bool {
        if case .error = self { return true }
        return false
    }
}
