import CProxyLinux
#if canImport(Glibc)
import Glibc
#endif

/// One accepted client connection and the request it is currently serving.
///
/// Requests on a connection are handled one at a time: a pipelined request waits in `input`
/// until the one before it has been answered. The current request's head is copied to `head`'s
/// own small buffer (`headStore`) so that body bytes can stream through `input` while phases
/// and the access log still read the head in place.
final class ClientConnection: Channel {
    enum State {
        /// Waiting for (more of) a request head.
        case readingHead
        /// A phase is working on a deferred decision.
        case deferred
        /// Reading a request body for a phase (`.collectBody`).
        case collectingBody
        /// The request is being proxied.
        case proxying
        /// Writing a response the proxy produced itself.
        case respondingLocally
        /// After a 101: bytes are copied both ways.
        case tunnel
        /// The response is out; the rest of the request body is read and dropped
        /// (`discardRequestBody`), then the next request may come.
        case discardingBody
        /// Output flushed, write side shut: reading and discarding until the peer closes,
        /// so that unread input does not turn our close into a reset that eats the response.
        case lingering
        case closed
    }

    enum Deadline { case none, header, body, keepAlive, send, linger }

    /// Replaced at a request boundary after a reload (`followReload`), never during a request.
    var listener: ListenerContext
    let peer: PeerAddress
    /// The socket, plain or with its TLS session.
    let transport: Transport
    /// The peer as text (X-Forwarded-For, access log), formatted once per connection:
    /// inet_ntop formats through printf, too slow to repeat per request.
    /// (An HTTP/2 stream is given its connection's.)
    lazy var peerText: [UInt8] = {
        var b = ByteBuffer()
        defer { b.free() }
        peer.write(to: &b)
        return Array(b.readableBytes)
    }()
    var state: State = .readingHead
    var deadlineKind: Deadline = .none

    var input = ByteBuffer()
    var output = ByteBuffer()
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
    var requestBodyDone = true
    var requestBodyBytes: UInt64 {
        @inline(__always) get { current!.requestBodyBytes }
        @inline(__always) set { current!.requestBodyBytes = newValue }
    }
    /// The connection ends after the current response.
    var closeAfterResponse = false
    /// Close right after the last write instead of lingering (hostile or stalled clients).
    var skipLinger = false
    var discardedFrom: UInt64 {
        @inline(__always) get { current!.discardedFrom }
        @inline(__always) set { current!.discardedFrom = newValue }
    }

    var upstream: UpstreamConnection?
    var upstreamHead: ByteBuffer {
        @inline(__always) get { current!.upstreamHead }
        @inline(__always) _modify { yield &current!.upstreamHead }
    }
    var retried: Bool {
        @inline(__always) get { current!.retried }
        @inline(__always) set { current!.retried = newValue }
    }
    var connectAttempts: UInt8 {
        @inline(__always) get { current!.connectAttempts }
        @inline(__always) set { current!.connectAttempts = newValue }
    }
    var response: ResponseState {
        @inline(__always) get { current!.response }
        @inline(__always) _modify { yield &current!.response }
    }
    var deferredToken: UInt64 = 0
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
    var statusSent: Int {
        @inline(__always) get { current!.statusSent }
        @inline(__always) set { current!.statusSent = newValue }
    }
    var inRequest = false
    var requestID = RequestID()
    /// Whether a response went out on this connection (a reload closes idle ones that did).
    var servedAny = false
    /// Set when this exchange is one HTTP/2 stream (`HTTP2Connection`): no socket of its own.
    var h2: HTTP2Stream? = nil

    /// Bytes buffered towards a slow reader before we stop reading from the other side.
    static let highWater = 256 * 1024
    /// Bytes of pipelined requests buffered while the current one is in flight.
    static let pipelineLimit = 64 * 1024

    init(fd: Int32, loop: EventLoop, listener: ListenerContext, peer: PeerAddress, transport: Transport? = nil) {
        self.listener = listener
        self.peer = peer
        self.transport = transport ?? Transport(fd: fd)
        super.init(fd: fd, loop: loop)
        watchHangup = true
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

    func start() {
        setDeadline(.keepAlive, config.timeouts.clientHeader)
        do {
            try loop.register(self, EventLoop.readable)
        } catch {
            Glibc.close(fd)
            state = .closed
            return
        }
        listener.connectionOpened(loop)
    }

    /// Takes over from a finished TLS handshake (`TLSAccept`), which already holds the epoll
    /// registration (handed over in place) and counts as an open connection.
    func startAfterHandshake() {
        // Its listener was replaced by a reload during the handshake: the session is made, the
        // first request is served by the new configuration.
        followReload()
        if listener.isDraining(loop) { closeAfterResponse = true }
        setDeadline(.keepAlive, config.timeouts.clientHeader)
        want(read: true, write: false)
        // The request usually follows the client's Finished message at once.
        readable()
    }

    @inline(__always)
    func setDeadline(_ kind: Deadline, _ after: UInt64) {
        deadlineKind = kind
        deadline = kind == .none ? 0 : loop.now + after
    }

    // MARK: Events

    override func onEvent(_ events: UInt32) {
        if events & (CProxyLinux_EPOLLERR) != 0 {
            abort(reason: "client socket error")
            return
        }
        if events & EventLoop.writable != 0 {
            flush()
            if state == .closed { return }
        }
        if events & CProxyLinux_EPOLLIN != 0 && interest & CProxyLinux_EPOLLIN != 0 {
            readable()
        } else if events & (CProxyLinux_EPOLLRDHUP | CProxyLinux_EPOLLHUP) != 0 && state != .closed {
            // The client shut its side while we were not reading (waiting on the upstream,
            // or stopped by backpressure): it is gone; abort whatever is in flight.
            if state == .lingering { finishClose(); return }
            abort(reason: "client closed")
        }
    }

    private func readable() {
        switch state {
        case .lingering:
            discardInput()
            return
        case .closed:
            return
        default:
            break
        }
        if input.base == nil { input = loop.buffers.take() }
        let result: IOResult
        do {
            result = try transport.read(into: &input, reserve: 8 * 1024)
        } catch {
            abort(reason: "client read failed")
            return
        }
        guard case .done(let n) = result else { return }
        if n == 0 {
            clientEOF()
            return
        }
        input.writer += n
        bytesIn += UInt64(n)
        inputArrived()
    }

    /// New bytes in `input` (from the socket, or from the stream's HTTP/2 connection).
    @inline(__always)
    func inputArrived() {
        switch state {
        case .readingHead:
            processInput()
        case .proxying where !requestBodyDone:
            setDeadline(.body, config.timeouts.clientBody)
            pumpRequestBody()
        case .collectingBody:
            setDeadline(.body, config.timeouts.clientBody)
            pumpCollectedBody()
        case .discardingBody:
            discardRequestBody()
        case .tunnel:
            pumpTunnelFromClient()
        default:
            // Pipelined bytes arrive while a request is in flight: keep them, stop reading
            // once the buffer is large enough (backpressure on a pipelining client).
            if !wantsInput { want(read: false, write: !output.isEmpty) }
        }
    }

    private func clientEOF() {
        switch state {
        case .readingHead where !inRequest && input.isEmpty:
            close()
        case .tunnel:
            tunnelClientClosed()
        default:
            abort(reason: "client closed")
        }
    }

    override func onTimeout() {
        switch deadlineKind {
        case .header:
            // A slow or stalled head (slowloris): tell the client, then close without the
            // courtesy of lingering — a client that trickles bytes would keep us waiting.
            skipLinger = true
            respondError(408, "request head not received in time")
        case .body:
            if state == .discardingBody { close(); return }
            if response.started { abort(reason: "client body timeout") } else {
                upstream?.abort()
                upstream = nil
                respondError(408, "request body stalled")
            }
        case .keepAlive, .linger, .send:
            if state == .proxying || state == .tunnel { abort(reason: "client send timeout") } else { close() }
        case .none:
            break
        }
    }

    override func onDrain() {
        // A listener that drains last (the internal one) is still serving: not this round.
        guard listener.isDraining(loop) else { return }
        closeAfterResponse = true
        guard state == .readingHead && !inRequest && input.isEmpty else { return }
        close()
    }

    /// A reload replaced the listener's context: an idle connection moves now; one with a
    /// request in flight (or a head half read) finishes it on the configuration it began on
    /// and moves when it is over. Nothing is closed: a keep-alive client never sees a reload.
    override func onReload() {
        if state == .readingHead && !inRequest && input.isEmpty { followReload() }
    }

    /// An HTTP/2 stream's wish to read changed: the peer may get window back.
    override func interestChanged() {
        h2?.connection.creditStream(self)
    }

    /// At a request boundary: from a replaced context to the one serving the listener now
    /// (its TLS session, socket and peer unchanged). One load per request when no reload came.
    @inline(__always)
    func followReload() {
        guard listener.state(loop).retired else { return }
        // A stream stays on its connection's configuration (which sends GOAWAY on a reload).
        if h2 != nil { return }
        let next = listener.newest(loop)
        let old = listener
        listener = next
        next.connectionOpened(loop)
        old.connectionClosed(loop)
    }

    // MARK: Requests

    /// Parses and starts the next request in `input`, if a complete head is there.
    func processInput() {
        guard state == .readingHead, !input.isEmpty else { return }
        if !inRequest { followReload() }
        if deadlineKind != .header { setDeadline(.header, config.timeouts.clientHeader) }
        if current == nil { current = loop.requestStates.take() }
        let result = listener.requestParser.parseHead(input.readableBytes, into: &head)
        switch result {
        case .incomplete:
            want(read: true, write: !output.isEmpty)
        case .error(let error):
            if _slowPath(config.http2.cleartext) && h2 == nil && !servedAny && startsWithHTTP2Preface {
                handOverToHTTP2()
                return
            }
            beginRequest(headLength: 0)
            respondError(error.status, error.reason)
        case .complete(let length):
            beginRequest(headLength: length)
            dispatch()
        }
    }

    func beginRequest(headLength: Int) {
        // (Refusals that never parsed a head, an HTTP/2 stream's among them, start here.)
        if current == nil { current = loop.requestStates.take() }
        inRequest = true
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
        retried = false
        connectAttempts = 0
        // The previous response's field list is reused, not reallocated.
        let fields = response.head.headers
        response.head.headers = []
        response = ResponseState()
        response.head.headers = fields
        requestBodyBytes = 0
        input.reader += headLength
        setDeadline(.none, 0)
    }

    private func dispatch() {
        if listener.isDraining(loop) { closeAfterResponse = true }
        if !head.keepAlive { closeAfterResponse = true }
        switch head.framing {
        case .none: requestBody = BodyReader(); requestBodyDone = true
        case .contentLength(let n):
            if config.maxBodySize > 0 && n > config.maxBodySize {
                respondError(413, "request body larger than \(config.maxBodySize) bytes")
                return
            }
            requestBody = BodyReader(contentLength: n)
            requestBodyDone = n == 0
        case .chunked:
            requestBody = BodyReader(chunked: ())
            requestBodyDone = false
        case .untilClose:
            respondError(400, "request body without length")
            return
        }
        if head.method == .connect {
            respondError(501, "CONNECT is not supported")
            return
        }
        let decision = listener.phases.requestFilter(RequestView(self))
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
                respondError(413, "request body larger than \(limit) bytes")
                return
            }
            state = .collectingBody
            collectLimit = limit
            collectHandler = handler
            collected.clear()
            setDeadline(.body, config.timeouts.clientBody)
            pumpCollectedBody()
        }
    }

    private func startDeferred(_ start: (ResponseSink) -> Void) {
        state = .deferred
        deferredToken &+= 1
        let token = deferredToken
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
        if !requestBodyDone {
            let step = requestBody.transfer(from: &input, to: &collected, chunkedOut: false)
            if collected.readable > collectLimit {
                respondError(413, "request body larger than \(collectLimit) bytes")
                return
            }
            switch step {
            case .more:
                want(read: true, write: !output.isEmpty)
                return
            case .done:
                requestBodyDone = true
            case .error(let e):
                requestBodyDone = true
                respondError(e.status, e.reason)
                return
            }
        }
        setDeadline(.none, 0)
        let body = Array(collected.readableBytes)
        collected.free()
        let handler = collectHandler
        collectHandler = nil
        startDeferred { sink in handler?(body, sink) }
    }

    func deferredOutcome(token: UInt64, _ outcome: DeferredOutcome) {
        guard state == .deferred, token == deferredToken else { return }
        switch outcome {
        case .respond(let r): respondLocal(r)
        case .proceed(let rewrite): proceedUpstream(rewrite: rewrite)
        }
    }

    /// The request is finished (response fully written to `output`): log, then either close
    /// or go back to reading the next request.
    func finishRequest() {
        logAccess()
        inRequest = false
        servedAny = true
        upstream = nil
        if _slowPath(h2 != nil) { h2Finished(); return }
        if !requestBodyDone && !closeAfterResponse {
            // The response went out with the body still arriving and said keep-alive: read
            // the body's rest and drop it, then take the next request.
            state = .discardingBody
            discardedFrom = requestBody.total
            setDeadline(.body, config.timeouts.clientBody)
            flush()
            if state == .discardingBody { discardRequestBody() }
            return
        }
        nextRequest()
    }

    /// After a request whose body is all read: close, or wait for the next request.
    private func nextRequest() {
        if !requestBodyDone { closeAfterResponse = true }
        if closeAfterResponse {
            // The lingering close (half-close, then read until the client's FIN) exists so that
            // bytes the client sent after the request do not make close(2) answer with an RST
            // that destroys the response at the client. It is skipped only when the client
            // itself asked for the close in a head that parsed (it may send nothing more,
            // RFC 9112 §9.6), its body was read to the end, and nothing is left unread in
            // `input` — nginx's `lingering_close on` rule. That saves a shutdown, a read and an
            // epoll round trip per `Connection: close` request. A close the proxy decided
            // (a refused head, an unread body, a drain) keeps the linger.
            if headLength > 0 && !head.keepAlive && requestBodyDone && input.isEmpty { skipLinger = true }
            state = .lingering
            deadlineKind = .none
            flush()
            return
        }
        state = .readingHead
        followReload()
        if input.isEmpty { input.clear() }
        headLength = 0
        setDeadline(.keepAlive, config.timeouts.keepAlive)
        if !input.isEmpty { processInput() }
        // Write the response now rather than on the next writability event: one fewer
        // epoll round trip (and epoll_ctl pair) per request. flush() also sets the interest.
        flush()
        if state == .readingHead && input.isEmpty && output.isEmpty {
            // Idle keep-alive connections hold no buffers: the memory goes back until the next request.
            loop.buffers.recycle(&input)
            loop.buffers.recycle(&output)
            loop.requestStates.recycle(&current, buffers: loop.buffers)
        }
    }

    /// Whether the rest of the request body may be read and dropped after the response (so the
    /// connection stays open) rather than the connection closed. Not when the client was
    /// waiting for a `100 Continue` it never got (it may never send the body, and its next
    /// request would be taken for body bytes), not for HTTP/2 (a stream ends on its own), and
    /// not for more than `discardLimit` bytes still to come.
    var canDiscardRequestBody: Bool {
        guard h2 == nil, !head.expectContinue || response.continueSent else { return false }
        if let left = requestBody.remaining { return left <= ClientConnection.discardLimit }
        return true
    }

    /// The most request body a connection reads and drops after its response to stay open
    /// (nginx discards any amount; an upload larger than this is cheaper to cut off).
    static let discardLimit: UInt64 = 1 << 20

    /// Reads and drops request body bytes after the response; the next request follows.
    func discardRequestBody() {
        var scratch = loop.buffers.take()
        defer { loop.buffers.recycle(&scratch) }
        switch requestBody.discard(from: &input, scratch: &scratch) {
        case .done:
            requestBodyDone = true
            nextRequest()
        case .more where requestBody.total - discardedFrom <= ClientConnection.discardLimit:
            if input.isEmpty { input.clear() }
            setDeadline(.body, config.timeouts.clientBody)
            want(read: true, write: !output.isEmpty)
        default:
            // Malformed chunked framing, or a chunked body past the limit: stop here.
            nextRequest()
        }
    }

    // MARK: Output

    /// Writes as much of `output` as the socket takes; arranges for the rest.
    func flush() {
        if _slowPath(h2 != nil) { h2Flush(); return }
        if transport.isPlain {
            while !output.isEmpty {
                let r: IOResult
                do {
                    r = try Socket.write(fd, from: output.base! + output.reader, count: output.readable)
                } catch {
                    abort(reason: "client write failed")
                    return
                }
                guard case .done(let n) = r else { break }
                output.moveReader(n)
                bytesOut += UInt64(n)
            }
        } else {
            guard let n = transport.drainTLS(&output) else {
                abort(reason: "client write failed")
                return
            }
            bytesOut += UInt64(n)
        }
        if output.isEmpty {
            output.clear()
            if state == .lingering { startLinger(); return }
            want(read: wantsInput, write: false)
            if deadlineKind == .send { setDeadline(.none, 0) }
            upstream?.resumeReading()
        } else {
            want(read: wantsInput && output.readable < ClientConnection.highWater, write: true)
            if deadlineKind == .none || deadlineKind == .send { setDeadline(.send, config.timeouts.clientSend) }
        }
    }

    /// Whether the upstream is read 64 KiB at a time rather than 16: a response body with more
    /// than that still to come. A quarter of the reads and writes for a large body (about 150
    /// system calls for 1 MiB at 16 KiB); the two buffers grow past the pool's size for this
    /// response only and are freed after it.
    var wantsLargeReads: Bool {
        response.started && (response.body.remaining ?? 0) >= 64 * 1024
    }

    /// Whether we want read readiness now.
    ///
    /// While a request is in flight we keep reading (rather than switching read interest off
    /// and on, two epoll_ctl calls per request): that is how a client that leaves is noticed,
    /// and pipelined requests are buffered up to `pipelineLimit`.
    var wantsInput: Bool {
        switch state {
        case .readingHead, .lingering, .collectingBody, .discardingBody: return true
        case .proxying:
            if requestBodyDone { return input.readable < ClientConnection.pipelineLimit }
            return (upstream?.output.readable ?? 0) < ClientConnection.highWater
        case .tunnel: return (upstream?.output.readable ?? 0) < ClientConnection.highWater
        case .deferred, .respondingLocally: return input.readable < ClientConnection.pipelineLimit
        case .closed: return false
        }
    }

    // MARK: Closing

    private func startLinger() {
        if skipLinger { finishClose(); return }
        transport.shutdownWrite()
        setDeadline(.linger, Timeouts.second)
        want(read: true, write: false)
        discardInput()
    }

    private func discardInput() {
        if Socket.discardUntilClosed(fd) { finishClose() }
    }

    private func finishClose() {
        guard state != .closed else { return }
        state = .closed
        deadline = 0
        if _slowPath(h2 != nil) { h2Closed(); return }
        transport.prepareClose()
        loop.close(self)
        loop.buffers.recycle(&input)
        loop.buffers.recycle(&output)
        loop.requestStates.recycle(&current, buffers: loop.buffers)
        listener.connectionClosed(loop)
    }

    /// Closes now (nothing in flight, or nothing worth saving). Out of line: inlined into the
    /// event handlers it would cost their hot paths register saves.
    @inline(never)
    func close() {
        guard state != .closed else { return }
        if inRequest { logAccess() ; inRequest = false }
        upstream?.abort()
        upstream = nil
        finishClose()
    }

    /// The client or the connection failed mid-request: drop everything, tell the upstream.
    func abort(reason: StaticString) {
        close()
    }
}

/// A weak, Sendable route from a deferred decision back to its connection, via the loop.
final class WeakConnection: @unchecked Sendable {
    // Only dereferenced on the connection's loop (ResponseSink hops there first).
    weak var connection: ClientConnection?
    init(_ connection: ClientConnection) { self.connection = connection }
    func deliver(token: UInt64, _ outcome: DeferredOutcome) {
        connection?.deferredOutcome(token: token, outcome)
    }
}
