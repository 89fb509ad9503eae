/// Where the exchange writes a response head: field by field, to whichever downstream the request
/// came from. The exchange decides *what* the head says (status, the upstream's fields less what
/// must not pass, the phases' edits, HSTS, framing); the writer decides how the downstream says
/// it. HTTP/1.1 (`HTTP1HeadWriter`) writes text into the connection's output; an HTTP/2 stream
/// (`StreamHeadWriter`) collects the fields for its HEADERS frame. Neither parses the other's
/// output. Callers are generic over the writer, so each kind is specialised: static calls into
/// a buffer on the HTTP/1.1 hot path.
protocol ResponseHeadWriter {
    /// First. `reason` is the upstream's reason phrase for an HTTP/1.1 status line (empty: the
    /// standard one); HTTP/2 has none.
    mutating func begin(status: Int, reason: UnsafeRawBufferPointer)
    mutating func field(_ name: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer)
    /// Last: how the body is framed and what becomes of the connection. HTTP/1.1 says so in
    /// `Content-Length`, `Transfer-Encoding` and `Connection` fields; HTTP/2 in `content-length`
    /// alone (the stream's END_STREAM ends the body; connection fields are forbidden there,
    /// RFC 9113 §8.2.2).
    mutating func end(contentLength: UInt64?, chunked: Bool, connection: Exchange.ConnectionField)
}

/// What a response head says, written into whichever writer the downstream uses
/// (`Downstream.writeHead`): one composition for every kind, specialised per writer. The
/// exchange comes as an argument rather than a stored reference: a reference loaded from a
/// stored property is retained around the call, one pair per response on the hot path.
protocol ResponseHeadComposer {
    func compose<W: ResponseHeadWriter>(into w: inout W, for x: ClientExchange)
}

extension ResponseHeadWriter {
    mutating func field(_ name: String, _ value: String) {
        var name = name, value = value
        name.withUTF8 { n in value.withUTF8 { v in field(UnsafeRawBufferPointer(n), UnsafeRawBufferPointer(v)) } }
    }

    mutating func field(_ name: StaticString, _ value: UnsafeRawBufferPointer) {
        field(UnsafeRawBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount), value)
    }
}

/// An HTTP/1.1 head as text, appended to the connection's output. The writer holds the buffer
/// while it writes (`init(into:)` takes it, `finish()` gives it back): a `ByteBuffer` is a plain
/// pointer and offsets, so the hand-over is a copy of four words.
struct HTTP1HeadWriter: ResponseHeadWriter {
    private(set) var out: ByteBuffer
    /// The client spoke HTTP/1.0: a connection that stays open says `keep-alive`.
    let http10: Bool

    init(into out: ByteBuffer, http10: Bool) {
        self.out = out
        self.http10 = http10
    }

    @inline(__always)
    mutating func begin(status: Int, reason: UnsafeRawBufferPointer) {
        out.append("HTTP/1.1 ")
        out.append(decimal: UInt64(status))
        out.append(byte: 0x20)
        if reason.count > 0 { out.append(reason) } else { out.append(string: HTTPStatus.reason(status)) }
        out.append("\r\n")
    }

    @inline(__always)
    mutating func field(_ name: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) {
        out.append(name)
        out.append(": ")
        out.append(value)
        out.append("\r\n")
    }

    @inline(__always)
    mutating func end(contentLength: UInt64?, chunked: Bool, connection: Exchange.ConnectionField) {
        if let n = contentLength {
            out.append("Content-Length: ")
            out.append(decimal: n)
            out.append("\r\n")
        }
        if chunked { out.append("Transfer-Encoding: chunked\r\n") }
        switch connection {
        case .upgrade: out.append("Connection: upgrade\r\n")
        case .close: out.append("Connection: close\r\n")
        case .keepAlive: if http10 { out.append("Connection: keep-alive\r\n") }
        }
        out.append("\r\n")
    }
}
