import CNghttp3
import CNgtcp2

/// Ending: GOAWAY and a graceful close, CONNECTION_CLOSE on errors, the closing period that keeps
/// the connection's IDs known for three PTOs, and the accounting of a connection that is gone.
extension HTTP3Connection {
    /// GOAWAY (RFC 9114 §5.2): a notice now, the final one (the last stream accepted) a second
    /// later, so that requests the client sent before it read the notice are still served; the
    /// connection closes once its streams are done and the final GOAWAY has had a PTO to arrive.
    /// Never a close without a GOAWAY: the client could not tell which of its requests were
    /// processed (§5.4), and every request it had in flight would be lost.
    func beginShutdown() {
        guard !goingAway, !closed, closingUntil == 0 else { return }
        goingAway = true
        // Still in its handshake: the notice goes once HTTP/3 is up (`setUpHTTP3`).
        guard let h3 else { return }
        noticeGoAway(h3)
        runStreams()
        if !closed { scheduleWrite() }
    }

    func noticeGoAway(_ h3: OpaquePointer) {
        nghttp3_conn_submit_shutdown_notice(h3)
        finalGoAwayAt = loop.now + Timeouts.second
    }

    /// The final GOAWAY: streams the client opens from now on are rejected (H3_REQUEST_REJECTED,
    /// safe to retry elsewhere) by nghttp3.
    func sendFinalGoAway(now: UInt64) {
        finalGoAwayAt = 0
        if let h3 { nghttp3_conn_shutdown(h3) }
        closeNotBefore = now + ngtcp2_conn_get_pto(conn)
    }

    /// Going away, the final GOAWAY out for a PTO, no stream left: the connection closes.
    var mayCloseGracefully: Bool {
        goingAway && closeNotBefore != 0 && streams.isEmpty && EventLoop.monotonicNow() >= closeNotBefore
    }

    func closeGracefully() {
        guard !closed, closingUntil == 0 else { return }
        var error = ngtcp2_connection_close_error()
        ngtcp2_connection_close_error_set_application_error(&error, UInt64(NGHTTP3_H3_NO_ERROR), nil, 0)
        endReason = endReason.isEmpty ? "goaway" : endReason
        sendClose(error)
    }

    /// Sends CONNECTION_CLOSE and waits out the closing period.
    func sendClose(_ error: ngtcp2_connection_close_error) {
        var error = error
        var info = ngtcp2_pkt_info()
        let n = CNgtcp2_conn_write_connection_close(conn, &outPath.pointee.path, &info, quic.sendBuffer, Self.maxPacket, &error,
                                                    EventLoop.monotonicNow())
        if n > 0 {
            quic.sendBatch(quic.sendBuffer, count: n, segment: n, packets: 1, to: outPath.pointee.path.remote.addr,
                           length: socklen_t(outPath.pointee.path.remote.addrlen), from: outPath.pointee.path.local.addr,
                           ecn: UInt8(truncatingIfNeeded: info.ecn))
        }
        enterClosingPeriod()
    }

    func enterClosingPeriod() {
        abortStreams()
        closingUntil = EventLoop.monotonicNow() + 3 * ngtcp2_conn_get_pto(conn)
        arm(at: closingUntil)
        countClosed()
    }

    func countClosed() {
        guard counted else { return }
        counted = false
        if !handshakeDone {
            quic.handshakes -= 1
            listener.engineMetrics.http3.handshakesFailed.increment()
        }
        listener.connectionClosed(loop)
        listener.clientGone(peer)
        if listener.log.level <= .debug {
            listener.log.debug("HTTP/3 connection closed", ["peer": peer.text, "reason": endReason, "glitches": "\(work.charged)"])
        }
    }

    func abortStreams() {
        let all = Array(streams.values)
        streams.removeAll()
        // Streams that wait for a unit end with the rest, none admitted on the way.
        admission.abandonWaiters()
        pending.removeAll()
        drained.removeAll()
        closedStreams.removeAll()
        resumable.removeAll()
        endedEarly.removeAll()
        heldForStreams.removeAll()
        for stream in all { stream.closed(errorCode: UInt64(NGHTTP3_H3_REQUEST_CANCELLED)) }
    }

    /// Gone: out of the listener's table (which held the last reference).
    func finish() {
        guard !closed else { return }
        abortStreams()
        countClosed()
        closed = true
        admitRetry?.cancel()
        admitRetry = nil
        disarm()
        for id in ids { quic.unregister(id) }
        ids.removeAll()
    }
}
