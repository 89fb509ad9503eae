import CNghttp3
import CNgtcp2
import COpenSSL
#if canImport(Glibc)
import Glibc
#endif

/// HTTP/3 on one QUIC connection: ngtcp2 does QUIC (packets, loss recovery, congestion and
/// flow control, stream states, path validation when the client's address changes), GnuTLS
/// does its TLS 1.3 handshake through ngtcp2's helper, nghttp3 does HTTP/3 (frames, QPACK, the
/// RFC 9114 §4 message checks). This class moves datagrams between ngtcp2 and its loop's
/// socket (`QUICListener`) and runs **each request stream as an exchange of its own**
/// (`HTTP3Stream` owns a `ClientExchange`), exactly as `HTTP2Connection` does: the same
/// request head rewrite (`HTTP3RequestHead` → `StreamRequestHead`), parser, phases, upstream
/// request, access log and metrics.
///
/// **Not a `Channel`.** Its connections share the loop's one UDP socket, so a connection is a
/// `LoopSource`: `wake()` sends once after a batch of datagrams, `arm(at:)` serves ngtcp2's
/// timers (loss detection, ACK delay, idle) and the streams' deadline sweep.
///
/// **Re-entrancy.** Library callbacks only record what happened (a stream's bytes, a closed
/// stream, a drained output); the streams run after ngtcp2 returns (`runStreams`), and an
/// exchange never calls into a library from inside one of its callbacks.
///
/// **Flow control.** A stream's DATA is credited back to the client (`extend_max_stream_offset`)
/// only once the exchange has passed it on and wants more (`HTTP3Stream.creditIfWanted`), as over HTTP/2.
/// Response bytes nghttp3 takes are copied out of the exchange's output into `HTTP3Stream.sent`,
/// where they stay until the client acknowledges them (nghttp3 may send them again until
/// then); past `HTTP3Stream.unackedLimit` the stream waits for acknowledgements, and the
/// exchange stops reading its upstream while its output is full — a slow client slows the
/// upstream, never fills our memory.
///
/// **Ending.** Shutdown and reload send GOAWAY (`nghttp3_conn_submit_shutdown_notice`, then
/// the final one a second later); streams in flight finish; then CONNECTION_CLOSE with
/// H3_NO_ERROR. Idle connections end silently after `http3.idle_timeout` (ngtcp2's timer).
final class HTTP3Connection: LoopSource {
    unowned(unsafe) let quic: QUICListener
    /// The configuration the connection started on (a reload sends it GOAWAY; its streams
    /// finish here).
    let listener: ListenerContext
    let peer: PeerAddress
    /// The largest request field section accepted (HTTP/2's rule), read per field: computed once
    /// rather than through `listener.config` each time.
    let headerListLimit: Int
    /// The client's address at the first packet (its NEW_TOKEN is bound to it).
    private let client: QUICAddress
    private(set) var conn: OpaquePointer!
    private var session: gnutls_session_t?
    /// The certificate its handshake presents (held: GnuTLS's session points into them, and a
    /// reload may replace the listener's meanwhile).
    var credentials: QUICCredentials?
    private(set) var h3: OpaquePointer?
    /// GnuTLS's pointer back to the connection (ngtcp2's helper reads it): a stable address.
    private let connRef = UnsafeMutablePointer<ngtcp2_crypto_conn_ref>.allocate(capacity: 1)
    /// Where ngtcp2 writes the path of each packet it builds (its addresses point into it).
    let outPath: UnsafeMutablePointer<ngtcp2_path_storage> = {
        let p = UnsafeMutablePointer<ngtcp2_path_storage>.allocate(capacity: 1)
        ngtcp2_path_storage_zero(p)
        return p
    }()
    /// The path of the packets batched for sending (`write`).
    let batchPath: UnsafeMutablePointer<ngtcp2_path_storage> = {
        let p = UnsafeMutablePointer<ngtcp2_path_storage>.allocate(capacity: 1)
        ngtcp2_path_storage_zero(p)
        return p
    }()
    let vecs = UnsafeMutablePointer<nghttp3_vec>.allocate(capacity: 16)
    /// The connection IDs it is found by in `quic.connections`.
    var ids: [QUICConnectionKey] = []
    var streams: [Int64: HTTP3Stream] = [:]
    /// Streams that received request bytes (or a head) since they last ran.
    var pending: [HTTP3Stream] = []
    /// Streams whose output nghttp3 emptied (their upstream may be read again).
    var drained: [HTTP3Stream] = []
    /// Streams nghttp3 closed, with their application error code.
    var closedStreams: [(HTTP3Stream, UInt64)] = []
    /// Streams that waited for acknowledgements and may be given more now.
    var resumable: [HTTP3Stream] = []
    /// Streams whose response ended before their request body: the client is told to stop
    /// sending it (`stopReading`).
    var endedEarly: [Int64] = []
    var handshakeDone = false
    /// The connection no longer counts (its streams are gone; only its IDs wait).
    var counted = true
    /// Which streams run on the client-connection budget, which wait (`HTTP3Connection+Admission`).
    var admission = StreamAdmission<HTTP3Stream>()
    /// The next look for a free unit while streams wait.
    var admitRetry: TimerHandle?
    var closed = false
    /// After CONNECTION_CLOSE (sent or received): nothing more is sent; the IDs stay known until
    /// this deadline (three PTOs, RFC 9000 §10.2) so that late packets are not answered by a reset.
    var closingUntil: UInt64 = 0
    var goingAway = false
    /// When the final GOAWAY is due (0: not yet noticed, or already sent).
    var finalGoAwayAt: UInt64 = 0
    /// Once the final GOAWAY is out: the close waits for this (a PTO, for it to arrive).
    var closeNotBefore: UInt64 = 0
    /// Our control and QPACK streams are open (`setUpHTTP3`).
    var streamsBound = false
    /// Streams whose response waits for them to open (answered from early data).
    var heldForStreams: [HTTP3Stream] = []
    /// The stream bytes being passed to nghttp3 came in 0-RTT packets (`http3.early_data`).
    var earlyChunk = false
    /// Set by a callback that failed because nghttp3 did: the error CONNECTION_CLOSE carries.
    var applicationError: Int32 = 0
    var endReason = ""
    /// Packets, resets and connection IDs that move nothing forward (`QUICWorkGuard`).
    var work: QUICWorkGuard

    /// The packet budget one `write` sends before it yields to the loop (it asks to run again).
    static let packetsPerWrite = 64
    static let maxPacket = Int(NGTCP2_MAX_PMTUD_UDP_PAYLOAD_SIZE)
    /// The `active_connection_id_limit` we advertise: how many connection IDs the client may
    /// give us (ngtcp2 0.12 keeps at most eight), enough for its migrations.
    static let clientConnectionIDLimit = 4

    /// A connection for the client Initial `header` (from `from`), on `listener`'s current
    /// configuration; nil if ngtcp2 or GnuTLS cannot set it up. `peer`: the client as the
    /// per-client limits counted it (`ListenerContext.clientMayConnect`).
    init?(listener quic: QUICListener, header: ngtcp2_pkt_hd, originalDCID: [UInt8]?, token: [UInt8], arrival: QUICArrival,
          peer: PeerAddress) {
        self.quic = quic
        listener = quic.context
        self.peer = peer
        headerListLimit = HTTP2Stream.headerListLimit(quic.context.config.limits)
        client = arrival.from
        let h3 = quic.context.config.http3
        work = QUICWorkGuard(limits: .init(burst: h3.glitchBurst, perSecond: h3.glitchesPerSecond), now: quic.loop.now)
        super.init(loop: quic.loop)
        guard let credentials = listener.quicCertificate?.credentials else { return nil }
        self.credentials = credentials
        let settings = listener.config.http3
        var s = ngtcp2_settings()
        CNgtcp2_settings_default(&s)
        s.initial_ts = EventLoop.monotonicNow()
        s.max_tx_udp_payload_size = Self.maxPacket
        var params = ngtcp2_transport_params()
        CNgtcp2_transport_params_default(&params)
        params.initial_max_stream_data_bidi_local = UInt64(settings.streamWindow)
        params.initial_max_stream_data_bidi_remote = UInt64(settings.streamWindow)
        // The client's control and QPACK streams: small, and consumed at once.
        params.initial_max_stream_data_uni = 64 * 1024
        params.initial_max_data = UInt64(settings.connectionWindow)
        params.initial_max_streams_bidi = UInt64(settings.maxStreams)
        params.initial_max_streams_uni = 3
        params.max_idle_timeout = settings.idleTimeout
        params.active_connection_id_limit = UInt64(Self.clientConnectionIDLimit)
        if let originalDCID {
            // Retried: the Initial's first ID, and the Retry's (which the client sends to now).
            params.original_dcid = QUICTokens.cid(originalDCID)
            params.retry_scid = header.dcid
            params.retry_scid_present = 1
        } else {
            params.original_dcid = header.dcid
        }
        let scidBytes = newConnectionID()
        var scid = QUICTokens.cid(scidBytes)
        params.stateless_reset_token_present = 1
        let reset = quic.shared.tokens.statelessResetToken(for: scidBytes)
        withUnsafeMutableBytes(of: &params.stateless_reset_token) { $0.copyBytes(from: reset) }
        var tokenCopy = token
        var dcid = header.scid
        var callbacks = HTTP3Callbacks.quic
        var made: OpaquePointer?
        var local = arrival.local, remote = arrival.from
        let rv = tokenCopy.withUnsafeMutableBufferPointer { t -> Int32 in
            if !token.isEmpty {
                s.token = ngtcp2_vec(base: t.baseAddress, len: t.count)
            }
            return Self.withPath(&local, &remote) { path in
                CNgtcp2_conn_server_new(&made, &dcid, &scid, path, header.version, &callbacks, &s, &params,
                                        Unmanaged.passUnretained(self).toOpaque())
            }
        }
        guard rv == 0, let made else { return nil }
        conn = made
        guard startTLS(credentials) else { return nil }
        // Ours, and the client's first one (its Initials come to it until the handshake moves on).
        ids = [scidBytes, QUICTokens.bytes(header.dcid)].compactMap(QUICConnectionKey.init)
        for id in ids { quic.register(id, self) }
        quic.handshakes += 1
        listener.connectionOpened(loop)
        listener.engineMetrics.http3.connections.increment()
    }

    deinit {
        if let h3 { nghttp3_conn_del(h3) }
        if let conn { ngtcp2_conn_del(conn) }
        if let session { gnutls_deinit(session) }
        connRef.deallocate()
        outPath.deallocate()
        batchPath.deallocate()
        vecs.deallocate()
    }

    /// GnuTLS as ngtcp2's helper configures it: TLS 1.3 only, ALPN `h3` required.
    private func startTLS(_ credentials: QUICCredentials) -> Bool {
        var s: gnutls_session_t?
        // 0-RTT only with `http3.early_data` (and GnuTLS's anti-replay check): a replayed
        // request would reach the app twice, so the exchange serves only what is safe to replay.
        let antiReplay = listener.config.http3.earlyData ? quic.shared.antiReplay : nil
        var flags = UInt32(GNUTLS_SERVER.rawValue) | UInt32(GNUTLS_NO_AUTO_SEND_TICKET.rawValue)
            | UInt32(GNUTLS_NO_END_OF_EARLY_DATA.rawValue)
        if antiReplay != nil { flags |= UInt32(GNUTLS_ENABLE_EARLY_DATA.rawValue) }
        guard gnutls_init(&s, flags) == 0, let s else { return false }
        session = s
        if let antiReplay {
            gnutls_anti_replay_enable(s, antiReplay.handle)
            // RFC 9001 §4.6.1: a QUIC ticket says 0xffffffff; QUIC's own limits bound the data.
            _ = gnutls_record_set_max_early_data_size(s, Int(UInt32.max))
        }
        guard gnutls_priority_set(s, quic.shared.priority) == 0,
              ngtcp2_crypto_gnutls_configure_server_session(s) == 0,
              gnutls_credentials_set(s, GNUTLS_CRD_CERTIFICATE, UnsafeMutableRawPointer(credentials.credentials)) == 0,
              gnutls_session_ticket_enable_server(s, quic.ticketKey.datum) == 0 else {
            return false
        }
        var alpn = Array("h3".utf8)
        let set = alpn.withUnsafeMutableBufferPointer { b -> Int32 in
            var datum = gnutls_datum_t(data: b.baseAddress, size: UInt32(b.count))
            return gnutls_alpn_set_protocols(s, &datum, 1, UInt32(GNUTLS_ALPN_MANDATORY.rawValue))
        }
        guard set == 0 else { return false }
        connRef.initialize(to: ngtcp2_crypto_conn_ref(get_conn: { ref in
            Unmanaged<HTTP3Connection>.fromOpaque(ref!.pointee.user_data!).takeUnretainedValue().conn
        }, user_data: Unmanaged.passUnretained(self).toOpaque()))
        gnutls_session_set_ptr(s, connRef)
        // SNI: `tls.sni`'s certificates, picked as TCP picks them. The session's pointer is
        // ngtcp2's connection reference, whose user data is this connection.
        gnutls_handshake_set_post_client_hello_function(s) { session in
            guard let session, let ref = gnutls_session_get_ptr(session)?.assumingMemoryBound(to: ngtcp2_crypto_conn_ref.self),
                  let user = ref.pointee.user_data else { return 0 }
            Unmanaged<HTTP3Connection>.fromOpaque(user).takeUnretainedValue().credentials?.selectCertificate(session)
            return 0
        }
        ngtcp2_conn_set_tls_native_handle(conn, UnsafeMutableRawPointer(s))
        return true
    }

    /// A new connection ID of this loop's (registered by `issued`).
    func newConnectionID() -> [UInt8] {
        quic.shared.ids(loop).make(loop: loop.index, random: QUICShared.random(13))
    }

    func issued(_ id: [UInt8]) {
        guard let key = QUICConnectionKey(id) else { return }
        ids.append(key)
        quic.register(key, self)
    }

    func retired(_ id: [UInt8]) {
        guard let key = QUICConnectionKey(id) else { return }
        ids.removeAll { $0 == key }
        quic.unregister(key)
    }

    static func withPath<R>(_ local: inout QUICAddress, _ remote: inout QUICAddress, _ body: (UnsafePointer<ngtcp2_path>) -> R) -> R {
        let localLength = local.length, remoteLength = remote.length
        return withUnsafeMutablePointer(to: &local.storage) { l in
            withUnsafeMutablePointer(to: &remote.storage) { r in
                l.withMemoryRebound(to: sockaddr.self, capacity: 1) { la in
                    r.withMemoryRebound(to: sockaddr.self, capacity: 1) { ra in
                        var path = ngtcp2_path(local: ngtcp2_addr(addr: la, addrlen: ngtcp2_socklen(localLength)),
                                               remote: ngtcp2_addr(addr: ra, addrlen: ngtcp2_socklen(remoteLength)), user_data: nil)
                        return body(&path)
                    }
                }
            }
        }
    }

    // MARK: Receiving

    /// One datagram for this connection (from an address that may be new: ngtcp2 validates the
    /// path before it sends there in earnest).
    func received(_ datagram: UnsafeRawBufferPointer, _ arrival: QUICArrival) {
        guard !closed, closingUntil == 0 else { return }
        listener.engineMetrics.http3.bytesReceived.increment(by: datagram.count)
        var local = arrival.local, remote = arrival.from
        var info = ngtcp2_pkt_info(ecn: UInt32(arrival.ecn))
        work.packetBegins()
        let rv = Self.withPath(&local, &remote) { path in
            CNgtcp2_conn_read_pkt(conn, path, &info, datagram.baseAddress!.assumingMemoryBound(to: UInt8.self), datagram.count,
                                  EventLoop.monotonicNow())
        }
        if rv != 0 {
            failed(rv)
            return
        }
        if let glitch = work.packetEnds(now: loop.now) {
            excessiveLoad(glitch)
            return
        }
        runStreams()
        scheduleWrite()
    }

    /// The client spent its budget of work without progress: the connection ends with
    /// H3_EXCESSIVE_LOAD (RFC 9114 §8.1), its streams with it.
    func excessiveLoad(_ glitch: QUICWorkGuard.Glitch) {
        listener.engineMetrics.http3.endedForLoad(glitch)
        listener.throttle.log(.warn, "HTTP/3 connection closed: too much work without progress", key: "h3 excessive load", fields: [
            ("listener", listener.spec.name), ("peer", peer.text), ("glitch", glitch.text),
            ("setting", "http3.glitch_burst, http3.max_glitches_per_second"),
        ], on: loop)
        var error = ngtcp2_connection_close_error()
        ngtcp2_connection_close_error_set_application_error(&error, UInt64(NGHTTP3_H3_EXCESSIVE_LOAD), nil, 0)
        endReason = "excessive load (\(glitch.label))"
        sendClose(error)
    }

    /// ngtcp2 refused a packet or a timer: the connection ends, with a CONNECTION_CLOSE that says
    /// why unless the client already closed it or it timed out.
    func failed(_ rv: Int32) {
        switch rv {
        case NGTCP2_ERR_DRAINING:
            // The client closed it: no reply, the IDs stay known for the draining period.
            endReason = "client closed"
            enterClosingPeriod()
        case NGTCP2_ERR_IDLE_CLOSE:
            endReason = "idle"
            finish()
        case NGTCP2_ERR_DROP_CONN, NGTCP2_ERR_RETRY:
            endReason = "dropped"
            finish()
        default:
            var error = ngtcp2_connection_close_error()
            if applicationError != 0 {
                ngtcp2_connection_close_error_set_application_error(&error, nghttp3_err_infer_quic_app_error_code(applicationError), nil, 0)
            } else if rv == NGTCP2_ERR_CRYPTO {
                ngtcp2_connection_close_error_set_transport_error_tls_alert(&error, ngtcp2_conn_get_tls_alert(conn), nil, 0)
            } else {
                ngtcp2_connection_close_error_set_transport_error_liberr(&error, rv, nil, 0)
            }
            endReason = String(cString: ngtcp2_strerror(rv))
            listener.engineMetrics.http3.connectionErrors.increment()
            if listener.log.level <= .debug {
                listener.log.debug("HTTP/3 connection error", ["peer": peer.text, "reason": endReason])
            }
            sendClose(error)
        }
    }

    // MARK: Streams

    /// A request stream began (its HEADERS): it starts, or waits for a unit of the connection
    /// budget (`HTTP3Connection+Admission`).
    func streamOpened(_ id: Int64) -> HTTP3Stream {
        let stream = HTTP3Stream(host: self, id: id)
        streams[id] = stream
        listener.engineMetrics.http3.streams.increment()
        admit(stream)
        return stream
    }

    /// The peer address as text, formatted once per connection and shared by its streams.
    lazy var peerTextCache: [UInt8] = peer.textBytes

    /// nghttp3, once keys that can carry requests are in: 0-RTT's (early data accepted) or
    /// 1-RTT's. No QPACK dynamic table (`qpack_max_dtable_capacity` 0): nothing a client's
    /// encoder sends can make us hold state, and blocked streams cannot happen. Our control and
    /// QPACK streams are opened with the 1-RTT keys (`withStreams`): with 0-RTT's the handshake
    /// has not yet settled what the client allows.
    func setUpHTTP3(withStreams: Bool) -> Int32 {
        if h3 == nil {
            var callbacks = HTTP3Callbacks.http3
            var settings = nghttp3_settings()
            CNghttp3_settings_default(&settings)
            settings.max_field_section_size = UInt64(headerListLimit)
            settings.qpack_max_dtable_capacity = 0
            settings.qpack_blocked_streams = 0
            var made: OpaquePointer?
            guard CNghttp3_conn_server_new(&made, &callbacks, &settings, Unmanaged.passUnretained(self).toOpaque()) == 0, let made else {
                return NGTCP2_ERR_CALLBACK_FAILURE
            }
            h3 = made
            nghttp3_conn_set_max_client_streams_bidi(made, UInt64(listener.config.http3.maxStreams))
        }
        guard withStreams, !streamsBound, let h3 else { return 0 }
        streamsBound = true
        var control: Int64 = -1, encoder: Int64 = -1, decoder: Int64 = -1
        guard ngtcp2_conn_open_uni_stream(conn, &control, nil) == 0, nghttp3_conn_bind_control_stream(h3, control) == 0,
              ngtcp2_conn_open_uni_stream(conn, &encoder, nil) == 0, ngtcp2_conn_open_uni_stream(conn, &decoder, nil) == 0,
              nghttp3_conn_bind_qpack_streams(h3, encoder, decoder) == 0 else {
            return NGTCP2_ERR_CALLBACK_FAILURE
        }
        // Told to go away during its handshake: the notice goes with the first 1-RTT packets.
        if goingAway { noticeGoAway(h3) }
        return 0
    }

    /// Runs the streams the callbacks touched.
    func runStreams() {
        if _slowPath(!heldForStreams.isEmpty) && streamsBound {
            let held = heldForStreams
            heldForStreams.removeAll()
            for stream in held where !stream.exchange.isClosed { stream.flush() }
        }
        while !closedStreams.isEmpty || !pending.isEmpty || !drained.isEmpty || !resumable.isEmpty || !endedEarly.isEmpty {
            if !endedEarly.isEmpty {
                for id in endedEarly { stopReading(id) }
                endedEarly.removeAll(keepingCapacity: true)
            }
            if !resumable.isEmpty {
                let ready = resumable
                resumable.removeAll(keepingCapacity: true)
                for stream in ready { stream.resume() }
            }
            if !closedStreams.isEmpty {
                let closing = closedStreams
                closedStreams.removeAll(keepingCapacity: true)
                for (stream, code) in closing { stream.closed(errorCode: code) }
            }
            if !pending.isEmpty {
                let ready = pending
                pending.removeAll(keepingCapacity: true)
                for stream in ready where !stream.exchange.isClosed { stream.run() }
            }
            if !drained.isEmpty {
                let ready = drained
                drained.removeAll(keepingCapacity: true)
                for stream in ready where !stream.exchange.isClosed { stream.outputDrained() }
            }
        }
        if mayCloseGracefully { closeGracefully() }
    }

    // MARK: Sending

    /// Woken once after a batch of events: send what it has (`HTTP3Connection+Sending`).
    override func onWake() {
        write()
    }

    /// ngtcp2's timer (loss detection, ACK delay, idle, handshake) or the streams' sweep is due;
    /// at the end of the closing period the connection goes.
    override func onTimer() {
        guard !closed else { return }
        let now = EventLoop.monotonicNow()
        if closingUntil != 0 {
            if now >= closingUntil { finish() } else { arm(at: closingUntil) }
            return
        }
        if ngtcp2_conn_get_expiry(conn) <= now {
            let rv = ngtcp2_conn_handle_expiry(conn, now)
            if rv != 0 {
                failed(rv)
                return
            }
        }
        if !streams.isEmpty {
            let expired = streams.values.filter { $0.deadline != 0 && $0.deadline <= loop.now }
            for stream in expired {
                stream.deadline = 0
                stream.exchange.timedOut()
            }
        }
        if goingAway && finalGoAwayAt != 0 && now >= finalGoAwayAt {
            sendFinalGoAway(now: now)
        }
        runStreams()
        write()
    }

    func handshakeCompleted() {
        guard !handshakeDone else { return }
        handshakeDone = true
        quic.handshakes -= 1
        // A session ticket (resumption; no early data is accepted with it), sent by hand: the
        // session was made with GNUTLS_NO_AUTO_SEND_TICKET so that it goes at 1-RTT, after the
        // handshake, as ngtcp2 expects.
        if let session { _ = gnutls_session_ticket_send(session, 1, 0) }
        // A token for the client's next connection: it skips a Retry (address validation).
        if let client = client.socketAddress,
           let token = quic.shared.tokens.regularToken(client: client, now: QUICShared.wallClock()) {
            _ = token.withUnsafeBufferPointer { ngtcp2_conn_submit_new_token(conn, $0.baseAddress, $0.count) }
        }
    }
}
