import CNghttp2

/// One HTTP/2 stream of an `HTTP2Connection`, under the `ClientExchange` it owns: the request
/// as nghttp2 decodes it (`request`, until it is delivered to the exchange as an HTTP/1.1
/// head), the response heads until they go out as HEADERS, the stream's flow-control and
/// ending state, and the exchange's timer and wish to read — swept and read by its connection,
/// since a stream has no socket of its own.
final class HTTP2Stream: BudgetedStream {
    unowned(unsafe) let connection: HTTP2Connection
    let id: Int32
    let exchange: ClientExchange
    var request = StreamRequestHead()
    /// When the exchange's timer passes (0: none); swept by the connection (`onTimeout`).
    var deadline: UInt64 = 0
    /// The exchange wants request bytes: DATA it passed on is credited back to the peer.
    private(set) var wantsRead = false
    /// DATA bytes delivered to the exchange and not yet given back to the peer's window.
    var unconsumed = 0
    /// In the connection's `pending` list.
    var queued = false
    /// Response heads written and not yet submitted (1xx ones, then the final one).
    var heads: [StreamHeadWriter] = []
    /// The response HEADERS went to nghttp2.
    var responseSubmitted = false
    /// The exchange finished its response: END_STREAM once its output is sent.
    var responseDone = false
    /// nghttp2 closed the stream.
    var finished = false
    /// How the stream counts in the client-connection budget (`HTTP2Connection.admitWaiting`):
    /// it runs on its connection's own unit, or on one of its own from the budget, or it waits
    /// (since `waitingSince`) for either. Given back when the stream ends.
    var holdsConnectionUnit = false
    var budgetUnit: ConnectionBudget? = nil
    var waitingSince: UInt64 = 0
    /// It waited too long and was refused (`REFUSED_STREAM`): it never ran.
    var refused = false

    init(connection: HTTP2Connection, id: Int32) {
        self.connection = connection
        self.id = id
        exchange = ClientExchange(loop: connection.loop, listener: connection.listener, peer: connection.peer)
        exchange.peerText = connection.peerTextCache
        exchange.downstream = .stream(.init(self))
    }

    /// The largest header list accepted (and advertised in SETTINGS_MAX_HEADER_LIST_SIZE):
    /// the HTTP/1.1 head limit plus RFC 9113's 32 bytes of overhead per field.
    static func headerListLimit(_ limits: HTTPLimits) -> Int {
        limits.maxHeadBytes + 32 * limits.maxHeaderCount
    }

    /// Whether the exchange reads: while it does, the peer gets window back for what it has
    /// passed on (`HTTP2Connection.creditStream`). Writing is nghttp2's to pace: the body waits
    /// in the exchange's output until DATA takes it.
    @inline(__always)
    func want(read: Bool, write: Bool) {
        wantsRead = read
        if read && unconsumed > 0 { connection.creditStream(self) }
    }

    // MARK: Request bytes

    /// Before nghttp2's callbacks write request bytes into the exchange's input.
    @inline(__always)
    func prepareInput() {
        if exchange.input.base == nil { exchange.input = connection.loop.buffers.take() }
    }

    /// Request bytes (the head, DATA, the end) arrived from the connection.
    func received() {
        exchange.streamInputArrived(refusal: request.refusal)
    }

    // MARK: Response

    /// The response heads go to nghttp2 as HEADERS, the body waits in the exchange's output for
    /// nghttp2 to pull it (`HTTP2Callbacks.readBody`) as the peer's windows allow.
    func flush() {
        let x = exchange
        let c = connection
        if !responseSubmitted {
            guard !heads.isEmpty else { return }
            guard HTTP2Response.submitHeads(self, c) else {
                x.logProblem(.warn, "cannot send the response head over HTTP/2", key: "h2 head", [])
                x.abort(.invalidStreamHead)
                return
            }
            if !responseSubmitted { c.scheduleSend(); return }  // 1xx only so far
        } else if !x.output.isEmpty || responseDone {
            nghttp2_session_resume_data(c.session, id)
        }
        c.scheduleSend()
        x.streamFlushed()
    }

    /// nghttp2 took everything in the output: read the upstream again (it may have been paused).
    func outputDrained() {
        guard exchange.output.isEmpty else { return }
        exchange.outputSent()
    }

    /// The response is complete in the output; END_STREAM follows its last byte. A request body
    /// not read to its end is cut by `RST_STREAM NO_ERROR` then.
    func responseFinished() {
        responseDone = true
        exchange.input.clear()
        flush()
    }

    // MARK: Ending

    /// nghttp2 closed the stream: normally after its END_STREAM both ways, or because the client
    /// reset it, or with the connection. An exchange still in flight is aborted (its upstream
    /// request with it).
    func closed(errorCode: UInt32) {
        finished = true
        connection.streamEnded(self)
        connection.forget(id)
        if refused {
            // Refused while it waited for a budget unit: it never ran.
            exchange.end(.downstreamGone)
            return
        }
        if exchange.streamClosed(errorCode: errorCode, responseDone: responseDone) {
            connection.listener.engineMetrics.http2.resetsReceived.increment()
        }
    }

    /// The exchange is over before nghttp2 closed the stream (an abort: the upstream failed
    /// mid-response, a timeout): the stream is reset.
    func exchangeClosed() {
        guard !finished else { return }
        // NO_ERROR only for a response that is out in full; a cut one is an error the client
        // must see as such.
        connection.resetStream(id, code: responseDone && exchange.output.isEmpty ? NGHTTP2_NO_ERROR : NGHTTP2_INTERNAL_ERROR)
    }
}
