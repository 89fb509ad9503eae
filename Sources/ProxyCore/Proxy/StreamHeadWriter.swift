/// A response head for a stream (HTTP/2 or HTTP/3), as the exchange writes it
/// (`ResponseHeadWriter`): the same fields an HTTP/1.1 client gets, names lowercased, less the
/// connection-specific ones (RFC 9113 §8.2.2, RFC 9114 §4.2: the same list) and the reason
/// phrase. It waits in the stream (`HTTP2Stream.heads`, `HTTP3Stream.heads`) until the stream
/// flushes, then goes to nghttp2 as HEADERS (`HTTP2Response.submitHeads`) or to nghttp3
/// (`HTTP3Stream.flush`).
struct StreamHeadWriter: ResponseHeadWriter {
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

    /// The fields as spans of one block, valid while `body` runs (the HTTP/2 and HTTP/3
    /// libraries copy them into their own name-value structs, which share one layout).
    func withFields<R>(_ body: (UnsafeMutablePointer<UInt8>, [Span]) -> R) -> R {
        block.withUnsafeBufferPointer { raw in
            // The libraries take mutable pointers and only read them.
            body(UnsafeMutablePointer(mutating: raw.baseAddress!), spans)
        }
    }
}
