/// What the stream kinds (`HTTP2Stream`, `HTTP3Stream`) ask of their exchange alike.
extension ClientExchange {
    /// Request bytes (the head, body bytes, the end) arrived on a stream. After the response
    /// they have nowhere to go; a head the stream's own rewrite refused (`StreamRequestHead`'s
    /// `refusal`: a header list past the limit, `:authority` and `Host` that differ) is answered
    /// as the parser's refusals are.
    func streamInputArrived(refusal: (status: Int, reason: String)?) {
        if isLingering {
            input.clear()
            return
        }
        if isIdle, let refusal {
            input.clear()
            refuseHead(.invalidHead(status: refusal.status, refusal.reason))
            return
        }
        inputArrived()
    }

    /// The stream's library took the heads and pulls the body from `output` as its flow control
    /// allows: the exchange reads on once the output is empty, else waits for it to drain.
    func streamFlushed() {
        if output.isEmpty {
            outputSent()
        } else {
            outputWaiting(readMore: wantsInput)
        }
    }
}
