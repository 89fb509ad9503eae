import Testing
@testable import ProxyCore

@Suite struct BodyReaderTests {
    /// Feeds `input` in pieces of `step` bytes and collects what the reader writes (or, with
    /// `discarding`, what `discard` leaves in its scratch buffer: nothing).
    private func run(_ reader: inout BodyReader, _ input: String, step: Int, chunkedOut: Bool, discarding: Bool = false) -> (out: String, last: BodyReader.Step, left: String) {
        var source = ByteBuffer()
        var destination = ByteBuffer()
        defer { source.free(); destination.free() }
        let bytes = Array(input.utf8)
        var last = BodyReader.Step.more
        var i = 0
        while i < bytes.count {
            let end = min(i + step, bytes.count)
            bytes[i..<end].withUnsafeBytes { source.append($0) }
            i = end
            last = discarding ? reader.discard(from: &source, scratch: &destination)
                              : reader.transfer(from: &source, to: &destination, chunkedOut: chunkedOut)
            if last != .more { break }
        }
        let left = String(decoding: source.readableBytes, as: UTF8.self) + String(decoding: bytes[i...], as: UTF8.self)
        return (destination.string, last, left)
    }

    @Test(arguments: [1, 3, 1000])
    func sizedBodyStopsAtItsLengthAndLeavesTheNextRequest(step: Int) {
        var r = BodyReader(contentLength: 5)
        let (out, last, left) = run(&r, "helloGET / HTTP/1.1\r\n", step: step, chunkedOut: false)
        #expect(out == "hello")
        #expect(last == .done)
        #expect(left == "GET / HTTP/1.1\r\n")
        #expect(r.total == 5)
    }

    @Test(arguments: [1, 2, 7, 1000])
    func chunkedBodyIsReencodedWithoutExtensionsOrTrailers(step: Int) {
        var r = BodyReader(chunked: ())
        let input = "5;ext=\"a b\"\r\nhello\r\n000A\r\n0123456789\r\n0\r\nX-Trailer: dropped\r\n\r\nNEXT"
        let (out, last, left) = run(&r, input, step: step, chunkedOut: true)
        // Pieces may be split differently depending on the step, so compare decoded content.
        #expect(decodeCanonical(out) == "hello0123456789")
        #expect(!out.contains("ext") && !out.contains("Trailer"))
        #expect(out.hasSuffix("0\r\n\r\n"))
        #expect(last == .done)
        #expect(left == "NEXT")
        #expect(r.total == 15)
    }

    @Test func chunkedBodyToAnHTTP10ClientIsSentBare() {
        var r = BodyReader(chunked: ())
        let (out, last, _) = run(&r, "3\r\nabc\r\n0\r\n\r\n", step: 100, chunkedOut: false)
        #expect(out == "abc")
        #expect(last == .done)
    }

    @Test(arguments: ["-1\r\nx\r\n0\r\n\r\n", "zz\r\n", "3\r\nabcX\r\n", "3\nabc\n0\n\n"])
    func malformedChunkingIsAnError(input: String) {
        var r = BodyReader(chunked: ())
        let (_, last, _) = run(&r, input, step: 100, chunkedOut: true)
        guard case .error(let e) = last else {
            Issue.record("expected an error, got \(last)")
            return
        }
        #expect(e.status == 400)
    }

    @Test func untilCloseBodyTakesEverything() {
        var r = BodyReader(untilClose: ())
        let (out, last, _) = run(&r, "all of it", step: 4, chunkedOut: false)
        #expect(out == "all of it")
        #expect(last == .more)
    }

    /// Parses canonical chunked output (hex size CRLF data CRLF ... 0 CRLF CRLF) strictly, over
    /// bytes (Swift's String treats CRLF as one Character).
    private func decodeCanonical(_ s: String) -> String? {
        let b = Array(s.utf8)
        var i = 0
        var body: [UInt8] = []
        while true {
            var j = i
            while j + 1 < b.count && !(b[j] == 13 && b[j + 1] == 10) { j += 1 }
            guard j + 1 < b.count, j > i,
                  let size = Int(String(decoding: b[i..<j], as: UTF8.self), radix: 16) else { return nil }
            i = j + 2
            if size == 0 { return i + 2 == b.count && b[i] == 13 && b[i + 1] == 10 ? String(decoding: body, as: UTF8.self) : nil }
            guard i + size + 2 <= b.count, b[i + size] == 13, b[i + size + 1] == 10 else { return nil }
            body += b[i..<(i + size)]
            i += size + 2
        }
    }

    private func discard(_ reader: inout BodyReader, _ input: String, step: Int) -> (last: BodyReader.Step, left: String) {
        let (out, last, left) = run(&reader, input, step: step, chunkedOut: false, discarding: true)
        #expect(out.isEmpty)
        return (last, left)
    }

    @Test(arguments: [1, 4, 1000])
    func discardingASizedBodyStopsAtItsEnd(step: Int) {
        var r = BodyReader(contentLength: 6)
        #expect(r.remaining == 6)
        let (last, left) = discard(&r, "abcdefGET /next HTTP/1.1\r\n", step: step)
        #expect(last == .done)
        #expect(left == "GET /next HTTP/1.1\r\n")
        #expect(r.total == 6 && r.remaining == 0)
    }

    @Test(arguments: [1, 3, 1000])
    func discardingAChunkedBodyStopsAfterItsTrailers(step: Int) {
        var r = BodyReader(chunked: ())
        #expect(r.remaining == nil)
        let (last, left) = discard(&r, "3;x=1\r\nabc\r\n2\r\nde\r\n0\r\nT: v\r\n\r\nGET /", step: step)
        #expect(last == .done)
        #expect(left == "GET /")
        #expect(r.total == 5)
    }

    @Test func discardingMalformedChunkedFramingFails() {
        var r = BodyReader(chunked: ())
        let (last, _) = discard(&r, "zz\r\nabc\r\n", step: 100)
        guard case .error = last else { Issue.record("malformed chunk size accepted: \(last)"); return }
    }

    // MARK: straight writes (ClientExchange.writeBodyStraight)

    @Test func aSizedBodyOffersAtMostWhatIsLeftOfItAndEndsWhenThatIsWritten() {
        var r = BodyReader(contentLength: 10)
        #expect(r.straightBytes(available: 4, chunkedOut: false) == 4)
        r.consumedStraight(3)  // the socket took less than offered
        #expect(r.remaining == 7 && r.total == 3)
        // the next message's bytes behind the body are never offered
        #expect(r.straightBytes(available: 100, chunkedOut: false) == 7)
        r.consumedStraight(7)
        #expect(r.remaining == 0 && r.total == 10)
        var source = ByteBuffer()
        var destination = ByteBuffer()
        defer { source.free(); destination.free() }
        #expect(r.transfer(from: &source, to: &destination, chunkedOut: false) == .done)
        #expect(destination.readable == 0)
    }

    @Test func aStraightWriteThenCopiesMakeTheSameBody() {
        var r = BodyReader(contentLength: 8)
        r.consumedStraight(5)
        let (out, last, left) = run(&r, "fghNEXT", step: 1000, chunkedOut: false)
        #expect(out == "fgh" && last == .done && left == "NEXT" && r.total == 8)
    }

    @Test func reFramedBodiesAreNeverWrittenStraight() {
        #expect(BodyReader(chunked: ()).straightBytes(available: 100, chunkedOut: false) == 0)
        #expect(BodyReader(chunked: ()).straightBytes(available: 100, chunkedOut: true) == 0)
        #expect(BodyReader(untilClose: ()).straightBytes(available: 100, chunkedOut: true) == 0)
        #expect(BodyReader(untilClose: ()).straightBytes(available: 100, chunkedOut: false) == 100)
        #expect(BodyReader().straightBytes(available: 100, chunkedOut: false) == 0)
    }
}
