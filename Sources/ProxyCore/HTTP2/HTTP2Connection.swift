import CNghttp2
import CProxyLinux
#if canImport(Glibc)
import Glibc
#endif

/// HTTP/2 on one client connection: ALPN `h2` after a TLS handshake, or prior-knowledge `h2c`
/// on a plain listener that asks for it (`HTTP2Settings.cleartext`).
///
/// **The split.** nghttp2 does the protocol — frames, HPACK, flow control, stream states, the
/// RFC 9113 §8 message checks (pseudo-headers, lowercase names, no connection-specific fields,
/// `TE` other than `trailers`, `content-length` against DATA) and its flood limits. This class
/// moves bytes between nghttp2 and the socket, and runs **each stream as a request exchange of
/// its own: an `HTTP2Stream` owns a `ClientExchange`**, as an `HTTP1Connection` does. The
/// stream's request reaches the exchange as the HTTP/1.1 head it is equivalent to
/// (`StreamRequestHead.deliverHead`),
/// parsed by the same `RequestParser`, so the canonical path, the header rules, the limits, the
/// phases (the OAuth layer), the upstream request, the access log and the metrics are the ones
/// HTTP/1.1 has — there is no second copy of any of them to drift. The exchange writes its
/// response head field by field (`ResponseHeadWriter`): a stream collects the fields for HEADERS
/// (`StreamHeadWriter`), never text to parse again; the body goes out as DATA as flow control
/// allows. Apache's mod_http2 runs streams through its HTTP/1 core the same way.
///
/// **Re-entrancy.** nghttp2's callbacks only record what happened (bytes for a stream, a stream
/// closed); streams run after `nghttp2_session_mem_recv` returns (`runStreams`), and frames are
/// produced in `send`, once per batch of events. A HEADERS frame and a RST_STREAM for it in the
/// same read therefore never start an upstream request (rapid reset costs the proxy nothing).
///
/// **Flow control.** Window updates are not automatic: a stream's DATA is credited back to the
/// peer (`nghttp2_session_consume`) only once the exchange has passed it on and wants more
/// (`creditStream`), so a slow upstream slows the client instead of filling our memory. Response
/// DATA is pulled from the exchange's output as the peer's windows open; the exchange stops
/// reading its upstream while that output is full, as for HTTP/1.1.
///
/// **Ending.** Shutdown, and a reload that replaces the listener's configuration, send GOAWAY
/// in two steps (RFC 9113 §6.8: a notice with the highest stream id, then after a second the
/// last stream processed); streams in flight finish on the configuration they began on, and the
/// connection closes when none is left. The client opens its next connection on the new one.
final class HTTP2Connection: Channel {
    var listener: ListenerContext
    let peer: PeerAddress
    let transport: Transport
    private(set) var session: OpaquePointer!
    var input = ByteBuffer()
    var output = ByteBuffer()
    /// Streams by id, from their HEADERS until nghttp2 closes them.
    var streams: [Int32: HTTP2Stream] = [:]
    /// Streams that received request bytes (or a head) since they last ran.
    var pending: [HTTP2Stream] = []
    /// Streams whose response output nghttp2 emptied: their upstream may be read again.
    var drained: [HTTP2Stream] = []
    /// Streams nghttp2 closed, with the error code (0 = a normal end).
    var closedStreams: [(HTTP2Stream, UInt32)] = []
    /// Streams whose response ended before their request body: `RST_STREAM NO_ERROR` after it
    /// (RFC 9113 §8.1), so the client stops sending.
    var endedEarly: [Int32] = []
    /// Which streams run on the client-connection budget, which wait (`HTTP2Connection+Admission`).
    var admission = StreamAdmission<HTTP2Stream>()
    /// The next look at the budget while streams wait.
    var admitRetry: TimerHandle?
    private var sendScheduled = false
    private var inSession = false
    private(set) var closed = false
    private var lingering = false
    private var linger = LingeringClose()
    private var goingAway = false
    private var finalGoAwaySent = false
    private var finalGoAwayAt: UInt64 = 0
    private var idleSince: UInt64 = 0
    /// When `output` last stopped draining (0: it drains): a client that reads nothing for
    /// `timeouts.clientSend` is dropped.
    private var stalledSince: UInt64 = 0
    /// Why the connection ends (the peer left, a protocol error, idle…), for the debug line at close.
    var endReason = ""
    /// What nghttp2 does not check in our configuration: closed streams, floods (`HTTP2FrameGuard`).
    var frameGuard: HTTP2FrameGuard
    /// The guard ended the connection: later input is not looked at (nghttp2 ignores it too).
    private var frameRuleTripped = false
    /// The server preface still has to go out with the advertised stream limit (`+Limits`).
    private var prefacePending = true

    /// Bytes queued towards the socket before frames stop being produced.
    static let highWater = 256 * 1024
    /// The client connection preface (RFC 9113 §3.4): how h2c with prior knowledge is recognised.
    static let preface: StaticString = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

    init(fd: Int32, loop: EventLoop, listener: ListenerContext, peer: PeerAddress, transport: Transport) {
        self.listener = listener
        self.peer = peer
        self.transport = transport
        let h2 = listener.config.http2
        frameGuard = HTTP2FrameGuard(limits: .init(burst: h2.glitchBurst, perSecond: h2.glitchesPerSecond), now: loop.now)
        super.init(fd: fd, loop: loop)
        watchHangup = true
    }

    deinit {
        if let session { nghttp2_session_del(session) }
        input.free()
        output.free()
    }

    var settings: HTTP2Settings { listener.config.http2 }

    /// Takes over a registered socket (from `TLSAccept`, or from an `HTTP1Connection` that saw
    /// the h2c preface), with any bytes already read from it.
    func start(initialBytes: UnsafeRawBufferPointer?) {
        guard makeSession() else {
            listener.log.error("cannot start an HTTP/2 session (out of memory)", ["peer": peer.text])
            close()
            return
        }
        listener.engineMetrics.http2.connections.increment()
        idleSince = loop.now
        // Its listener was replaced by a reload during the handshake: the new one serves it.
        if listener.state(loop).retired {
            let next = listener.newest(loop)
            next.connectionOpened(loop)
            listener.connectionClosed(loop)
            listener = next
        }
        if listener.isDraining(loop) { beginGoAway() }
        if let initialBytes, initialBytes.count > 0 {
            input = loop.buffers.take()
            input.append(initialBytes)
            receive()
        }
        if !closed { readable() }
    }

    private func makeSession() -> Bool {
        var option: OpaquePointer? = nil
        guard nghttp2_option_new(&option) == 0, let option else { return false }
        defer { nghttp2_option_del(option) }
        nghttp2_option_set_no_auto_window_update(option, 1)
        nghttp2_option_set_stream_reset_rate_limit(option, settings.resetBurst, settings.resetsPerSecond)
        nghttp2_option_set_max_continuations(option, settings.maxContinuations)
        nghttp2_option_set_max_outbound_ack(option, settings.maxOutboundAcks)
        nghttp2_option_set_max_settings(option, 32)
        // Closed streams are not kept for the RFC 7540 priority tree (deprecated by RFC 9113);
        // with SETTINGS_NO_RFC7540_PRIORITIES nghttp2 drops them anyway. What a client sends on
        // a closed stream is `HTTP2FrameGuard`'s to judge.
        nghttp2_option_set_no_closed_streams(option, 1)
        var s: OpaquePointer? = nil
        let me = Unmanaged.passUnretained(self).toOpaque()
        guard nghttp2_session_server_new2(&s, HTTP2Callbacks.shared.pointer, me, option) == 0, let s else { return false }
        session = s
        let limits = listener.config.limits
        var entries = [
            // Twice the advertised limit; the frame on the wire says the advertised one (`+Limits`).
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS.rawValue), value: nghttp2StreamLimit),
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE.rawValue), value: settings.streamWindow),
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE.rawValue), value: UInt32(HTTP2Stream.headerListLimit(limits))),
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_ENABLE_PUSH.rawValue), value: 0),
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_NO_RFC7540_PRIORITIES.rawValue), value: 1),
        ]
        guard nghttp2_submit_settings(s, UInt8(NGHTTP2_FLAG_NONE.rawValue), &entries, entries.count) == 0 else { return false }
        // The connection window starts at 65,535 whatever SETTINGS say (RFC 9113 §6.9.2).
        nghttp2_session_set_local_window_size(s, UInt8(NGHTTP2_FLAG_NONE.rawValue), 0, Int32(clamping: settings.connectionWindow))
        return true
    }

    // MARK: Events

    override func onEvent(_ events: UInt32) {
        if events & CProxyLinux_EPOLLERR != 0 {
            endReason = "client socket error"
            close()
            return
        }
        if lingering {
            discardInput()
            return
        }
        if events & EventLoop.writable != 0 {
            writeOut()
            if closed { return }
            if output.isEmpty { send() }
        }
        if events & CProxyLinux_EPOLLIN != 0 && interest & CProxyLinux_EPOLLIN != 0 {
            readable()
        } else if events & (CProxyLinux_EPOLLRDHUP | CProxyLinux_EPOLLHUP) != 0 && !closed {
            endReason = "client closed"
            close()
        }
    }

    private func readable() {
        if input.base == nil { input = loop.buffers.take() }
        let result: IOResult
        do {
            result = try transport.read(into: &input, reserve: 16 * 1024)
        } catch {
            endReason = transport.describe(error)
            close()
            return
        }
        guard case .done(let n) = result else { return }
        if n == 0 {
            endReason = "client closed"
            close()
            return
        }
        input.writer += n
        receive()
    }

    /// Feeds what `input` holds to nghttp2, then runs the streams it touched and sends.
    private func receive() {
        if frameRuleTripped {
            input.clear()
            return
        }
        var feed = input.readable
        var broken: (code: UInt32, reason: HTTP2FrameGuard.Reason)? = nil
        let verdict = frameGuard.scan(UnsafeRawBufferPointer(start: input.base! + input.reader, count: input.readable), now: loop.now)
        if case .connectionError(let code, let frameStart, let reason) = verdict {
            // What came before the offending frame is processed; the frame and the rest are not.
            feed = max(0, frameStart)
            broken = (code, reason)
        }
        inSession = true
        let rv = feed == 0 ? 0 : nghttp2_session_mem_recv(session, input.base!.assumingMemoryBound(to: UInt8.self) + input.reader, feed)
        inSession = false
        if rv >= 0, let broken {
            frameRuleTripped = true
            frameRuleBroken(code: broken.code, reason: broken.reason)
        }
        if rv < 0 {
            // A connection error (a flood, a bad preface, a compression error…): nghttp2 has
            // queued the GOAWAY that says so where the error allows one.
            protocolFailure(String(cString: nghttp2_strerror(Int32(rv))))
            return
        }
        input.clear()
        if streams.isEmpty { loop.buffers.recycle(&input) }
        runStreams()
        send()
    }

    override func onTimeout() {
        let now = loop.now
        if lingering { finishClose(); return }
        if stalledSince != 0 && now >= stalledSince + listener.config.timeouts.clientSend {
            endReason = "client reads nothing"
            close()
            return
        }
        if !streams.isEmpty {
            // Streams keep their own deadlines (body, send): they are swept here, with the loop's
            // sweep, since they are not registered with the loop themselves.
            let expired = streams.values.filter { $0.deadline != 0 && $0.deadline <= now }
            for stream in expired {
                stream.deadline = 0
                stream.exchange.timedOut()
            }
        } else if !goingAway && now >= idleSince + listener.config.timeouts.keepAlive {
            endReason = "idle"
            beginGoAway()
        }
        if goingAway && !finalGoAwaySent && now >= finalGoAwayAt { sendFinalGoAway() }
        runStreams()
        send()
    }

    override func onDrain() {
        if listener.isDraining(loop) { beginGoAway() }
    }

    /// A reload replaced this listener's configuration: new streams must not start on the old
    /// one, so the client is asked to go to a new connection (in-flight streams finish here).
    override func onReload() {
        if listener.state(loop).retired { beginGoAway() }
    }

    // MARK: Streams

    /// Runs the streams that nghttp2's callbacks touched.
    func runStreams() {
        while !closedStreams.isEmpty || !pending.isEmpty {
            if !closedStreams.isEmpty {
                let closing = closedStreams
                closedStreams.removeAll(keepingCapacity: true)
                for (stream, code) in closing { stream.closed(errorCode: code) }
            }
            if !pending.isEmpty {
                let ready = pending
                pending.removeAll(keepingCapacity: true)
                for stream in ready where !stream.exchange.isClosed {
                    stream.queued = false
                    if stream.waitingSince != 0 { continue }  // runs once admitted
                    stream.received()
                    creditStream(stream)
                }
            }
        }
        if streams.isEmpty && idleSince == 0 { idleSince = loop.now }
    }

    /// Gives the peer back window for the DATA bytes a stream has passed on, if it wants more.
    func creditStream(_ stream: HTTP2Stream) {
        guard stream.unconsumed > 0, stream.exchange.input.isEmpty, !stream.exchange.isClosed, stream.wantsRead else { return }
        nghttp2_session_consume(session, stream.id, stream.unconsumed)
        stream.unconsumed = 0
        scheduleSend()
    }

    /// A stream opened (its HEADERS began). It runs once it has a budget unit (`admit`); past
    /// the advertised stream limit it is refused instead (nil).
    @discardableResult
    func streamOpened(_ id: Int32) -> HTTP2Stream? {
        if streamLimitReached {
            refuseOverLimit(id)
            return nil
        }
        let stream = HTTP2Stream(connection: self, id: id)
        streams[id] = stream
        idleSince = 0
        listener.engineMetrics.http2.streams.increment()
        admit(stream)
        return stream
    }

    /// The peer address as text, formatted once per connection and shared by its streams.
    lazy var peerTextCache: [UInt8] = peer.textBytes

    func markPending(_ stream: HTTP2Stream) {
        guard !stream.queued else { return }
        stream.queued = true
        pending.append(stream)
    }

    /// The exchange ended a stream early (an abort): tell the peer, unless nghttp2 already closed it.
    func resetStream(_ id: Int32, code: nghttp2_error_code) {
        guard !closed else { return }
        nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), id, code.rawValue)
        scheduleSend()
    }

    /// nghttp2 is done with a stream: it leaves the table.
    func forget(_ id: Int32) {
        streams[id] = nil
        if streams.isEmpty { idleSince = loop.now }
    }

    // MARK: Sending

    /// Arranges a `send` after the current batch of events (once, however many streams wrote).
    func scheduleSend() {
        guard !sendScheduled, !closed else { return }
        sendScheduled = true
        loop.onceAfterBatch.append { [self] in
            sendScheduled = false
            if !closed { send() }
        }
    }

    /// Lets nghttp2 produce frames into `output` (up to `highWater`), writes them, and runs what
    /// producing them set off (drained streams, early ends, closed streams).
    func send() {
        guard !inSession, !closed, !lingering else { return }
        var rounds = 0
        repeat {
            rounds += 1
            let failed = produceFrames()
            if failed < 0 {
                protocolFailure(String(cString: nghttp2_strerror(Int32(failed))))
                return
            }
            if !endedEarly.isEmpty {
                for id in endedEarly {
                    nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), id, NGHTTP2_NO_ERROR.rawValue)
                }
                endedEarly.removeAll(keepingCapacity: true)
            }
            if !drained.isEmpty {
                let ready = drained
                drained.removeAll(keepingCapacity: true)
                for stream in ready where !stream.exchange.isClosed { stream.outputDrained() }
            }
            runStreams()
        } while rounds < 8 && output.readable < HTTP2Connection.highWater && nghttp2_session_want_write(session) != 0
            && !closed
        if closed { return }
        writeOut()
        if closed { return }
        if goingAway && finalGoAwaySent && streams.isEmpty && output.isEmpty {
            startLinger()
            return
        }
        if nghttp2_session_want_read(session) == 0 && nghttp2_session_want_write(session) == 0 && output.isEmpty {
            // nghttp2 ended the session (a GOAWAY it sent or received, nothing left in flight).
            if endReason.isEmpty { endReason = "session ended" }
            startLinger()
            return
        }
        updateDeadline()
    }

    /// Serialises what nghttp2 has queued into `output`, up to `highWater`; nghttp2's error
    /// code if it failed (negative), else 0. Callbacks run meanwhile (`inSession`).
    private func produceFrames() -> Int {
        inSession = true
        defer { inSession = false }
        while output.readable < HTTP2Connection.highWater {
            var data: UnsafePointer<UInt8>? = nil
            let n = nghttp2_session_mem_send(session, &data)
            if n < 0 { return n }
            if n == 0 { break }
            if output.base == nil { output = loop.buffers.take() }
            output.append(UnsafeRawPointer(data!), count: n)
            if prefacePending {
                // The session's first frame is its SETTINGS (the server preface).
                prefacePending = false
                let patched = Self.advertise(streamLimit: settings.maxConcurrentStreams, inSettingsFrame: output.base! + output.writer - n,
                                             count: n)
                if !patched {
                    assertionFailure("nghttp2's first frame is not the SETTINGS frame submitted in makeSession")
                    listener.log.error("HTTP/2: the server preface could not be rewritten; clients see twice http2.max_concurrent_streams",
                                       ["peer": peer.text])
                }
            }
        }
        return 0
    }

    private func writeOut() {
        let before = output.readable
        defer { if output.readable < before && !output.isEmpty { stalledSince = loop.now } }
        if transport.isPlain {
            while !output.isEmpty {
                let r: IOResult
                do {
                    r = try Socket.write(fd, from: output.base! + output.reader, count: output.readable)
                } catch {
                    endReason = "client write failed"
                    close()
                    return
                }
                guard case .done(let n) = r else { break }
                output.moveReader(n)
            }
        } else if !output.isEmpty {
            guard transport.drainTLS(&output) != nil else {
                endReason = transport.tlsFailure
                close()
                return
            }
        }
        if output.isEmpty {
            loop.buffers.recycle(&output)
            stalledSince = 0
            want(read: true, write: false)
        } else {
            if stalledSince == 0 { stalledSince = loop.now }
            // A client that does not read its responses is not read from either: its requests
            // would only add to what waits for it.
            want(read: false, write: true)
        }
    }

    private func updateDeadline() {
        if !streams.isEmpty || stalledSince != 0 {
            // Swept with the loop's sweep (every 100 ms) while streams may have deadlines.
            deadline = loop.now
        } else if goingAway && !finalGoAwaySent {
            deadline = finalGoAwayAt
        } else {
            deadline = idleSince + listener.config.timeouts.keepAlive
        }
    }

    // MARK: Ending

    /// Graceful: a GOAWAY notice now, the final GOAWAY (last stream processed) a second later.
    func beginGoAway() {
        guard !goingAway, !closed, session != nil else { return }
        goingAway = true
        nghttp2_submit_shutdown_notice(session)
        finalGoAwayAt = loop.now + Timeouts.second
        if streams.isEmpty { sendFinalGoAway() }
        send()
    }

    private func sendFinalGoAway() {
        guard !finalGoAwaySent else { return }
        finalGoAwaySent = true
        nghttp2_submit_goaway(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), nghttp2_session_get_last_proc_stream_id(session),
                              NGHTTP2_NO_ERROR.rawValue, nil, 0)
    }

    /// nghttp2 reported a connection error: send what it queued (its GOAWAY), then close.
    private func protocolFailure(_ reason: String) {
        endReason = reason
        listener.log.debug("HTTP/2 connection error", ["peer": peer.text, "reason": reason])
        listener.engineMetrics.http2.connectionErrors.increment()
        _ = produceFrames()
        abortStreams()
        writeOut()
        if !closed { startLinger() }
    }

    /// Every stream still in flight ends with the connection.
    private func abortStreams() {
        let all = Array(streams.values)
        streams.removeAll()
        admission.abandonWaiters()
        admitRetry?.cancel()
        admitRetry = nil
        pending.removeAll()
        drained.removeAll()
        closedStreams.removeAll()
        for stream in all { stream.closed(errorCode: NGHTTP2_CANCEL.rawValue) }
    }

    /// Output flushed, write side shut; read and discard (`LingeringClose`) so that unread input
    /// does not turn our close into a reset that eats the last frames (a GOAWAY among them).
    private func startLinger() {
        guard !closed, !lingering else { return }
        abortStreams()
        lingering = true
        transport.shutdownWrite()
        deadline = linger.begin(now: loop.now)
        want(read: true, write: false)
        discardInput()
    }

    private func discardInput() {
        guard let next = linger.discard(fd, now: loop.now, deadline: deadline) else { return finishClose() }
        deadline = next
    }

    /// Closes now: the peer left, or the socket failed.
    func close() {
        guard !closed else { return }
        abortStreams()
        finishClose()
    }

    private func finishClose() {
        guard !closed else { return }
        closed = true
        deadline = 0
        if listener.log.level <= .debug {
            listener.log.debug("HTTP/2 connection closed", ["peer": peer.text, "reason": endReason.isEmpty ? "goaway" : endReason])
        }
        if !lingering { transport.prepareClose() }
        loop.close(self)
        loop.buffers.recycle(&input)
        loop.buffers.recycle(&output)
        listener.connectionClosed(loop)
        listener.clientGone(peer)
    }
}
