/// An HTTP/3 request's fields as the QPACK decoder gives them: each checked against RFC 9114's
/// rules (`HTTP3FieldRules`), then kept by `StreamRequestHead`, which writes the HTTP/1.1 head
/// they stand for into the exchange's input — the same head, and the same `RequestParser`, as an
/// HTTP/2 or HTTP/1.1 request's. The first broken rule makes the request `malformed`; decoding
/// goes on (QPACK's state must stay in step with the peer's) but nothing more is kept.
struct HTTP3RequestHead {
    private var rules = HTTP3FieldRules()
    private(set) var head = StreamRequestHead()
    /// Set by the first broken rule: the stream ends with H3_MESSAGE_ERROR.
    private(set) var malformed: HTTP3FieldRules.Malformed? = nil
    /// The request's HEADERS were complete (trailers follow, if any).
    private(set) var headEnded = false

    /// A field of the request's HEADERS, or of its trailers once `headEnded`.
    mutating func field(name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>, limit: Int) {
        guard malformed == nil else { return }
        do {
            try rules.check(name: name, value: value, trailers: headEnded)
        } catch {
            malformed = error
            return
        }
        // Trailers are checked, not forwarded (as over HTTP/2).
        if !headEnded { head.field(name: name, value: value, limit: limit) }
    }

    /// The request's HEADERS are complete: unless it is malformed, the HTTP/1.1 head goes into
    /// `input` (`endStream`: no body follows). A refusal `StreamRequestHead` makes (a header
    /// list past the limit: 431, `:authority` and `Host` that differ: 400) is its `refusal`.
    mutating func deliverHead(into input: inout ByteBuffer, endStream: Bool) {
        headEnded = true
        guard malformed == nil else { return }
        do {
            try rules.checkComplete()
        } catch {
            malformed = error
            return
        }
        head.deliverHead(into: &input, endStream: endStream)
    }

    var refusal: (status: Int, reason: String)? { head.refusal }

    /// Request DATA for the exchange (nothing once the request is malformed).
    func deliverData(_ data: UnsafeRawBufferPointer, into input: inout ByteBuffer) {
        guard malformed == nil else { return }
        head.deliverData(data, into: &input)
    }

    /// The request stream's FIN (after DATA or trailers).
    mutating func deliverEnd(into input: inout ByteBuffer) {
        guard malformed == nil, headEnded else { return }
        head.deliverEnd(into: &input)
    }
}
