/// The state of the request a `ClientConnection` is serving — its parsed head, its body's
/// framing, the response's — held apart from the connection so that an idle keep-alive
/// connection does not carry it: 400 bytes of the connection record, plus the field lists the
/// parsers keep (room for 16 request fields, 544 bytes; the response's, a few hundred). It
/// goes back to the loop's `RequestStatePool` at the request boundary, with the buffers, and
/// the next request (on any of the loop's connections) takes one when its first bytes arrive:
/// the lists keep their capacity, so a request allocates nothing for them.
final class RequestState {
    var head = RequestHead()
    var requestBody = BodyReader()
    var response = ResponseState()
}

/// A loop's spare `RequestState`s. Loop-confined: no locks.
final class RequestStatePool {
    /// States kept for reuse; beyond this they are freed (a burst's worth is not kept forever).
    let limit: Int
    private var free: [RequestState] = []

    init(limit: Int = 256) {
        self.limit = limit
    }

    var count: Int { free.count }

    @inline(__always)
    func take() -> RequestState {
        free.popLast() ?? RequestState()
    }

    /// Takes the connection's state back (nil afterwards). Only at a request boundary or at close.
    @inline(__always)
    func recycle(_ state: inout RequestState?) {
        guard let s = state else { return }
        state = nil
        if free.count < limit { free.append(s) }
    }
}
