import CNghttp3

/// **Streams and the descriptor budget**, as over HTTP/2 (`HTTP2Connection+Admission`, which says
/// why): every stream may hold an upstream connection of its own, so streams count in the
/// client-connection budget. The connection's own unit runs one stream; every stream beyond it
/// runs on a unit of its own, taken when it starts and given back when it ends.
///
/// With the budget spent a new stream **waits**: its request bytes are held (QUIC's stream window
/// bounds them; nothing is credited back while it waits), and it starts when a unit comes free:
/// at once when one of its connection's own streams ends, else at the next look (every
/// `Acceptor.pauseAtBudget`). A stream that waits longer than `timeouts.client_header` is
/// rejected with H3_REQUEST_REJECTED (RFC 9114 §8.1: nothing of it was processed; the client may
/// retry). Rejecting at once, as this did first, fails requests of the many clients that do not
/// retry.
extension HTTP3Connection {
    /// A stream opened: it starts now if a unit is free and none of its connection's streams
    /// waits before it, else it waits.
    func admit(_ stream: HTTP3Stream) {
        guard admission.admit(stream, now: loop.now, budget: listener.budget, started: started) else { return }
        scheduleAdmitRetry()
        listener.engineMetrics.http3.waitedForBudget.increment()
        let budget = listener.budget
        listener.throttle.log(.warn, "HTTP/3 stream waits: connection limit reached", key: "h3 budget wait", fields: [
            ("listener", listener.spec.name), ("peer", peer.text), ("open", "\(budget.current)"), ("limit", "\(budget.limit)"),
            ("setting", "limits.max_connections (and the descriptor limit: LimitNOFILE, ulimit -n)"),
        ], on: loop)
    }

    /// A waiting stream got its unit: its head (and any DATA) arrived while it waited, so it runs
    /// with the next batch.
    private func started(_ stream: HTTP3Stream) {
        if stream.exchange.input.readable > 0 { markPending(stream) }
    }

    /// A stream ended (normally, reset, or with its connection): its unit goes back, to the next
    /// waiting stream first.
    func streamEnded(_ stream: HTTP3Stream) {
        admission.ended(stream)
        guard !admission.waiting.isEmpty, !closed else { return }
        admission.startWaiting(budget: listener.budget, started: started)
    }

    private func scheduleAdmitRetry() {
        guard admitRetry == nil, !closed else { return }
        admitRetry = loop.scheduleTimer(after: Acceptor.pauseAtBudget) { [weak self] in
            guard let self else { return }
            self.admitRetry = nil
            guard !self.closed, self.closingUntil == 0 else { return }
            // Streams that waited longer than timeouts.client_header are rejected: the client may
            // retry them, on this connection or another.
            self.admission.takeWaiters(waitingAtLeast: self.listener.config.timeouts.clientHeader, now: self.loop.now) { stream in
                stream.refused = true
                self.listener.engineMetrics.http3.refusedAtBudget.increment()
                // `received` resets a refused stream with H3_REQUEST_REJECTED and ends its exchange.
                stream.received()
            }
            self.admission.startWaiting(budget: self.listener.budget, started: self.started)
            if !self.admission.waiting.isEmpty { self.scheduleAdmitRetry() }
            self.runStreams()
            self.write()
        }
    }
}
