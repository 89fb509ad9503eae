/// Bodies read ahead of the slow side (`BufferingSettings`): a response, as far as the upstream
/// is read before it waits for the client (`ResponseState.window`); a request body, read whole
/// before the upstream is connected; and the memory both take.
extension ClientExchange {
    /// Whether this request's body is read here before the upstream is connected (and the
    /// reservation made). A body that says its length and fits in `buffering.requests`, or a
    /// chunked one (read up to that much, the rest streams). An HTTP/1.1 client that waits for
    /// `100 Continue` gets it from us.
    func startsBufferingRequest() -> Bool {
        let limit = config.buffering.requests
        guard !machine.requestBodyDone, !head.upgrade else { return false }
        var size = limit
        switch head.framing {
        case .contentLength(let n):
            guard n <= UInt64(limit) else { return false }
            size = Int(n)
        case .chunked:
            break
        case .none, .untilClose:
            return false
        }
        // An HTTP/2 client's Expect is rare; such a request streams as before.
        if head.expectContinue && machine.isStream { return false }
        guard let budget = listener.bufferingBudget, budget.reserve(size) else { return false }
        current!.bodyReserved = size
        current!.bufferingBody = true
        if current!.bodyBuffer.base == nil { current!.bodyBuffer = ByteBuffer(capacity: min(size, 1 << 20)) }
        if head.expectContinue && head.version == .http11 {
            output.append("HTTP/1.1 100 Continue\r\n\r\n")
            machine.continueSent()
            flush()
        }
        return true
    }

    /// Request body bytes arrived while it is read ahead: into the side buffer (so that an
    /// HTTP/2 stream's window reopens as for any body), then, once it is all there — or
    /// `buffering.requests` is reached — to the upstream.
    func bufferRequestBody() {
        let step = requestBody.transfer(from: &input, to: &current!.bodyBuffer, chunkedOut: head.framing == .chunked)
        requestBodyBytes = requestBody.total
        if config.maxBodySize > 0 && requestBodyBytes > config.maxBodySize {
            finishBufferingRequest()
            respondError(.bodyTooLarge(limit: config.maxBodySize))
            return
        }
        switch step {
        case .more:
            if current!.bodyBuffer.readable < config.buffering.requests {
                want(read: true, write: !output.isEmpty)
                return
            }
        case .done:
            arm(machine.requestBodyEnded())
        case .error(let e):
            arm(machine.requestBodyEnded())
            finishBufferingRequest()
            respondError(.invalidBody(e))
            return
        }
        finishBufferingRequest()
        connectUpstream(fresh: false)
        if machine.isProxying { flush() }
    }

    /// The body is read (or as much as may be): the reservation goes back.
    func finishBufferingRequest() {
        guard current!.bufferingBody else { return }
        current!.bufferingBody = false
        listener.bufferingBudget?.release(current!.bodyReserved)
        current!.bodyReserved = 0
    }

    /// Called as the upstream's final head arrives (its fields in `buffer`): whether this
    /// response may be read ahead, and how far.
    func decideBuffering(_ buffer: UnsafeRawBufferPointer) {
        let limit = config.buffering.responses
        var ahead = limit
        switch response.head.framing {
        case .none:
            return
        case .contentLength(let n):
            // What fits in the window anyway needs nothing; what does not fit in N streams.
            guard n > UInt64(Exchange.highWater), n <= UInt64(limit) else { return }
            ahead = Int(n)
        case .chunked, .untilClose:
            break
        }
        guard head.method != .head else { return }
        let bytes = buffer.baseAddress!
        for field in response.head.headers {
            let value = UnsafeRawBufferPointer(start: bytes + field.value.start, count: field.value.count)
            if nameMatches("Content-Type", bytes, field.name) && CompressionDecision.typeMatches(value, ["text/event-stream"]) { return }
            if nameMatches("X-Accel-Buffering", bytes, field.name) && WeightedList.contains(value, "no") { return }
        }
        // (A previous response on this connection may still hold a reservation: its bytes are
        // nearly out. Its share is given back before this one takes its own.)
        if bufferingReserved != 0 { releaseBuffering() }
        guard let budget = listener.bufferingBudget, budget.reserve(ahead) else { return }
        bufferingReserved = ahead
        response.window = Exchange.highWater + ahead
    }

    /// The response is read and its client has taken everything (or is gone): the reservation
    /// goes back.
    func releaseBuffering() {
        if current?.bufferingBody == true { finishBufferingRequest() }
        listener.bufferingBudget?.release(bufferingReserved)
        bufferingReserved = 0
        if current != nil { response.window = Exchange.highWater }
    }
}
