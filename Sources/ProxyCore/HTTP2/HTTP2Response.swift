import CNghttp2

/// A response head for an HTTP/2 stream, as the exchange writes it (`ResponseHeadWriter`): the
/// same fields an HTTP/1.1 client gets, names lowercased, less the connection-specific ones
/// (RFC 9113 §8.2.2) and the reason phrase. It waits in the stream (`HTTP2Stream.heads`) until
/// the stream flushes, then goes to nghttp2 as HEADERS (`HTTP2Response.submitHeads`).
struct HTTP2HeadWriter: ResponseHeadWriter {
    /// Where one name and its value sit in `block`.
    struct Span {
        var name: Int
        var nameLength: Int
        var value: Int
        var valueLength: Int
    }

    private(set) var status = 0
    /// Names and values back to back, `:status` first.
    private var block: [UInt8] = []
    private var spans: [Span] = []

    var isFinal: Bool { status >= 200 }
    /// The bytes the head holds (the access log's `bytes_out` counts them).
    var byteCount: Int { block.count }

    mutating func begin(status: Int, reason: UnsafeRawBufferPointer) {
        self.status = status
        block.reserveCapacity(512)
        spans.reserveCapacity(16)
        add(":status", decimal: UInt64(status))
    }

    mutating func field(_ name: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) {
        switch HeaderKind.of(name, ByteRange(start: 0, count: name.count)) {
        case .hopByHop, .transferEncoding, .upgrade: return
        default: break
        }
        add(name, value)
    }

    mutating func end(contentLength: UInt64?, chunked: Bool, connection: Exchange.ConnectionField) {
        guard let n = contentLength else { return }
        add("content-length", decimal: n)
    }

    /// A field whose name is lowercase already and whose value is a number, formatted in place.
    private mutating func add(_ name: StaticString, decimal value: UInt64) {
        let nameAt = block.count
        block.append(contentsOf: UnsafeRawBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount))
        let valueAt = block.count
        var digits = 0
        var v = value
        repeat { digits += 1; v /= 10 } while v > 0
        block.append(contentsOf: repeatElement(0x30, count: digits))
        v = value
        for i in stride(from: valueAt + digits - 1, through: valueAt, by: -1) {
            block[i] = UInt8(0x30 + v % 10)
            v /= 10
        }
        spans.append(Span(name: nameAt, nameLength: name.utf8CodeUnitCount, value: valueAt, valueLength: digits))
    }

    private mutating func add(_ name: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) {
        let nameAt = block.count
        // Copied whole, then lowercased in place (a byte-by-byte mapped append costs several
        // times more per byte).
        block.append(contentsOf: name)
        block.withUnsafeMutableBufferPointer { b in
            for i in nameAt..<nameAt + name.count { b[i] = asciiLower(b[i]) }
        }
        let valueAt = block.count
        block.append(contentsOf: value)
        spans.append(Span(name: nameAt, nameLength: name.count, value: valueAt, valueLength: value.count))
    }

    /// The head as nghttp2's name-value pairs, valid while `body` runs (nghttp2 copies them).
    func withNameValues<R>(_ body: (UnsafeMutablePointer<nghttp2_nv>, Int) -> R) -> R {
        block.withUnsafeBufferPointer { raw in
            // nghttp2 takes mutable pointers and only reads them.
            let base = UnsafeMutablePointer(mutating: raw.baseAddress!)
            var nva = spans.map { s in
                nghttp2_nv(name: base + s.name, value: base + s.value,
                           namelen: s.nameLength, valuelen: s.valueLength, flags: UInt8(NGHTTP2_NV_FLAG_NONE.rawValue))
            }
            return nva.withUnsafeMutableBufferPointer { body($0.baseAddress!, $0.count) }
        }
    }
}

enum HTTP2Response {
    /// Submits the heads the stream has written (1xx ones, then its final one) as HEADERS.
    /// With the response complete and no body left, END_STREAM goes on the final HEADERS. False
    /// if nghttp2 refused one.
    static func submitHeads(_ h2: HTTP2Stream, _ c: HTTP2Connection) -> Bool {
        let stream = h2.exchange
        let heads = h2.heads
        h2.heads.removeAll()
        for head in heads {
            let rv: Int32 = head.withNameValues { nva, count in
                if !head.isFinal {
                    return nghttp2_submit_headers(c.session, UInt8(NGHTTP2_FLAG_NONE.rawValue), h2.id, nil, nva, count, nil)
                }
                if h2.responseDone && stream.output.isEmpty {
                    return nghttp2_submit_response(c.session, h2.id, nva, count, nil)
                }
                var provider = nghttp2_data_provider(source: nghttp2_data_source(ptr: nil), read_callback: HTTP2Callbacks.readBody)
                return nghttp2_submit_response(c.session, h2.id, nva, count, &provider)
            }
            guard rv == 0 else { return false }
            if head.isFinal {
                h2.responseSubmitted = true
                if h2.responseDone && stream.output.isEmpty && !stream.requestBodyDone { c.endedEarly.append(h2.id) }
            }
        }
        return true
    }
}
