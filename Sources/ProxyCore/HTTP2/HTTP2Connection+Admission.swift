import CNghttp2

/// **Streams and the descriptor budget.** Every stream may hold an upstream connection of its
/// own, so streams count in the client-connection budget (`ConnectionBudget`) as HTTP/1.1
/// connections do: the connection's own unit runs one stream, and every stream beyond it runs
/// on a unit of its own, taken when it starts and given back when it ends. Without this, 128
/// streams on each of a few connections could open sockets past the descriptor limit, and the
/// upstream `socket()` of every request would fail with EMFILE (502), as it did for HTTP/1.1
/// before the budget existed.
///
/// With the budget spent (a flood, or a descriptor limit small for the load) a new stream
/// **waits**, as a new HTTP/1.1 connection waits in the kernel's backlog: its request bytes are
/// held (the stream's flow-control window bounds them; nothing is credited back while it
/// waits), and it starts when a unit comes free — at once when one of its connection's own
/// streams ends, else at the next look (every `Acceptor.pauseAtBudget`, as a
/// paused listener looks). A stream that waits longer than `timeouts.client_header` is refused
/// with `RST_STREAM REFUSED_STREAM`, which tells the client that nothing of it was processed
/// and that it may retry (RFC 9113 §8.7). Refusing at once was tried first: h2load (8 × 128
/// streams at `ulimit -n 1024`) then saw 3,360 of 4,096 requests fail, since many clients do
/// not retry; the build before the budget counted streams served 3,693 and 502'd the rest.
extension HTTP2Connection {
    /// A stream opened: it starts now if a unit is free and none of its connection's streams
    /// waits before it, else it waits.
    func admit(_ h2: HTTP2Stream) {
        guard admission.admit(h2, now: loop.now, budget: listener.budget, started: started) else { return }
        scheduleAdmitRetry()
        listener.engineMetrics.http2.waitedForBudget.increment()
        let budget = listener.budget
        listener.throttle.log(.warn, "HTTP/2 stream waits: connection limit reached", key: "h2 budget wait", fields: [
            ("listener", listener.spec.name), ("peer", peer.text), ("open", "\(budget.current)"), ("limit", "\(budget.limit)"),
            ("setting", "limits.max_connections (and the descriptor limit: LimitNOFILE, ulimit -n)"),
        ], on: loop)
    }

    /// A waiting stream got its unit: its head (and any DATA) arrived while it waited, so it runs
    /// with the next batch.
    private func started(_ h2: HTTP2Stream) {
        if h2.exchange.input.readable > 0 { markPending(h2) }
    }

    /// A stream ended (normally, reset, or with its connection): its unit goes back, to the
    /// next waiting stream first.
    func streamEnded(_ h2: HTTP2Stream) {
        admission.ended(h2)
        guard !admission.waiting.isEmpty, !closed else { return }
        admission.startWaiting(budget: listener.budget, started: started)
    }

    private func scheduleAdmitRetry() {
        guard admitRetry == nil, !closed else { return }
        admitRetry = loop.scheduleTimer(after: Acceptor.pauseAtBudget) { [weak self] in
            guard let self else { return }
            self.admitRetry = nil
            guard !self.closed else { return }
            // Streams that waited longer than timeouts.client_header are refused: the client may
            // retry them, on this connection or another.
            self.admission.takeWaiters(waitingAtLeast: self.listener.config.timeouts.clientHeader, now: self.loop.now) { h2 in
                h2.refused = true
                self.resetStream(h2.id, code: NGHTTP2_REFUSED_STREAM)
                self.listener.engineMetrics.http2.refusedAtBudget.increment()
            }
            self.admission.startWaiting(budget: self.listener.budget, started: self.started)
            if !self.admission.waiting.isEmpty { self.scheduleAdmitRetry() }
            self.runStreams()
            self.send()
        }
    }
}
