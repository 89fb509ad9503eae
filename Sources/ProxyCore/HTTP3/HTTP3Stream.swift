import CNghttp3

/// One HTTP/3 request stream of an `HTTP3Connection`, under the `ClientExchange` it owns —
/// `HTTP2Stream`'s counterpart: the request as nghttp3 decodes it (`request`, until it reaches
/// the exchange as an HTTP/1.1 head), the response heads until nghttp3 takes them, the
/// response bytes nghttp3 holds until the client acknowledges them (`sent`), and the
/// exchange's timer and wish to read — swept and read by its connection.
final class HTTP3Stream: BudgetedStream {
    unowned(unsafe) let connection: HTTP3Connection
    let id: Int64
    let exchange: ClientExchange
    var request = HTTP3RequestHead()
    /// When the exchange's timer passes (0: none); swept by the connection.
    var deadline: UInt64 = 0
    /// The exchange wants request bytes: DATA it passed on is credited back to the client.
    private(set) var wantsRead = false
    /// DATA bytes delivered to the exchange and not yet credited back.
    var unconsumed = 0
    /// In the connection's `pending` list.
    var queued = false
    /// Response heads written and not yet submitted (1xx ones, then the final one).
    var heads: [StreamHeadWriter] = []
    var responseSubmitted = false
    /// The exchange finished its response: the stream's FIN follows its last byte.
    var responseDone = false
    /// nghttp3 closed the stream.
    var finished = false
    /// nghttp3 asked for body bytes and got none (`NGHTTP3_ERR_WOULDBLOCK`): it asks again
    /// only after `nghttp3_conn_resume_stream`.
    var deferred = false
    /// Response bytes nghttp3 holds until the client acknowledges them (`UnackedBytes`).
    private var sent = UnackedBytes()
    var unacked: Int { sent.count }
    /// How the stream counts in the client-connection budget (`HTTP3Connection+Admission`): on
    /// its connection's own unit, or on one of its own; waiting for either (since
    /// `waitingSince`); or refused after waiting too long.
    var holdsConnectionUnit = false
    var budgetUnit: ConnectionBudget? = nil
    var waitingSince: UInt64 = 0
    var refused = false
    /// Past this many unacknowledged bytes nghttp3 gets no more until acknowledgements come:
    /// with the exchange's output, a stream's memory is bounded whatever the client's pace.
    static let unackedLimit = UnackedBytes.limit

    init(connection: HTTP3Connection, id: Int64) {
        self.connection = connection
        self.id = id
        exchange = ClientExchange(loop: connection.loop, listener: connection.listener, peer: connection.peer)
        exchange.peerText = connection.peerTextCache
        exchange.downstream = .quicStream(.init(self))
    }

    deinit { sent.release() }

    @inline(__always)
    func want(read: Bool, write: Bool) {
        wantsRead = read
        if read && unconsumed > 0 { connection.creditStream(self) }
    }

    // MARK: Request bytes

    @inline(__always)
    func prepareInput() {
        if exchange.input.base == nil { exchange.input = connection.loop.buffers.take() }
    }

    /// Request bytes (the head, DATA, the end) arrived.
    func received() {
        let x = exchange
        if refused {
            x.input.clear()
            guard !x.isClosed else { return }
            connection.resetStream(id, code: UInt64(NGHTTP3_H3_REQUEST_REJECTED))
            x.end(.downstreamGone)
            return
        }
        if !x.isLingering && x.isIdle, let malformed = request.malformed {
            // RFC 9114 §4.1.2: a malformed request is a stream error of type H3_MESSAGE_ERROR.
            x.input.clear()
            x.logProblem(.info, "malformed HTTP/3 request", key: "h3 malformed", [("reason", "\(malformed)")])
            connection.resetStream(id, code: UInt64(NGHTTP3_H3_MESSAGE_ERROR))
            x.end(.downstreamGone)
            return
        }
        x.streamInputArrived(refusal: request.refusal)
    }

    // MARK: Response

    /// The response heads go to nghttp3, the body waits in the exchange's output for nghttp3
    /// to pull it (`HTTP3Callbacks.readBody`) as QUIC's flow control allows.
    func flush() {
        let x = exchange
        let c = connection
        if !responseSubmitted {
            guard !heads.isEmpty else { return }
            // A request from early data answered before the 1-RTT keys: nghttp3 takes a
            // response only once our QPACK streams are open; it waits for them.
            guard c.streamsBound else {
                // Once: a stream may flush again before they open.
                if !c.heldForStreams.contains(where: { $0 === self }) { c.heldForStreams.append(self) }
                return
            }
            guard HTTP3Response.submitHeads(self, c) else {
                x.logProblem(.warn, "cannot send the response head over HTTP/3", key: "h3 head", [])
                x.abort(.invalidStreamHead)
                return
            }
            if !responseSubmitted { c.scheduleWrite(); return }  // 1xx only so far
        } else if deferred && (!x.output.isEmpty || responseDone) && unacked < Self.unackedLimit {
            deferred = false
            if let h3 = c.h3 { nghttp3_conn_resume_stream(h3, id) }
        }
        c.scheduleWrite()
        x.streamFlushed()
    }

    func outputDrained() {
        guard exchange.output.isEmpty else { return }
        exchange.outputSent()
    }

    func responseFinished() {
        responseDone = true
        exchange.input.clear()
        flush()
    }

    /// Moves what `sent` has room for of the exchange's output into it; the chunk nghttp3 is to
    /// send (nil: nothing to send, or no room until acknowledgements come).
    func takeOutput() -> UnsafeMutableRawBufferPointer? {
        let x = exchange
        let n = min(x.output.readable, sent.room)
        guard n > 0 else { return nil }
        let chunk = sent.keep(copying: UnsafeRawBufferPointer(start: x.output.base! + x.output.reader, count: n))
        x.output.moveReader(n)
        x.bytesOut += UInt64(n)
        return chunk
    }

    /// The client acknowledged `count` more bytes. True when the stream waited for
    /// acknowledgements and may now be given more (once half the limit is free again).
    func acknowledged(_ count: Int) -> Bool {
        sent.acknowledge(count)
        return deferred && sent.count <= Self.unackedLimit / 2 && (!exchange.output.isEmpty || responseDone)
    }

    // MARK: Ending

    /// nghttp3 closed the stream: after its FIN both ways, or reset, or with the connection.
    func closed(errorCode: UInt64) {
        guard !finished else { return }
        finished = true
        connection.forget(self)
        connection.streamEnded(self)
        sent.release()
        if exchange.streamClosed(errorCode: errorCode == UInt64(NGHTTP3_H3_NO_ERROR) ? 0 : 1, responseDone: responseDone) {
            connection.listener.engineMetrics.http3.resetsReceived.increment()
        }
    }

    /// The exchange is over before nghttp3 closed the stream. A response handed to nghttp3 in
    /// full is left to finish (QUIC's RESET_STREAM would drop what is not yet sent, unlike
    /// HTTP/2's RST_STREAM after the DATA); anything else is reset both ways.
    func exchangeClosed() {
        guard !finished else { return }
        if responseDone && responseSubmitted && exchange.output.isEmpty { return }
        connection.resetStream(id, code: UInt64(NGHTTP3_H3_INTERNAL_ERROR))
    }
}
