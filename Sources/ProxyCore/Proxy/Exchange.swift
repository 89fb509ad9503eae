/// The lifecycle of the requests on one client connection, as a pure state machine.
///
/// `ClientExchange` is the I/O shell (with its downstream, which owns the socket or the
/// stream): it parses, pumps bodies and runs the phases; whenever something happens that moves the request on — a head parsed, a
/// phase decided, the request body ended, the response began or ended, the client closed, a
/// deadline passed, a drain or a reload — it reports it here and performs what comes back.
/// No sockets, buffers or clocks in here, so every path of the lifecycle can be driven by a
/// test (ExchangeTests) and a new rule is written down once, in the state it belongs to.
///
/// After SwiftNIO's `HTTPServerPipelineHandler` (mutating transitions that return what to do)
/// and NIOHTTP2's connection state machine: each state's data lives inside its case, so an
/// impossible combination — a request body still arriving on an idle connection, a deferred
/// answer token without a deferred decision — cannot be written down.
///
/// Requests are served one at a time: a pipelined request waits in the connection's input
/// until the one before it has been answered. An HTTP/2 stream runs the same machine
/// (`isStream`): one request, then the stream ends instead of the next request.
///
/// The machine also decides which timer runs (`timer`, Exchange+Timer.swift): every transition
/// that changes it returns a `TimerChange` — kind and duration, or none — and the shell arms
/// exactly that, in one place (`ClientExchange.arm`). A result left unused is a warning, and
/// warnings fail the build: a forgotten timer does not compile.
///
/// Everything here runs on the connection's loop, per request: small value types, no
/// allocation, transitions inlined into the shell.
struct Exchange {
    enum State: Equatable {
        /// Between requests: waiting for a head (its first bytes may already be buffered).
        case idle
        /// A head parsed (or was refused before parsing); the request phase has not decided yet.
        case dispatching(Request)
        /// A phase decides later (`.deferred`, or `.collectBody` once the body is in). Only the
        /// answer carrying `token` is taken: an older one belongs to a request that is gone.
        case deciding(Request, token: UInt64)
        /// Reading the request body for a phase (`.collectBody`).
        case collecting(Request)
        /// Forwarded upstream: the request body may still be arriving, the response may have begun.
        case proxying(Request)
        /// After a 101 Switching Protocols: bytes both ways until either side closes. The
        /// request's access-log line is written when the connection closes.
        case tunnel
        /// The response is out and said keep-alive; the request body is not all in. Its rest is
        /// read and dropped — `from`: the body bytes read when that began — then the next request.
        case discarding(from: UInt64)
        /// The last response is written or being written. Once it is out, the write side is shut
        /// and input read until the client's FIN, so that unread input does not turn our close
        /// into a reset that destroys the response at the client (see `Linger`).
        case lingering(Linger)
        case closed
    }

    /// What the machine knows about the request in flight.
    struct Request: Equatable {
        /// The request body has been read to its end (or there is none, or it failed: nothing
        /// more of it will be read as a body).
        var bodyDone: Bool
        /// The connection ends after this response (`Connection: close` from either side, a
        /// refusal, a body left unread, a drain).
        var closeAfter: Bool
        /// The client asked for the close in a head that parsed: it may send nothing more
        /// (RFC 9112 §9.6), so the close need not linger (`responseFinished`).
        var clientAskedClose: Bool
        /// The client was told to wait for `100 Continue` (`Expect`) and has not had one: it may
        /// never send the body, so the body cannot be read and dropped after the response.
        var awaitingContinue: Bool
        /// Close without lingering whatever else is true (a client that trickled its head).
        var skipLinger: Bool = false
        /// A response head went to the client (`responseHead`, `respondLocally`): from now on
        /// a failure can only cut the connection, not answer.
        var responseStarted: Bool = false
    }

    struct Linger: Equatable {
        /// Close as soon as the output is written, without the half-close and the reads.
        var skip: Bool
        /// The request's access-log line is still owed (a tunnel its upstream ended).
        var unlogged: Bool
        /// The request body was read to its end. An HTTP/2 stream whose body was not ends with
        /// `RST_STREAM NO_ERROR` after its response.
        var bodyDone: Bool
        /// The lingering close's clock, once the output is out and the reads began.
        var clock = LingeringClose()
    }

    private(set) var state: State = .idle
    /// An HTTP/2 stream: one request, no keep-alive, no lingering of its own.
    var isStream = false
    /// A response went out on this connection (h2c with prior knowledge is only taken first).
    private(set) var servedAny = false
    /// The listener drains: every response from now on closes its connection.
    private(set) var draining = false
    /// The last token handed to a deferred decision (`deciding`).
    private var lastToken: UInt64 = 0
    /// The timer running now (one at a time), and how long each kind runs (the listener's).
    /// Changed only by transitions (here and in Exchange+Timer.swift).
    var timer: Deadline = .none
    var timeouts = Timeouts()

    /// Bytes buffered towards a slow reader before we stop reading from the other side.
    static let highWater = 256 * 1024
    /// Bytes of pipelined requests buffered while the current one is in flight.
    static let pipelineLimit = 64 * 1024
    /// The most request body a connection reads and drops after its response to stay open
    /// (nginx discards any amount; an upload larger than this is cheaper to cut off).
    static let discardLimit: UInt64 = 1 << 20
}

/// The transitions: one per event the connection reports, named for the event. Each returns
/// what the connection must do, or nothing where the connection's next step does not depend
/// on it. A transition reported in a state it cannot happen in is a bug in the shell: it
/// asserts in debug builds; in release ones it leaves the state alone, or (a response finished
/// without a request) closes the connection.
extension Exchange {
    // MARK: A request begins

    /// A head parsed; the request phase decides next.
    /// - keepAlive: the head allows another request after this one.
    /// - bodyDone: it has no body (or an empty one).
    /// - expectContinue: the client waits for `100 Continue` before it sends its body.
    /// - draining: the listener drains (sticky: every later response closes too).
    /// No timer runs while the phases decide.
    @inline(__always)
    mutating func headParsed(keepAlive: Bool, bodyDone: Bool, expectContinue: Bool,
                             draining listenerDraining: Bool) -> TimerChange {
        assert(isIdle, "a head parsed while a request is in flight")
        if _slowPath(listenerDraining) { draining = true }
        state = .dispatching(Request(bodyDone: bodyDone, closeAfter: !keepAlive || draining,
                                     clientAskedClose: !keepAlive, awaitingContinue: expectContinue && !bodyDone))
        return stop()
    }

    /// A request refused before a head could be read from it (an unparsable head, a refused
    /// HTTP/2 stream, a head that did not arrive in time): its answer follows
    /// (`respondLocally`), and the connection closes after it — without lingering when
    /// `skipLinger` (a client that trickles bytes would keep us waiting).
    mutating func headRefused(skipLinger: Bool = false) -> TimerChange {
        state = .dispatching(Request(bodyDone: true, closeAfter: true, clientAskedClose: false,
                                     awaitingContinue: false, skipLinger: skipLinger))
        return stop()
    }

    // MARK: The request phase decided

    /// The request goes upstream (at once, or after a deferred decision). The body timer runs
    /// while its body arrives.
    @inline(__always)
    mutating func proxy() -> TimerChange {
        switch state {
        case .dispatching(let r), .deciding(let r, _):
            state = .proxying(r)
            return r.bodyDone ? stop() : run(.body)
        default:
            assertionFailure("proxy() while \(state)")
            return .keep
        }
    }

    /// A phase reads the whole body first (`.collectBody`): the body timer runs.
    mutating func collectBody() -> TimerChange {
        guard case .dispatching(let r) = state else { assertionFailure("collectBody() while \(state)"); return .keep }
        state = .collecting(r)
        return run(.body)
    }

    /// A phase decides later. Returns the token its answer must carry to be taken. No timer
    /// runs: the phase answers (the identity provider's own timeout bounds the wait).
    mutating func awaitDecision() -> (token: UInt64, timer: TimerChange) {
        lastToken &+= 1
        switch state {
        case .dispatching(let r), .collecting(let r): state = .deciding(r, token: lastToken)
        default: assertionFailure("awaitDecision() while \(state)")
        }
        return (lastToken, stop())
    }

    /// Whether a deferred answer is for the decision this connection waits for: not when the
    /// request it was for was answered or aborted meanwhile (and maybe another one began).
    func takesDecision(token: UInt64) -> Bool {
        if case .deciding(_, let t) = state { return t == token }
        return false
    }

    // MARK: The request body

    /// The request body was read to its end — or its framing failed, and nothing more of it
    /// will be read as body.
    /// The body timer stops.
    @inline(__always)
    mutating func requestBodyEnded() -> TimerChange {
        updateRequest { $0.bodyDone = true }
        return timer == .body ? stop() : .keep
    }

    /// Request body bytes arrived (or moved on, spliced): the body timer starts over — it
    /// bounds the gap between two reads, not the whole body.
    @inline(__always)
    func requestBodyArrived() -> TimerChange {
        timer == .body ? .arm(.body, after: timeouts.clientBody) : .keep
    }

    /// A `100 Continue` went to the client: it sends its body now.
    mutating func continueSent() {
        updateRequest { $0.awaitingContinue = false }
    }

    // MARK: The response

    /// The upstream's response head goes to the client; returns its `Connection` field.
    /// - switching: a 101 (the tunnel follows: `switchedProtocols`).
    /// - bodyEndsWithClose: the body can only end with the connection (a body read to the
    ///   upstream's close, for a client that cannot take it re-framed).
    /// - bodyLeft: request body bytes still to come, if known (read only when it matters).
    /// - draining: the listener drains.
    @inline(__always)
    mutating func responseHead(switching: Bool, bodyEndsWithClose: Bool, bodyLeft: @autoclosure () -> UInt64?,
                               draining listenerDraining: Bool) -> ConnectionField {
        guard case .proxying(var r) = state else {
            assertionFailure("responseHead() while \(state)")
            return .close
        }
        r.responseStarted = true
        if switching {
            state = .proxying(r)
            return .upgrade
        }
        if bodyEndsWithClose { r.closeAfter = true }
        // The upstream answers before the request body is all in (a 413, a redirect, an app
        // that does not read it): the client hears `Connection: close` unless the body's rest
        // can be read and dropped once the response is out (`discarding`).
        if !r.bodyDone && !canDiscardRequestBody(bodyLeft: bodyLeft()) { r.closeAfter = true }
        if _slowPath(listenerDraining) { draining = true }
        if draining { r.closeAfter = true }
        state = .proxying(r)
        return r.closeAfter ? .close : .keepAlive
    }

    /// The proxy answers itself: a phase's response, or an error (`refusal`: after a refused or
    /// failed request we cannot trust where the next one would start, so the connection closes).
    /// Too late once a response head went out: the connection is cut instead.
    mutating func respondLocally(refusal: Bool, draining listenerDraining: Bool) -> LocalAnswer {
        guard var r = request, !r.responseStarted else { return .abort(.answerAfterResponseStarted) }
        r.responseStarted = true
        // A body we have not read would be taken for the next request.
        if refusal || !r.bodyDone { r.closeAfter = true }
        if listenerDraining { draining = true }
        if draining { r.closeAfter = true }
        updateRequest { $0 = r }
        return .send(r.closeAfter ? .close : .keepAlive)
    }

    /// The response is complete in the output (its access-log line is written): returns what
    /// the connection does next.
    /// - bodyRead: request body bytes read so far (where discarding its rest begins).
    /// - inputEmpty: nothing more from the client is buffered.
    /// Timers: the keep-alive one before the next request; the body one while the body's rest
    /// is dropped; for an HTTP/2 stream, the send one until its last bytes are out and the
    /// stream closes; none before a close (the send timer or the linger follows as the output
    /// goes out).
    @inline(__always)
    mutating func responseFinished(bodyRead: UInt64, inputEmpty: Bool) -> (next: AfterResponse, timer: TimerChange) {
        servedAny = true
        guard let r = request else {
            assertionFailure("responseFinished() while \(state)")
            state = .lingering(Linger(skip: false, unlogged: false, bodyDone: false))
            return (.close, stop())
        }
        if _slowPath(isStream) {
            state = .lingering(Linger(skip: false, unlogged: false, bodyDone: r.bodyDone))
            return (.endStream, run(.send))
        }
        if !r.bodyDone && !r.closeAfter {
            // The response said keep-alive with the body still arriving: read its rest and drop it.
            state = .discarding(from: bodyRead)
            return (.discardBody, run(.body))
        }
        return next(r, inputEmpty: inputEmpty)
    }

    /// After a request whose body is all read (or will not be): close, or wait for the next one.
    @inline(__always)
    private mutating func next(_ r: Request, inputEmpty: Bool) -> (next: AfterResponse, timer: TimerChange) {
        if r.closeAfter || !r.bodyDone {
            // The lingering close (half-close, then read until the client's FIN) exists so that
            // bytes the client sent after the request do not make close(2) answer with an RST
            // that destroys the response at the client. It is skipped only when the client
            // itself asked for the close in a head that parsed (it may send nothing more,
            // RFC 9112 §9.6), its body was read to the end, and nothing is left unread —
            // nginx's `lingering_close on` rule. That saves a shutdown, a read and an epoll
            // round trip per `Connection: close` request. A close the proxy decided (a refused
            // head, an unread body, a drain) keeps the linger.
            let skip = r.skipLinger || (r.clientAskedClose && r.bodyDone && inputEmpty)
            state = .lingering(Linger(skip: skip, unlogged: false, bodyDone: r.bodyDone))
            return (.close, stop())
        }
        state = .idle
        return (.readNext, run(.keepAlive))
    }

    /// Request body bytes were read and dropped after the response (`discarding`).
    /// - step: how the body reader's last step ended; total: its body bytes read so far.
    /// Returns nil to keep reading (the body timer starts over), else what follows.
    mutating func bodyDiscarded(_ step: BodyReader.Step, total: UInt64) -> (next: AfterResponse?, timer: TimerChange) {
        guard case .discarding(let from) = state else {
            assertionFailure("bodyDiscarded() while \(state)")
            return (nil, .keep)
        }
        switch step {
        case .done:
            let after = next(Request(bodyDone: true, closeAfter: draining, clientAskedClose: false, awaitingContinue: false),
                             inputEmpty: false)
            return (after.next, after.timer)
        case .more where total - from <= Exchange.discardLimit:
            return (nil, run(.body))
        default:
            // Malformed chunked framing, or a body past the limit: stop here.
            let after = next(Request(bodyDone: false, closeAfter: true, clientAskedClose: false, awaitingContinue: false),
                             inputEmpty: false)
            return (after.next, after.timer)
        }
    }

    // MARK: Tunnel

    /// The upstream answered 101: bytes are copied both ways from now on, with no client timer
    /// (the upstream's idle timer bounds a tunnel), unless output waits for the client (`send`).
    mutating func switchedProtocols() -> TimerChange {
        assert(isProxying, "switchedProtocols() while \(state)")
        state = .tunnel
        return stop()
    }

    /// The tunnel's upstream closed: what is buffered goes to the client, then the close.
    mutating func tunnelEnded() {
        state = .lingering(Linger(skip: false, unlogged: true, bodyDone: true))
    }

    // MARK: The client, the clock, the server

    /// The lingering close's reads begin (HTTP/1.1, the output out and the write side shut).
    /// - now: the loop's clock.
    mutating func lingerStarted(now: UInt64) -> TimerChange {
        guard case .lingering(var l) = state else {
            assertionFailure("lingerStarted() while \(state)")
            return .keep
        }
        let deadline = l.clock.begin(now: now)
        state = .lingering(l)
        timer = .linger
        return .arm(.linger, after: deadline - now)
    }

    /// Everything buffered for the client is written.
    @inline(__always)
    func outputWritten() -> AfterWrite {
        guard case .lingering(let l) = state else { return .none }
        return l.skip ? .close : .linger
    }

    /// The client's input ended (a read returned 0).
    /// - inputEmpty: nothing of a next head is buffered.
    func clientEnded(inputEmpty: Bool) -> ClientEnd {
        switch state {
        case .idle where inputEmpty: return .close
        case .lingering, .closed: return .close
        case .tunnel: return .halfCloseTunnel
        default: return .abort(.clientClosed)
        }
    }

    /// The client hung up while we were not reading (waiting on the upstream, or stopped by
    /// backpressure).
    func clientHungUp() -> ClientEnd {
        isLingering || isClosed ? .close : .abort(.clientClosed)
    }

    /// The timer passed (`timer`; the loop has let it go).
    mutating func timedOut() -> TimeoutAction {
        let kind = timer
        timer = .none
        switch kind {
        case .header:
            // A slow or stalled head (slowloris): tell the client, then close without the
            // courtesy of lingering — a client that trickles bytes would keep us waiting.
            _ = headRefused(skipLinger: true)
            return .refuse(.headTimeout)
        case .body:
            if case .discarding = state { return .close }
            return self.responseStarted ? .abort(.clientBodyTimeout) : .failRequest(.bodyStalled)
        case .keepAlive, .linger, .send:
            return isProxying || isTunnel ? .abort(.clientSendTimeout) : .close
        case .none:
            return .none
        }
    }

    /// The listener drains for shutdown: every response from now on closes its connection.
    /// Returns whether to close now (idle, nothing buffered).
    mutating func drain(inputEmpty: Bool) -> Bool {
        draining = true
        updateRequest { $0.closeAfter = true }
        return isIdle && inputEmpty
    }

    /// Whether the connection is between requests with nothing buffered: it may move to a
    /// reloaded configuration, or close for a drain, now.
    @inline(__always)
    func isIdle(inputEmpty: Bool) -> Bool {
        isIdle && inputEmpty
    }

    /// The connection closes, or the stream ends. Returns whether the request's access-log line
    /// is still owed (a request was in flight, or a tunnel ended).
    mutating func closed() -> Bool {
        let owed: Bool
        switch state {
        case .dispatching, .deciding, .collecting, .proxying, .tunnel: owed = true
        case .lingering(let l): owed = l.unlogged
        case .idle, .discarding, .closed: owed = false
        }
        state = .closed
        timer = .none
        return owed
    }

    // MARK: Helpers

    /// Changes the request in flight in whichever state holds it.
    @inline(__always)
    private mutating func updateRequest(_ change: (inout Request) -> Void) {
        switch state {
        case .dispatching(var r): change(&r); state = .dispatching(r)
        case .deciding(var r, let token): change(&r); state = .deciding(r, token: token)
        case .collecting(var r): change(&r); state = .collecting(r)
        case .proxying(var r): change(&r); state = .proxying(r)
        case .idle, .tunnel, .discarding, .lingering, .closed: break
        }
    }
}
