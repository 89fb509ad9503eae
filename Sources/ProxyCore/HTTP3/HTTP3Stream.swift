import CNghttp3

/// One HTTP/3 request stream of an `HTTP3Connection`, under the `ClientExchange` it owns —
/// `HTTP2Stream`'s counterpart: the request as nghttp3 decodes it (`request`, until it reaches
/// the exchange as an HTTP/1.1 head), the response heads until nghttp3 takes them, the
/// response bytes nghttp3 holds until the client acknowledges them (`sent`), and the
/// exchange's timer and wish to read — swept and read by its connection.
///
/// What the libraries report arrives through the `received…`, `pullBody`, `acknowledged` and
/// `closed` members (called from `HTTP3Callbacks`, or from a test's host); what the stream asks
/// of them goes through its host (`HTTP3StreamHost`).
final class HTTP3Stream: BudgetedStream {
    unowned(unsafe) let host: any HTTP3StreamHost
    let id: Int64
    let exchange: ClientExchange
    var request = HTTP3RequestHead()
    /// When the exchange's timer passes (0: none); swept by the connection.
    var deadline: UInt64 = 0
    /// The exchange wants request bytes: DATA it passed on is credited back to the client.
    private(set) var wantsRead = false
    /// DATA bytes delivered to the exchange and not yet credited back.
    private(set) var unconsumed = 0
    /// In the connection's `pending` list.
    var queued = false
    /// Response heads written and not yet submitted (1xx ones, then the final one).
    var heads: [StreamHeadWriter] = []
    private(set) var responseSubmitted = false
    /// The exchange finished its response: the stream's FIN follows its last byte.
    private(set) var responseDone = false
    /// nghttp3 closed the stream.
    private(set) var finished = false
    /// nghttp3 asked for body bytes and got none (`NGHTTP3_ERR_WOULDBLOCK`): it asks again
    /// only after `resume`.
    private(set) var deferred = false
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

    init(host: any HTTP3StreamHost, id: Int64) {
        self.host = host
        self.id = id
        exchange = ClientExchange(loop: host.loop, listener: host.listener, peer: host.peer)
        exchange.peerText = host.peerTextCache
        exchange.downstream = .quicStream(.init(self))
    }

    deinit { sent.release() }

    @inline(__always)
    func want(read: Bool, write: Bool) {
        wantsRead = read
        if read && unconsumed > 0 { creditIfWanted() }
    }

    /// Gives the client back credit for the DATA bytes the exchange has passed on, if it wants
    /// more (as over HTTP/2: a stream that is not read holds the client to its window).
    func creditIfWanted() {
        guard unconsumed > 0, exchange.input.isEmpty, !exchange.isClosed, wantsRead else { return }
        host.credit(id, bytes: unconsumed)
        unconsumed = 0
    }

    // MARK: Request bytes (from nghttp3's callbacks)

    @inline(__always)
    private func prepareInput() {
        if exchange.input.base == nil { exchange.input = host.loop.buffers.take() }
    }

    /// The request's HEADERS are complete (`endStream`: FIN came with them). `early`: they
    /// completed in 0-RTT packets, which an attacker could replay (ones completed later needed
    /// the handshake): the exchange serves such a request only if that is safe (`EarlyData`).
    func receivedHead(endStream: Bool, early: Bool) {
        if early { exchange.earlyData = true }
        prepareInput()
        request.deliverHead(into: &exchange.input, endStream: endStream)
        host.markPending(self)
    }

    /// Request DATA. False if the exchange is done with the stream: the bytes are dropped, and
    /// the caller gives their credit back at once.
    func receivedData(_ data: UnsafeRawBufferPointer) -> Bool {
        guard !exchange.isClosed else { return false }
        prepareInput()
        request.deliverData(data, into: &exchange.input)
        unconsumed += data.count
        exchange.bytesIn += UInt64(data.count)
        host.markPending(self)
        return true
    }

    /// The request stream's FIN.
    func receivedEnd() {
        prepareInput()
        request.deliverEnd(into: &exchange.input)
        host.markPending(self)
    }

    /// The stream was marked pending and the library has returned: its exchange reads what
    /// arrived (unless it still waits for a budget unit).
    func run() {
        queued = false
        if waitingSince != 0 { return }  // runs once admitted
        received()
        creditIfWanted()
    }

    /// Request bytes (the head, DATA, the end) arrived.
    func received() {
        let x = exchange
        if refused {
            x.input.clear()
            guard !x.isClosed else { return }
            host.resetStream(id, code: UInt64(NGHTTP3_H3_REQUEST_REJECTED))
            x.end(.downstreamGone)
            return
        }
        if !x.isLingering && x.isIdle, let malformed = request.malformed {
            // RFC 9114 §4.1.2: a malformed request is a stream error of type H3_MESSAGE_ERROR.
            x.input.clear()
            x.logProblem(.info, "malformed HTTP/3 request", key: "h3 malformed", [("reason", "\(malformed)")])
            host.resetStream(id, code: UInt64(NGHTTP3_H3_MESSAGE_ERROR))
            x.end(.downstreamGone)
            return
        }
        x.streamInputArrived(refusal: request.refusal)
    }

    // MARK: Response

    /// The response heads go to nghttp3, the body waits in the exchange's output for nghttp3
    /// to pull it (`pullBody`) as QUIC's flow control allows.
    func flush() {
        let x = exchange
        if !responseSubmitted {
            guard !heads.isEmpty else { return }
            // A request from early data answered before the 1-RTT keys: nghttp3 takes a
            // response only once our QPACK streams are open; it waits for them.
            guard host.streamsBound else {
                host.holdForStreams(self)
                return
            }
            guard submitHeads() else {
                x.logProblem(.warn, "cannot send the response head over HTTP/3", key: "h3 head", [])
                x.abort(.invalidStreamHead)
                return
            }
            if !responseSubmitted { host.scheduleWrite(); return }  // 1xx only so far
        } else if deferred && (!x.output.isEmpty || responseDone) && unacked < Self.unackedLimit {
            resume()
        }
        host.scheduleWrite()
        x.streamFlushed()
    }

    /// Submits the heads written so far (1xx ones, then the final one). With the response
    /// complete and no body left, the final one goes without a body (FIN on HEADERS). False if
    /// nghttp3 refused one.
    private func submitHeads() -> Bool {
        let x = exchange
        let written = heads
        heads.removeAll()
        for head in written {
            guard head.isFinal else {
                guard host.submitInformational(head, on: id) else { return false }
                continue
            }
            let bodiless = responseDone && x.output.isEmpty
            guard host.submitResponse(head, withBody: !bodiless, on: id) else { return false }
            responseSubmitted = true
            if bodiless && !x.requestBodyDone { host.stopReading(id) }
        }
        return true
    }

    /// nghttp3 may ask for body bytes again.
    func resume() {
        guard deferred, !finished else { return }
        deferred = false
        host.resumeBody(id)
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

    /// What nghttp3 sends next of the body (`HTTP3Callbacks.readBody`): a chunk of the exchange's
    /// output, moved into `sent` as far as `unackedLimit` allows, and whether the body ends with
    /// it. Nil: nothing now (nghttp3 waits for `resume`).
    func pullBody() -> (chunk: UnsafeMutableRawBufferPointer?, end: Bool)? {
        let x = exchange
        guard !x.isClosed || responseDone else {
            // Aborted mid-response: its reset is on the way (`exchangeClosed`); nothing more comes.
            deferred = true
            return nil
        }
        let chunk = takeOutput()
        if x.output.isEmpty {
            x.output.clear()
            if responseDone {
                if !x.requestBodyDone { host.markEndedEarly(self) }
                return (chunk, true)
            }
            host.markDrained(self)
        }
        guard chunk != nil else {
            deferred = true
            return nil
        }
        return (chunk, false)
    }

    /// Moves what `sent` has room for of the exchange's output into it; the chunk nghttp3 is to
    /// send (nil: nothing to send, or no room until acknowledgements come).
    private func takeOutput() -> UnsafeMutableRawBufferPointer? {
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
        host.streamClosed(self)
        sent.release()
        if exchange.streamClosed(errorCode: errorCode == UInt64(NGHTTP3_H3_NO_ERROR) ? 0 : 1, responseDone: responseDone) {
            host.listener.engineMetrics.http3.resetsReceived.increment()
        }
    }

    /// The exchange is over before nghttp3 closed the stream. A response handed to nghttp3 in
    /// full is left to finish (QUIC's RESET_STREAM would drop what is not yet sent, unlike
    /// HTTP/2's RST_STREAM after the DATA); anything else is reset both ways.
    func exchangeClosed() {
        guard !finished else { return }
        if responseDone && responseSubmitted && exchange.output.isEmpty { return }
        host.resetStream(id, code: UInt64(NGHTTP3_H3_INTERNAL_ERROR))
    }
}
