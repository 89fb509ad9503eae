import CBrotli
import CZlib
import Testing
@testable import ProxyCore

/// Response compression without sockets: Accept-Encoding as RFC 9110 §12.5.3 reads it, every
/// rule of the decision, and the encoders' output decoded by zlib and Brotli's own decoders.
@Suite struct CompressionTests {
    func choose(_ header: String, _ offered: [ContentCoding] = [.brotli, .gzip]) -> ContentCoding? {
        Array(header.utf8).withUnsafeBytes { AcceptEncoding.choose($0, offered: offered) }
    }

    @Test func acceptEncodingWeighsEachCodingAndPrefersOursOnTies() {
        #expect(choose("gzip, deflate, br") == .brotli)
        #expect(choose("gzip, deflate, br", [.gzip, .brotli]) == .gzip)
        #expect(choose("gzip;q=1.0, br;q=0.5") == .gzip)
        #expect(choose("br;q=0.3, gzip;q=0.2") == .brotli)
        #expect(choose("GZIP") == .gzip)
        #expect(choose("x-gzip") == .gzip)
        #expect(choose(" gzip ; q=0.8 ,identity") == .gzip)
        #expect(choose("deflate") == nil)
        #expect(choose("") == nil)
        #expect(choose("identity") == nil)
    }

    @Test func qZeroRefusesAndStarCoversWhatIsNotListed() {
        #expect(choose("br;q=0, gzip") == .gzip)
        #expect(choose("gzip;q=0, br;q=0") == nil)
        #expect(choose("*") == .brotli)
        #expect(choose("*;q=0.5, br;q=0") == .gzip)
        #expect(choose("*;q=0") == nil)
        // An entry's own weight wins over `*`'s, either way round.
        #expect(choose("gzip;q=0.9, *;q=0.1") == .gzip)
    }

    @Test func aMalformedWeightNeverGrantsACoding() {
        #expect(choose("br;q=2") == nil)
        #expect(choose("br;q=1.5") == nil)
        #expect(choose("br;q=abc") == nil)
        #expect(choose("br;q=0.12345") == nil)
        #expect(choose("br;level=3") == nil)
        #expect(choose("br;q=1.000") == .brotli)
        #expect(choose("br;Q=0.001") == .brotli)
    }

    var on: CompressionSettings {
        var s = CompressionSettings()
        s.codings = [.brotli, .gzip]
        return s
    }

    /// A compressible response to a client that takes gzip, changed by `change`.
    func decide(_ settings: CompressionSettings? = nil, accept: String? = "gzip", type: String? = "text/html; charset=utf-8",
                _ change: (inout CompressionDecision.Facts) -> Void = { _ in }) -> CompressionDecision {
        let acceptBytes = accept.map { Array($0.utf8) }
        let typeBytes = type.map { Array($0.utf8) }
        return withOptionalBytes(acceptBytes) { a in
            withOptionalBytes(typeBytes) { t in
                var f = CompressionDecision.Facts()
                f.acceptEncoding = a
                f.contentType = t
                f.length = 10_000
                change(&f)
                return CompressionDecision.decide(settings ?? on, f)
            }
        }
    }

    func withOptionalBytes<R>(_ bytes: [UInt8]?, _ body: (UnsafeRawBufferPointer?) -> R) -> R {
        guard let bytes else { return body(nil) }
        return bytes.withUnsafeBytes { body($0) }
    }

    @Test func aTextResponseToAClientThatAcceptsIsCompressed() {
        #expect(decide() == .compress(.gzip))
        #expect(decide(accept: "br, gzip") == .compress(.brotli))
        #expect(decide { $0.length = nil } == .compress(.gzip))  // chunked or until close
        #expect(decide { $0.status = 404 } == .compress(.gzip))
    }

    @Test func offOrNotAcceptedMeansAsItIsButVaryWhereAnotherClientWouldDiffer() {
        #expect(decide(CompressionSettings()) == .none)
        #expect(decide(accept: nil) == .varyOnly)
        #expect(decide(accept: "deflate") == .varyOnly)
        #expect(decide(accept: "gzip;q=0") == .varyOnly)
    }

    @Test func everyExclusionSendsTheResponseAsItIs() {
        #expect(decide { $0.isHead = true } == .none)
        #expect(decide { $0.http10 = true } == .none)
        #expect(decide { $0.pathExcluded = true } == .none)
        #expect(decide { $0.hasBody = false } == .none)
        #expect(decide { $0.hasContentEncoding = true } == .none)
        #expect(decide { $0.noTransform = true } == .none)
        #expect(decide { $0.length = 511 } == .none)
        #expect(decide { $0.length = 512 } == .compress(.gzip))
        for status in [101, 103, 204, 206, 304] {
            #expect(decide { $0.status = status } == .none, "status \(status)")
        }
        #expect(decide(type: "image/png") == .none)
        #expect(decide(type: nil) == .none)
    }

    @Test func typesMatchWithoutParametersOrCaseAndByWildcard() {
        func matches(_ value: String, _ types: [String]) -> Bool {
            Array(value.utf8).withUnsafeBytes { CompressionDecision.typeMatches($0, types) }
        }
        #expect(matches("TEXT/HTML;charset=UTF-8", ["text/html"]))
        #expect(matches(" application/json ", ["application/json"]))
        #expect(matches("text/x-custom", ["text/*"]))
        #expect(!matches("text", ["text/*"]))
        #expect(!matches("text/htmlx", ["text/html"]))
        #expect(!matches("application/json-seq", ["application/json"]))
        #expect(!matches("image/svg+xml", CompressionSettings.defaultTypes.filter { $0 != "image/svg+xml" }))
    }

    // MARK: Encoders

    /// A body of `size` bytes that compresses the way HTML does (repeats with variety).
    static func page(_ size: Int) -> [UInt8] {
        var out: [UInt8] = []
        var i = 0
        while out.count < size {
            out.append(contentsOf: Array("<li class=\"item\">entry \(i) of the list</li>\n".utf8))
            i += 1
        }
        return Array(out.prefix(size))
    }

    /// Feeds `body` to an encoder in `pieces`, flushing after each as the exchange does.
    func encode(_ coding: ContentCoding, _ body: [UInt8], pieces: Int, sizeHint: UInt64? = nil) throws -> [UInt8] {
        let encoder = try #require(BodyEncoder(coding, settings: on, sizeHint: sizeHint))
        var out = ByteBuffer()
        defer { out.free() }
        let step = max(1, body.count / pieces)
        var offset = 0
        try body.withUnsafeBytes { all in
            while offset < body.count {
                let end = min(body.count, offset + step)
                try #require(encoder.encode(UnsafeRawBufferPointer(rebasing: all[offset..<end]), into: &out, end == body.count ? .finish : .flush))
                offset = end
            }
            if body.isEmpty { try #require(encoder.encode(UnsafeRawBufferPointer(start: nil, count: 0), into: &out, .finish)) }
        }
        return Array(out.readableBytes)
    }

    /// zlib's inflate over all of `data` (gzip wrapper): its return code and what it produced.
    func inflate(_ data: [UInt8], flush: Int32) throws -> (rc: Int32, out: [UInt8]) {
        var z = z_stream()
        try #require(CZlib_inflateInit2(&z, 31) == Z_OK)
        defer { inflateEnd(&z) }
        var out = [UInt8](repeating: 0, count: 1 << 22)
        var input = data
        let rc = input.withUnsafeMutableBufferPointer { inp in
            out.withUnsafeMutableBufferPointer { o in
                z.next_in = inp.baseAddress
                z.avail_in = UInt32(inp.count)
                z.next_out = o.baseAddress
                z.avail_out = UInt32(o.count)
                return CZlib.inflate(&z, flush)
            }
        }
        return (rc, Array(out.prefix(Int(z.total_out))))
    }

    func gunzip(_ data: [UInt8]) throws -> [UInt8] {
        let (rc, out) = try inflate(data, flush: Z_FINISH)
        try #require(rc == Z_STREAM_END, "the gzip stream ends properly")
        return out
    }

    func unbrotli(_ data: [UInt8]) throws -> [UInt8] {
        var size = 1 << 22
        var out = [UInt8](repeating: 0, count: size)
        let rc = data.withUnsafeBufferPointer { inp in
            out.withUnsafeMutableBufferPointer { BrotliDecoderDecompress(inp.count, inp.baseAddress, &size, $0.baseAddress) }
        }
        try #require(rc == BROTLI_DECODER_RESULT_SUCCESS, "the brotli stream decodes to its end")
        return Array(out.prefix(size))
    }

    @Test(arguments: [1, 7, 100])
    func gzipAndBrotliOutputDecodesToTheBody(pieces: Int) throws {
        let body = Self.page(300_000)
        let gz = try encode(.gzip, body, pieces: pieces)
        #expect(try gunzip(gz) == body)
        #expect(gz.count < body.count / 5, "HTML-like text shrinks several times over (\(gz.count) bytes)")
        let br = try encode(.brotli, body, pieces: pieces)
        #expect(try unbrotli(br) == body)
        #expect(br.count < body.count / 5, "(\(br.count) bytes)")
    }

    @Test func aSizeHintShrinksTheWindowAndStillDecodes() throws {
        let body = Self.page(2_000)
        #expect(BodyEncoder.windowBits(for: 2_000, min: 9, max: 15) == 11)
        #expect(BodyEncoder.windowBits(for: 1 << 20, min: 9, max: 15) == 15)
        #expect(BodyEncoder.windowBits(for: nil, min: 10, max: 18) == 18)
        #expect(BodyEncoder.windowBits(for: 100, min: 10, max: 18) == 10)
        #expect(try gunzip(try encode(.gzip, body, pieces: 1, sizeHint: 2_000)) == body)
        #expect(try unbrotli(try encode(.brotli, body, pieces: 1, sizeHint: 2_000)) == body)
    }

    @Test func whatIsFlushedCanBeReadBeforeTheBodyEnds() throws {
        // The exchange flushes after each upstream read: a reader must get every byte sent so far.
        let encoder = try #require(BodyEncoder(.gzip, settings: on, sizeHint: nil))
        var out = ByteBuffer()
        defer { out.free() }
        let first = Array("<html><body>first part</body>".utf8)
        try first.withUnsafeBytes { try #require(encoder.encode($0, into: &out, .flush)) }
        let (rc, got) = try inflate(Array(out.readableBytes), flush: Z_SYNC_FLUSH)
        #expect(rc == Z_OK)
        #expect(got == first)
    }

    @Test func anEmptyBodyIsAValidStream() throws {
        #expect(try gunzip(try encode(.gzip, [], pieces: 1)) == [])
        #expect(try unbrotli(try encode(.brotli, [], pieces: 1)) == [])
    }
}
