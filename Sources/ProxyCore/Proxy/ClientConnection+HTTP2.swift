import CNghttp2
#if canImport(Glibc)
import Glibc
#endif

/// The exchange as one HTTP/2 stream (see `HTTP2Connection`): where it would read or write a
/// socket, it hands bytes to its connection instead. Everything else — phases, limits, the
/// upstream, the access log — is the HTTP/1.1 code path, unchanged.
extension ClientConnection {
    /// Before nghttp2's callbacks write request bytes into `input`.
    @inline(__always)
    func h2PrepareInput() {
        if input.base == nil { input = loop.buffers.take() }
    }

    /// Request bytes (the head, DATA, the end) arrived from the connection.
    func h2Received() {
        guard let h2 else { return }
        if exchange.isLingering {
            // The response is complete; what the client still sends has nowhere to go.
            input.clear()
            return
        }
        if exchange.isIdle, let refusal = h2.request.refusal {
            input.clear()
            beginRequest(headLength: 0)
            exchange.headRefused()
            respondError(.invalidHead(status: refusal.status, refusal.reason))
            return
        }
        inputArrived()
    }

    /// `flush()` for a stream: the response heads go to nghttp2 as HEADERS, the body waits in
    /// `output` for nghttp2 to pull it (`HTTP2Callbacks.readBody`) as the peer's windows allow.
    func h2Flush() {
        let h2 = self.h2!
        let c = h2.connection
        if !h2.responseSubmitted {
            guard !h2.heads.isEmpty else { return }
            guard HTTP2Response.submitHeads(self, c) else {
                logProblem(.warn, "cannot send the response head over HTTP/2", key: "h2 head", [])
                abort(.invalidStreamHead)
                return
            }
            if !h2.responseSubmitted { c.scheduleSend(); return }  // 1xx only so far
        } else if !output.isEmpty || h2.responseDone {
            nghttp2_session_resume_data(c.session, h2.id)
        }
        c.scheduleSend()
        if output.isEmpty {
            if deadlineKind == .send { setDeadline(.none, 0) }
            want(read: wantsInput, write: false)
            upstream?.resumeReading()
        } else {
            want(read: wantsInput, write: true)
            if deadlineKind == .none || deadlineKind == .send { setDeadline(.send, config.timeouts.clientSend) }
        }
    }

    /// nghttp2 took everything in `output`: read the upstream again (it may have been paused).
    func h2OutputDrained() {
        guard output.isEmpty else { return }
        if deadlineKind == .send { setDeadline(.none, 0) }
        want(read: wantsInput, write: false)
        upstream?.resumeReading()
    }

    /// `finishRequest()` for a stream: the response is complete in `output`; END_STREAM follows
    /// its last byte. A request body not read to its end is cut by `RST_STREAM NO_ERROR` then.
    func h2Finished() {
        h2!.responseDone = true
        input.clear()
        h2Flush()
        if exchange.isLingering { setDeadline(.send, config.timeouts.clientSend) }
    }

    /// nghttp2 closed the stream: normally after its END_STREAM both ways, or because the client
    /// reset it, or with the connection. An exchange still in flight is aborted (its upstream
    /// request with it).
    func h2StreamClosed(errorCode: UInt32) {
        guard let h2 else { return }
        h2.finished = true
        h2.connection.streamEnded(h2)
        h2.connection.forget(h2.id)
        if h2.refused {
            // Refused while it waited for a budget unit: it never ran.
            _ = exchange.closed()
            deadline = 0
            releaseStreamBuffers()
            return
        }
        if !exchange.isLingering && !exchange.isClosed {
            h2.connection.listener.engineMetrics.http2.resetsReceived.increment()
            abort(.streamReset)
            return
        }
        if !exchange.isClosed {
            if !(h2.responseDone && output.isEmpty) && errorCode != 0 {
                // The client reset it while the last bytes were still going out.
                h2.connection.listener.engineMetrics.http2.resetsReceived.increment()
            }
            _ = exchange.closed()
            deadline = 0
            releaseStreamBuffers()
        }
    }

    /// `finishClose()` for a stream: an abort (the upstream failed mid-response, a timeout)
    /// resets the stream, unless nghttp2 already closed it.
    func h2Closed() {
        let h2 = self.h2!
        defer { releaseStreamBuffers() }
        if !h2.finished {
            // NO_ERROR only for a response that is out in full; a cut one is an error the
            // client must see as such.
            h2.connection.resetStream(h2.id, code: h2.responseDone && output.isEmpty ? NGHTTP2_NO_ERROR : NGHTTP2_INTERNAL_ERROR)
        }
    }

    private func releaseStreamBuffers() {
        loop.buffers.recycle(&input)
        loop.buffers.recycle(&output)
        loop.requestStates.recycle(&current, buffers: loop.buffers)
    }

    // MARK: h2c with prior knowledge

    /// `input` begins with the HTTP/2 client preface's request line (RFC 9113 §3.4).
    var startsWithHTTP2Preface: Bool {
        let line = 16  // "PRI * HTTP/2.0\r\n"
        return input.readable >= line && memcmp(input.base! + input.reader, HTTP2Connection.preface.utf8Start, line) == 0
    }

    /// The socket speaks HTTP/2 from its first byte: an `HTTP2Connection` takes it over (with
    /// the bytes read so far), as a TLS handshake hands over to its connection.
    func handOverToHTTP2() {
        let connection = HTTP2Connection(fd: fd, loop: loop, listener: listener, peer: peer, transport: transport)
        loop.handOver(self, to: connection)
        _ = exchange.closed()
        deadline = 0
        let bytes = Array(input.readableBytes)
        releaseStreamBuffers()
        bytes.withUnsafeBytes { connection.start(initialBytes: $0) }
    }
}
