/// The state of the request a `ClientExchange` is serving — its parsed head, its body's
/// framing, the response's, the buffers and bookkeeping only a request needs — held apart from
/// the connection so that an idle keep-alive connection does not carry it: about 570 bytes of
/// the connection record, plus the field lists the parsers keep (room for 16 request fields,
/// 544 bytes; the response's, a few hundred). It goes back to the loop's `RequestStatePool` at
/// the request boundary, and the next request (on any of the loop's connections) takes one
/// when its first bytes arrive: the lists keep their capacity, so a request allocates nothing
/// for them. The connection reaches these fields through forwarding properties of the same
/// names, valid only while `current` is set (from the request's first bytes to its end).
final class RequestState {
    var head = RequestHead()
    var requestBody = BodyReader()
    var response = ResponseState()
    /// The request head's bytes (`head`'s ranges point here): a buffer from the loop's pool.
    var headStore = ByteBuffer()
    /// The upstream request head, kept so a request that met a stale pooled connection can be resent.
    var upstreamHead = ByteBuffer()
    /// `.collectBody`: the body read so far, its limit and who gets it.
    var collected = ByteBuffer()
    var collectLimit = 0
    var collectHandler: (@Sendable ([UInt8], ResponseSink) -> Void)?
    /// The phases' view of the request (`HTTPPhases.context(for:)`), made when its head parsed
    /// (`dispatch`). Only phases read it, and they run only for a request whose head parsed.
    var context = RequestContext.none
    // Access-log bookkeeping.
    var requestStart: UInt64 = 0
    var upstreamStart: UInt64 = 0
    var upstreamEnd: UInt64 = 0
    var statusSent = 0
    var requestBodyBytes: UInt64 = 0
    /// What failed, if anything: the first error the request met (for its access-log line).
    var error: EngineError? = nil
    /// The server this request's attempt goes to, those it tried, the connections begun: what
    /// decides where a failed attempt goes next (`UpstreamAttempt`).
    var attempt = UpstreamAttempt()
    /// The upstream group it goes to (`routes:`; 0: the default group).
    var group = 0
    /// The request body read here before the upstream is connected (`buffering.requests`),
    /// while `bufferingBody`; what it reserved of the read-ahead budget.
    var bufferingBody = false
    var bodyBuffer = ByteBuffer()
    var bodyReserved = 0
    /// Whether splicing the request body was considered (`startRequestSpliceIfWorthIt`): once,
    /// as for responses (`ResponseState.spliceConsidered`).
    var bodySpliceConsidered = false

    deinit {
        headStore.free()
        upstreamHead.free()
        collected.free()
    }
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

    /// Takes the connection's state back (nil afterwards), its buffers to `buffers`. Only at a
    /// request boundary or at close.
    @inline(__always)
    func recycle(_ state: inout RequestState?, buffers: BufferPool) {
        guard let s = state else { return }
        state = nil
        buffers.recycle(&s.headStore)
        buffers.recycle(&s.upstreamHead)
        // A collection cut short: its bytes and its handler (which may hold a request's
        // context) go now, not when this state is next used.
        if s.collected.base != nil { s.collected.free() }
        if s.bodyBuffer.base != nil { s.bodyBuffer.free() }
        s.bufferingBody = false
        s.response.encoder = nil
        s.collectHandler = nil
        if free.count < limit { free.append(s) }
    }
}
