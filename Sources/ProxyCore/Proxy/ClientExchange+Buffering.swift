/// Responses read ahead of a slow client (`BufferingSettings`): how far the upstream is read
/// before it waits for the client (`ResponseState.window`), and the memory that takes.
extension ClientExchange {
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
        listener.bufferingBudget?.release(bufferingReserved)
        bufferingReserved = 0
        if current != nil { response.window = Exchange.highWater }
    }
}
