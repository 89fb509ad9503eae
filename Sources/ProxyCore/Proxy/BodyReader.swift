/// Moves one message body from a source buffer to a destination buffer as bytes arrive,
/// re-framing it on the way: a chunked body is decoded and re-encoded canonically (so
/// extensions, odd spacing and trailers never cross the proxy), a sized body is copied.
struct BodyReader {
    enum Mode {
        case none
        case length(remaining: UInt64)
        case chunked(ChunkedDecoder)
        case untilClose
    }

    enum Step: Equatable {
        /// All available bytes were used; the body continues.
        case more
        /// The body ended (bytes after it in the source belong to the next message).
        case done
        case error(HTTPParseError)
    }

    var mode: Mode = .none
    /// Body bytes seen so far (decoded size for chunked).
    var total: UInt64 = 0

    init() {}
    init(contentLength: UInt64) { mode = contentLength == 0 ? .none : .length(remaining: contentLength) }
    init(chunked: Void) { mode = .chunked(ChunkedDecoder()) }
    init(untilClose: Void) { mode = .untilClose }

    /// Transfers what is available in `source` to `destination`. `chunkedOut` re-encodes as
    /// chunked (otherwise the bare bytes are written: sized bodies, or HTTP/1.0 clients).
    mutating func transfer(from source: inout ByteBuffer, to destination: inout ByteBuffer, chunkedOut: Bool) -> Step {
        switch mode {
        case .none:
            return .done
        case .length(let remaining):
            let n = min(UInt64(source.readable), remaining)
            if n > 0 {
                destination.append(source.base! + source.reader, count: Int(n))
                source.reader += Int(n)
                total += n
            }
            if n == remaining { mode = .none; return .done }
            mode = .length(remaining: remaining - n)
            return .more
        case .untilClose:
            let n = source.readable
            if n > 0 {
                if chunkedOut {
                    destination.append(hex: UInt64(n))
                    destination.append("\r\n")
                }
                destination.append(source.base! + source.reader, count: n)
                if chunkedOut { destination.append("\r\n") }
                source.reader += n
                total += UInt64(n)
            }
            return .more
        case .chunked(var decoder):
            defer { if case .chunked = mode { mode = .chunked(decoder) } }
            while true {
                let bytes = UnsafeRawBufferPointer(start: source.base.map { $0 + source.reader }, count: source.readable)
                let (event, consumed) = decoder.decode(bytes, from: 0)
                switch event {
                case .data(let range):
                    if chunkedOut {
                        destination.append(hex: UInt64(range.count))
                        destination.append("\r\n")
                        destination.append(bytes.baseAddress! + range.start, count: range.count)
                        destination.append("\r\n")
                    } else {
                        destination.append(bytes.baseAddress! + range.start, count: range.count)
                    }
                    total += UInt64(range.count)
                    source.reader += consumed
                case .needMore:
                    source.reader += consumed
                    return .more
                case .end:
                    source.reader += consumed
                    if chunkedOut { destination.append("0\r\n\r\n") }
                    mode = .none
                    return .done
                case .error(let e):
                    mode = .none
                    return .error(e)
                }
            }
        }
    }
}

extension BodyReader {
    /// Consumes what is available of the body in `source` without keeping it: the rest of a
    /// request body once its response is complete (see `ClientExchange.discardRequestBody`).
    /// The bytes pass through `scratch` (a rare path: the copy is cheaper than a second decoder loop).
    mutating func discard(from source: inout ByteBuffer, scratch: inout ByteBuffer) -> Step {
        let step = transfer(from: &source, to: &scratch, chunkedOut: false)
        scratch.clear()
        return step
    }

    /// How many of `available` source bytes are body bytes that go out exactly as they came
    /// (a sized body, or one read to the close for a client that takes it bare), so they may be
    /// written straight from the source (`consumedStraight`). 0 where the body is re-framed.
    func straightBytes(available: Int, chunkedOut: Bool) -> Int {
        switch mode {
        case .length(let remaining): return Int(min(UInt64(available), remaining))
        case .untilClose: return chunkedOut ? 0 : available
        case .none, .chunked: return 0
        }
    }

    /// `n` body bytes (at most `straightBytes`) were written straight from the source.
    mutating func consumedStraight(_ n: Int) {
        total += UInt64(n)
        if case .length(let remaining) = mode {
            mode = UInt64(n) == remaining ? .none : .length(remaining: remaining - UInt64(n))
        }
    }

    /// Body bytes still to come, when the framing says (a sized body); nil for chunked.
    var remaining: UInt64? {
        switch mode {
        case .none: return 0
        case .length(let r): return r
        case .chunked, .untilClose: return nil
        }
    }
}

/// Where the current response stands.
struct ResponseState {
    /// The upstream's final status (0: none yet). Whether a head went to the client is the
    /// exchange's to say (`Exchange.responseStarted`).
    var status = 0
    var body = BodyReader()
    /// How the body is framed towards the client.
    var chunkedToClient = false
    /// The upstream connection can be reused once the response ends.
    var upstreamKeepAlive = false
    var head = ResponseHead()
    /// The body is compressed on its way (`ClientExchange+Compression`).
    var encoder: BodyEncoder? = nil
    /// Bytes in `output` at which the upstream waits for the client: the usual window, or more
    /// for a response read ahead (`ClientExchange+Buffering`).
    var window = Exchange.highWater
    /// Whether splicing was considered for this body (`startSpliceIfWorthIt`): once, when it
    /// first qualifies; a body that found no pipe then is copied to its end.
    var spliceConsidered = false
}
