/// The exchange with one client — the requests of an HTTP/1.1 connection, or the one request
/// of an HTTP/2 stream — and the I/O shell of its `Exchange`. It parses, pumps bodies, runs
/// the phases and the upstream; where the request's lifecycle moves on it reports the event to
/// `machine` and performs what comes back (which state the request is in, whether the
/// connection closes, lingers or takes the next request, which answer a timeout gets).
///
/// It owns no socket: its `downstream` does — an `HTTP1Connection` (a socket of its own) or an
/// `HTTP2Stream` (frames on its connection's). The downstream puts the client's bytes into
/// `input` and calls `inputArrived`; the exchange writes responses into `output` and heads
/// through `ResponseHeadWriter`s, and asks its downstream to send them (`flush`), to watch for
/// input (`want`), to run the timer its machine chose (`arm`) and to close. Everything else — phases,
/// limits, the upstream, the access log — is one code path for both kinds (docs/architecture.md).
///
/// Requests are handled one at a time: a pipelined request waits in `input` until the one
/// before it has been answered. The current request's head is copied to `head`'s own small
/// buffer (`headStore`) so that body bytes can stream through `input` while phases and the
/// access log still read the head in place.
final class ClientExchange {
    unowned(unsafe) let loop: EventLoop
    /// Replaced at a request boundary after a reload (`followReload`), never during a request.
    var listener: ListenerContext
    let peer: PeerAddress
    /// Where the response goes (set by the downstream that owns this exchange, right after it).
    var downstream: Downstream = .detached {
        didSet { machine.isStream = downstream.carriesOneRequest }
    }
    /// The peer as text (X-Forwarded-For, access log), formatted once per connection:
    /// inet_ntop formats through printf, too slow to repeat per request.
    /// (An HTTP/2 stream is given its connection's.)
    lazy var peerText: [UInt8] = {
        var b = ByteBuffer()
        defer { b.free() }
        peer.write(to: &b)
        return Array(b.readableBytes)
    }()
    /// Where the request lifecycle stands (see `Exchange`). The shell's alone: only
    /// ClientExchange*.swift report to it or read it (`ArchitectureDocsTests` checks); the
    /// downstreams report events to the shell and ask it what they need (`isLingering`).
    var machine = Exchange()

    var input = ByteBuffer()
    var output = ByteBuffer()
    /// The last read from the client filled `input`: more bytes are most likely waiting in
    /// the socket, and will be read before the loop sleeps (`pumpRequestBody` sends with
    /// MSG_MORE then).
    var inputFilled = false
    /// The current request's state; nil while the connection is idle (see `RequestState`).
    var current: RequestState?
    var head: RequestHead {
        @inline(__always) get { current!.head }
        @inline(__always) _modify { yield &current!.head }
    }
    /// The current request's head bytes (`head`'s ranges point here).
    var headStore: ByteBuffer {
        @inline(__always) get { current!.headStore }
        @inline(__always) _modify { yield &current!.headStore }
    }
    var headLength = 0
    /// The request body still to be read from the client.
    var requestBody: BodyReader {
        @inline(__always) get { current!.requestBody }
        @inline(__always) _modify { yield &current!.requestBody }
    }
    var requestBodyBytes: UInt64 {
        @inline(__always) get { current!.requestBodyBytes }
        @inline(__always) set { current!.requestBodyBytes = newValue }
    }

    var upstream: UpstreamConnection?
    var upstreamHead: ByteBuffer {
        @inline(__always) get { current!.upstreamHead }
        @inline(__always) _modify { yield &current!.upstreamHead }
    }
    var response: ResponseState {
        @inline(__always) get { current!.response }
        @inline(__always) _modify { yield &current!.response }
    }
    var collected: ByteBuffer {
        @inline(__always) get { current!.collected }
        @inline(__always) _modify { yield &current!.collected }
    }
    var collectLimit: Int {
        @inline(__always) get { current!.collectLimit }
        @inline(__always) set { current!.collectLimit = newValue }
    }
    var collectHandler: (@Sendable ([UInt8], ResponseSink) -> Void)? {
        @inline(__always) get { current!.collectHandler }
        @inline(__always) set { current!.collectHandler = newValue }
    }

    // Access-log bookkeeping for the current request (the rest is in `RequestState`).
    var requestStart: UInt64 {
        @inline(__always) get { current!.requestStart }
        @inline(__always) set { current!.requestStart = newValue }
    }
    var upstreamStart: UInt64 {
        @inline(__always) get { current!.upstreamStart }
        @inline(__always) set { current!.upstreamStart = newValue }
    }
    var upstreamEnd: UInt64 {
        @inline(__always) get { current!.upstreamEnd }
        @inline(__always) set { current!.upstreamEnd = newValue }
    }
    /// Counted as bytes move, also before a request's state is taken: kept here.
    var bytesIn: UInt64 = 0
    var bytesOut: UInt64 = 0
    /// The request arrived in early data (0-RTT), set by the downstream that read it for each
    /// request that did: it is served only as `EarlyData` allows, and the app is told
    /// (`Early-Data: 1`). Cleared when a request ends.
    var earlyData = false
    /// Bytes this exchange holds of the process's read-ahead budget (`ClientExchange+Buffering`):
    /// until its client has taken all output, which may be after the request's state is gone.
    var bufferingReserved = 0
    var statusSent: Int {
        @inline(__always) get { current!.statusSent }
        @inline(__always) set { current!.statusSent = newValue }
    }
    var requestID = RequestID()
    /// The response body being spliced, and its pipe (`ClientExchange+Splice`); both nil on
    /// the copying path.
    var splice: BodySplice?
    var splicePipe: SplicePipe?
    /// The file whose body is being sent (`ClientExchange+Static`); nil otherwise.
    var staticFile: StaticFile?

    init(loop: EventLoop, listener: ListenerContext, peer: PeerAddress) {
        self.loop = loop
        self.listener = listener
        self.peer = peer
        machine.timeouts = listener.config.timeouts
    }

    deinit {
        input.free()
        output.free()
    }

    var config: ProxyConfig { listener.config }

    /// The bytes of the current request head.
    var headBytes: UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: headStore.base, count: headLength)
    }

    var isClosed: Bool { machine.isClosed }
    /// Between requests (or before the first).
    var isIdle: Bool { machine.isIdle }
    /// The request went upstream and its response is not complete.
    var isProxying: Bool { machine.isProxying }
    /// A phase has not answered yet.
    var isDeciding: Bool {
        if case .deciding = machine.state { return true }
        return false
    }
    /// The timer that runs now.
    var timer: Exchange.Deadline { machine.timer }
    /// The last response is out or going out; what the client still sends is dropped.
    var isLingering: Bool { machine.isLingering }
    /// The request body was read to its end (true while none is in flight).
    var requestBodyDone: Bool { machine.requestBodyDone }

    /// The request's `name` fields (`name` lowercase) as one value — joined with commas when
    /// there are several, the rare case that allocates — or nil if it has none.
    func withRequestField<R>(_ name: StaticString, _ body: (UnsafeRawBufferPointer?) -> R) -> R {
        let bytes = headBytes
        return withRequestField(named: { $0.name.count == name.utf8CodeUnitCount && ByteMatching.equalsLowercase(bytes, $0.name, name) },
                                body)
    }

    /// The same for a name the configuration gives (`lowercased`: its bytes, lowercase).
    func withRequestField<R>(lowercased name: [UInt8], _ body: (UnsafeRawBufferPointer?) -> R) -> R {
        let bytes = headBytes
        return withRequestField(named: { field in
            guard field.name.count == name.count else { return false }
            for i in 0..<name.count where asciiLower(bytes[field.name.start + i]) != name[i] { return false }
            return true
        }, body)
    }

    private func withRequestField<R>(named: (HeaderField) -> Bool, _ body: (UnsafeRawBufferPointer?) -> R) -> R {
        let bytes = headBytes
        guard let first = head.headers.firstIndex(where: named) else { return body(nil) }
        let value = head.headers[first].value
        guard head.headers[(first + 1)...].contains(where: named) else {
            return body(UnsafeRawBufferPointer(rebasing: bytes[value.start..<value.end]))
        }
        var joined: [UInt8] = []
        for field in head.headers where named(field) {
            if !joined.isEmpty { joined.append(UInt8(ascii: ",")) }
            joined.append(contentsOf: bytes[field.value.start..<field.value.end])
        }
        return joined.withUnsafeBytes { body($0) }
    }

    /// Calls the listener's phases in place. `listener.phases.f()` copies the existential and
    /// retains the listener around each call (about 40 instructions, five calls a request);
    /// borrowed, neither happens. Sound: the listener is replaced only between requests
    /// (`followReload`), never while a phase runs, and this exchange holds it meanwhile.
    @inline(__always)
    func phases<R>(_ body: (any HTTPPhases) -> R) -> R {
        Unmanaged.passUnretained(listener)._withUnsafeGuaranteedRef { body($0.phases) }
    }

    // MARK: What the downstream does for the exchange

    /// Runs the timer the machine chose (one at a time; `timedOut` when it passes). The only
    /// place the client's deadline is set: which timer runs in which state is `Exchange`'s.
    @inline(__always)
    func arm(_ change: Exchange.TimerChange) {
        switch change {
        case .keep: break
        case .arm(_, let after): downstream.deadline = loop.now + after
        case .disarm: downstream.deadline = 0
        }
    }

    /// Whether the client is read, and whether output waits to be sent.
    @inline(__always)
    func want(read: Bool, write: Bool) {
        if _slowPath(splice != nil) { return wantWhileSplicing(read: read, write: write) }
        downstream.want(read: read, write: write)
    }

    /// Sends as much of `output` (and any response head) as the client takes now; the rest
    /// follows as it reads (`outputSent`, `outputWaiting`).
    @inline(__always)
    func flush() {
        downstream.flush()
    }

    // MARK: Events from the downstream

    /// New bytes in `input`.
    @inline(__always)
    func inputArrived() {
        switch machine.state {
        case .idle:
            processInput()
        case .proxying(let r) where !r.bodyDone:
            arm(machine.requestBodyArrived())
            pumpRequestBody()
        case .collecting:
            arm(machine.requestBodyArrived())
            pumpCollectedBody()
        case .discarding:
            discardRequestBody()
        case .tunnel:
            pumpTunnelFromClient()
        default:
            // Pipelined bytes arrive while a request is in flight: keep them, stop reading
            // once the buffer is large enough (backpressure on a pipelining client).
            if !wantsInput { want(read: false, write: !output.isEmpty) }
        }
    }

    /// The connection is open (a TLS one: its handshake done) and waits for its first request.
    func opened() {
        arm(machine.opened())
    }

    /// The lingering close's reads began (HTTP/1.1: the output is out, the write side shut).
    func lingerStarted() {
        arm(machine.lingerStarted(now: loop.now))
    }

    /// The lingering close dropped bytes the client still sent.
    func lingerInputDropped() {
        arm(machine.lingerInputDropped(now: loop.now))
    }

    /// The client's input ended.
    func inputEnded() {
        clientEnded(machine.clientEnded(inputEmpty: input.isEmpty))
    }

    /// The client hung up while we were not reading (waiting on the upstream, or stopped by
    /// backpressure): it is gone; whatever is in flight is aborted.
    func clientHungUp() {
        clientEnded(machine.clientHungUp())
    }

    private func clientEnded(_ end: Exchange.ClientEnd) {
        switch end {
        case .close: close()
        case .abort(let error): abort(error)
        case .halfCloseTunnel: tunnelClientClosed()
        }
    }

    /// All of `output` is out: read the client and the upstream again.
    @inline(__always)
    func outputSent() {
        // A file's body goes on (its send timer and interest are set by what it meets).
        if _slowPath(staticFile != nil) { return sendStaticBody() }
        want(read: wantsInput, write: false)
        arm(machine.outputSent())
        // A response read ahead keeps its reservation while its upstream still sends (the
        // client's socket buffer empties `output` now and then); once all is read and sent, it
        // goes back.
        if _slowPath(bufferingReserved != 0) && upstream == nil { releaseBuffering() }
        upstream?.resumeReading()
    }

    /// Part of `output` waits for a client that is not reading: the send timer runs.
    /// `readMore`: the client may still be read (a stream's bytes are bounded by its window).
    @inline(__always)
    func outputWaiting(readMore: Bool) {
        want(read: readMore, write: true)
        arm(machine.outputWaiting())
    }

    /// The timer passed (the loop has let it go).
    func timedOut() {
        switch machine.timedOut() {
        case .none:
            break
        case .refuse(let error):
            beginRequest(headLength: 0)
            respondError(error)
        case .failRequest(let error):
            upstream?.abort()
            upstream = nil
            respondError(error)
        case .abort(let error):
            abort(error)
        case .close:
            close()
        }
    }

    /// The listener drains for shutdown: an idle connection closes now (`closeIfIdle`), the
    /// others after their response.
    func drain(closeIfIdle: Bool = true) {
        if machine.drain(inputEmpty: input.isEmpty) && closeIfIdle { close() }
    }

    /// Everything in `output` is written (HTTP/1.1): what the connection does now — nothing
    /// more, the lingering close, or the close.
    func outputWritten() -> Exchange.AfterWrite {
        machine.outputWritten()
    }

    /// A reload replaced the listener's context: an idle connection moves now; one with a
    /// request in flight (or a head half read) finishes it on the configuration it began on
    /// and moves when it is over. Nothing is closed: a keep-alive client never sees a reload.
    func reloaded() {
        if machine.isIdle(inputEmpty: input.isEmpty) { followReload() }
    }

    /// At a request boundary: from a replaced context to the one serving the listener now
    /// (its TLS session, socket and peer unchanged). One load per request when no reload came.
    @inline(__always)
    func followReload() {
        guard listener.state(loop).retired else { return }
        // A stream stays on its connection's configuration (which sends GOAWAY on a reload).
        guard downstream.followsReloads else { return }
        let next = listener.newest(loop)
        let old = listener
        listener = next
        machine.timeouts = next.config.timeouts
        next.connectionOpened(loop)
        old.connectionClosed(loop)
    }

    // MARK: Requests

    /// Parses and starts the next request in `input`, if a complete head is there.
    func processInput() {
        guard machine.isIdle, !input.isEmpty else { return }
        followReload()
        if current == nil { current = loop.requestStates.take() }
        let result = listener.requestParser.parseHead(input.readableBytes, into: &head)
        switch result {
        case .incomplete:
            arm(machine.headArriving())
            want(read: true, write: !output.isEmpty)
        case .error(let error):
            if _slowPath(config.http2.cleartext) && !machine.servedAny, let c = downstream.connection, c.startsWithHTTP2Preface {
                c.handOverToHTTP2()
                return
            }
            refuseHead(.invalidHead(error))
        case .complete(let length):
            beginRequest(headLength: length)
            dispatch()
        }
    }

    /// A request refused before a head could be read from it (unparsable; an HTTP/2 stream's
    /// head that broke the rules): answered, then the connection (or stream) closes.
    func refuseHead(_ error: EngineError) {
        beginRequest(headLength: 0)
        arm(machine.headRefused())
        respondError(error)
    }

    func beginRequest(headLength: Int) {
        // (Refusals that never parsed a head, an HTTP/2 stream's among them, start here.)
        if current == nil { current = loop.requestStates.take() }
        self.headLength = headLength
        if headStore.base == nil { headStore = loop.buffers.take() }
        if output.base == nil { output = loop.buffers.take() }
        headStore.clear()
        headStore.append(input.base! + input.reader, count: headLength)
        requestStart = loop.now
        upstreamStart = 0
        upstreamEnd = 0
        bytesIn = UInt64(input.readable)
        bytesOut = 0
        statusSent = 0
        requestID = RequestID()
        current!.attempt = UpstreamAttempt()
        current!.group = 0
        current!.bodySpliceConsidered = false
        // The previous response's field list is reused, not reallocated.
        let fields = response.head.headers
        response.head.headers = []
        response = ResponseState()
        response.head.headers = fields
        requestBodyBytes = 0
        if _slowPath(current!.error != nil) { current!.error = nil }
        input.reader += headLength
    }

    private func dispatch() {
        current!.context = phases { $0.context(for: RequestView(self)) }
        let bodyDone: Bool
        switch head.framing {
        case .none: requestBody = BodyReader(); bodyDone = true
        case .contentLength(let n): requestBody = BodyReader(contentLength: n); bodyDone = n == 0
        case .chunked: requestBody = BodyReader(chunked: ()); bodyDone = false
        case .untilClose: requestBody = BodyReader(); bodyDone = false
        }
        arm(machine.headParsed(keepAlive: head.keepAlive, bodyDone: bodyDone, expectContinue: head.expectContinue,
                                draining: listener.isDraining(loop)))
        switch head.framing {
        case .contentLength(let n) where config.maxBodySize > 0 && n > config.maxBodySize:
            respondError(.bodyTooLarge(limit: config.maxBodySize))
            return
        case .untilClose:
            respondError(.bodyWithoutLength)
            return
        default:
            break
        }
        if head.method == .connect {
            respondError(.connectNotSupported)
            return
        }
        if _slowPath(earlyData) && !admitEarlyData() { return }
        if let access = listener.clientAccess, !admitByAddress(access) { return }
        if let page = listener.maintenancePage(on: loop), !admitDuringMaintenance(page) { return }
        if let policy = listener.clientLimits, !policy.rules.isEmpty, !admitUnderRateLimits(policy) { return }
        let decision = phases { $0.requestFilter(RequestView(self)) }
        switch decision {
        case .continue:
            proceedUpstream(rewrite: nil)
        case .proceed(let rewrite):
            proceedUpstream(rewrite: rewrite)
        case .respond(let r):
            respondLocal(r)
        case .deferred(let start):
            startDeferred { start($0) }
        case .collectBody(let limit, let handler):
            if case .contentLength(let n) = head.framing, n > UInt64(limit) {
                respondError(.bodyTooLarge(limit: limit))
                return
            }
            arm(machine.collectBody())
            collectLimit = limit
            collectHandler = handler
            collected.clear()
            pumpCollectedBody()
        }
    }

    private func startDeferred(_ start: (ResponseSink) -> Void) {
        let (token, timer) = machine.awaitDecision()
        arm(timer)
        want(read: wantsInput, write: !output.isEmpty)
        // The sink may outlive this connection; it reaches us only through the loop and
        // only if the connection is still waiting for that very decision.
        let box = WeakConnection(self)
        let sink = ResponseSink(loop: loop) { outcome in
            box.deliver(token: token, outcome)
        }
        start(sink)
    }

    /// Moves body bytes into `collected`; once the body is complete, hands it to the phase.
    func pumpCollectedBody() {
        if !machine.requestBodyDone {
            let step = requestBody.transfer(from: &input, to: &collected, chunkedOut: false)
            if collected.readable > collectLimit {
                respondError(.bodyTooLarge(limit: collectLimit))
                return
            }
            switch step {
            case .more:
                want(read: true, write: !output.isEmpty)
                return
            case .done:
                arm(machine.requestBodyEnded())
            case .error(let e):
                arm(machine.requestBodyEnded())
                respondError(.invalidBody(e))
                return
            }
        }
        let body = Array(collected.readableBytes)
        collected.free()
        let handler = collectHandler
        collectHandler = nil
        startDeferred { sink in handler?(body, sink) }
    }

    func deferredOutcome(token: UInt64, _ outcome: DeferredOutcome) {
        guard machine.takesDecision(token: token) else { return }
        switch outcome {
        case .respond(let r): respondLocal(r)
        case .proceed(let rewrite): proceedUpstream(rewrite: rewrite)
        }
    }

    /// The request is finished (response fully written to `output`): log, then what the
    /// exchange says — the next request, dropping the body's rest first, or the close.
    func finishRequest() {
        // A response that came before the request body was all sent: what the pipe holds
        // will not go up (the rest of the body is read and dropped, or the connection closes).
        if _slowPath(splice?.direction == .request) { endRequestSplice() }
        if _slowPath(staticFile != nil) { endStaticBody() }
        logAccess()
        upstream = nil
        earlyData = false
        // Its state goes now, not when this request's state is next used.
        if _slowPath(response.encoder != nil) { response.encoder = nil }
        let (next, timer) = machine.responseFinished(bodyRead: requestBody.total, inputEmpty: input.isEmpty)
        arm(timer)
        switch next {
        case .readNext, .close:
            proceed(next)
        case .discardBody:
            // The response went out with the body still arriving and said keep-alive: read
            // the body's rest and drop it, then take the next request.
            flush()
            if case .discarding = machine.state { discardRequestBody() }
        case .endStream:
            downstream.endResponse()
        }
    }

    /// After a request whose body is all read (or will not be): wait for the next request, or
    /// write what is left and close.
    private func proceed(_ next: Exchange.AfterResponse) {
        if next != .readNext {
            // The lingering close (or the close) begins once the output is out (`flush`).
            flush()
            return
        }
        followReload()
        if input.isEmpty { input.clear() }
        headLength = 0
        if !input.isEmpty { processInput() }
        // Write the response now rather than on the next writability event: one fewer
        // epoll round trip (and epoll_ctl pair) per request. flush() also sets the interest.
        flush()
        if machine.isIdle && input.isEmpty && output.isEmpty {
            // Idle keep-alive connections hold no buffers: the memory goes back until the next request.
            loop.buffers.recycle(&input)
            loop.buffers.recycle(&output)
            loop.requestStates.recycle(&current, buffers: loop.buffers)
        }
    }

    /// Reads and drops request body bytes after the response; the next request follows.
    func discardRequestBody() {
        var scratch = loop.buffers.take()
        defer { loop.buffers.recycle(&scratch) }
        let step = requestBody.discard(from: &input, scratch: &scratch)
        let (next, timer) = machine.bodyDiscarded(step, total: requestBody.total)
        arm(timer)
        if let next {
            proceed(next)
        } else {
            if input.isEmpty { input.clear() }
            want(read: true, write: !output.isEmpty)
        }
    }

    // MARK: Output

    /// Whether the upstream is read 64 KiB at a time rather than 16: a response body with more
    /// than that still to come. A quarter of the reads and writes for a large body (about 150
    /// system calls for 1 MiB at 16 KiB); the two buffers grow past the pool's size for this
    /// response only and are freed after it.
    var wantsLargeReads: Bool {
        // (Before the response head, `response.body` is the empty reader: 0 remaining.)
        (response.body.remaining ?? 0) >= 64 * 1024
    }

    /// Whether we want read readiness now (`Exchange.wantsInput`).
    var wantsInput: Bool {
        @inline(__always) get {
            machine.wantsInput(buffered: input.readable, upstreamBuffered: upstream?.output.readable ?? 0)
        }
    }

    // MARK: Closing

    /// How an exchange ends (`end`).
    enum Ending {
        /// The exchange decided (a close, an abort, the linger done): the downstream lets its
        /// socket or stream go.
        case closed
        /// The downstream went first: nghttp2 closed the stream, or the connection could not
        /// start. Nothing to let go.
        case downstreamGone
        /// An `HTTP1Connection` hands its socket to HTTP/2: the socket lives on, the exchange
        /// is detached from it.
        case handedOver
    }

    /// The one way an exchange ends, whoever ends it: the upstream request is dropped, an
    /// access-log line still owed (a request in flight, a tunnel that ended) is written, the
    /// timer stops, the downstream is told as `how` says, and the buffers go back.
    func end(_ how: Ending) {
        guard !machine.isClosed else { return }
        upstream?.abort()
        upstream = nil
        if machine.closed() { logAccess() }
        arm(.disarm)
        switch how {
        case .closed: downstream.exchangeClosed()
        case .downstreamGone: break
        case .handedOver: downstream = .detached
        }
        releaseBuffers()
    }

    /// The exchange decided to close (its output is out, or lingering is over).
    func finishClose() {
        end(.closed)
    }

    /// nghttp2 closed the stream (`errorCode`: its RST_STREAM code, 0 after END_STREAM both
    /// ways). A request still in flight is aborted (its upstream request with it). Returns
    /// whether the peer cut the stream (its resets are counted by the connection): while the
    /// request was in flight, or with an error while the response's last bytes went out.
    /// - responseDone: the stream had the whole response (its END_STREAM was due).
    func streamClosed(errorCode: UInt32, responseDone: Bool) -> Bool {
        guard !machine.isClosed else { return false }
        if !machine.isLingering {
            abort(.streamReset)
            return true
        }
        let cut = !(responseDone && output.isEmpty) && errorCode != 0
        end(.downstreamGone)
        return cut
    }

    private func releaseBuffers() {
        if _slowPath(bufferingReserved != 0 || current?.bufferingBody == true) { releaseBuffering() }
        if _slowPath(splicePipe != nil) { endSplice(keepPipe: true) }
        if _slowPath(staticFile != nil) { endStaticBody() }
        loop.buffers.recycle(&input)
        loop.buffers.recycle(&output)
        loop.requestStates.recycle(&current, buffers: loop.buffers)
    }

    /// Closes now (nothing in flight, or nothing worth saving). Out of line: inlined into the
    /// event handlers it would cost their hot paths register saves.
    @inline(never)
    func close() {
        end(.closed)
    }

    /// The client or the connection failed mid-request: drop everything, tell the upstream.
    /// The error goes to the request's access-log line (the first one a request met wins: an
    /// abort that follows a failure is its consequence).
    @inline(never)
    func abort(_ error: EngineError) {
        if current != nil && current!.error == nil { current!.error = error }
        close()
    }
}

/// A weak, Sendable route from a deferred decision back to its connection, via the loop.
final class WeakConnection: @unchecked Sendable {
    // Only dereferenced on the connection's loop (ResponseSink hops there first).
    weak var connection: ClientExchange?
    init(_ connection: ClientExchange) { self.connection = connection }
    func deliver(token: UInt64, _ outcome: DeferredOutcome) {
        connection?.deferredOutcome(token: token, outcome)
    }
}
