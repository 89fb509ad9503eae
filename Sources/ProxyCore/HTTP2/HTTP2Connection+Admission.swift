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
        h2.waitingSince = loop.now
        waiting.append(h2)
        admitWaiting()
        guard h2.waitingSince != 0 else { return }
        listener.engineMetrics.http2.waitedForBudget.increment()
        let budget = listener.budget
        listener.throttle.log(.warn, "HTTP/2 stream waits: connection limit reached", key: "h2 budget wait", fields: [
            ("listener", listener.spec.name), ("peer", peer.text), ("open", "\(budget.current)"), ("limit", "\(budget.limit)"),
            ("setting", "limits.max_connections (and the descriptor limit: LimitNOFILE, ulimit -n)"),
        ], on: loop)
    }

    /// Starts waiting streams, oldest first, while units are free.
    func admitWaiting() {
        let budget = listener.budget
        while let h2 = waiting.first {
            if !connectionUnitInUse {
                connectionUnitInUse = true
                h2.holdsConnectionUnit = true
            } else if budget.hasRoom {
                budget.opened()
                h2.budgetUnit = budget
            } else {
                break
            }
            waiting.removeFirst()
            h2.waitingSince = 0
            // Its head (and any DATA) arrived while it waited: it runs with the next batch.
            if h2.exchange.input.readable > 0 { markPending(h2) }
        }
        if !waiting.isEmpty { scheduleAdmitRetry() }
    }

    /// A stream ended (normally, reset, or with its connection): its unit goes back, to the
    /// next waiting stream first.
    func streamEnded(_ h2: HTTP2Stream) {
        if h2.waitingSince != 0 {
            h2.waitingSince = 0
            waiting.removeAll { $0 === h2 }
        }
        if h2.holdsConnectionUnit {
            h2.holdsConnectionUnit = false
            connectionUnitInUse = false
        }
        if let unit = h2.budgetUnit {
            unit.closed()
            h2.budgetUnit = nil
        }
        if !waiting.isEmpty && !closed { admitWaiting() }
    }

    private func scheduleAdmitRetry() {
        guard admitRetry == nil, !closed else { return }
        admitRetry = loop.scheduleTimer(after: Acceptor.pauseAtBudget) { [weak self] in
            guard let self else { return }
            self.admitRetry = nil
            guard !self.closed else { return }
            self.refuseLongWaiters()
            self.admitWaiting()
            self.runStreams()
            self.send()
        }
    }

    /// Streams that waited longer than `timeouts.client_header` are refused: the client may
    /// retry them, on this connection or another.
    private func refuseLongWaiters() {
        let limit = listener.config.timeouts.clientHeader
        let now = loop.now
        while let h2 = waiting.first, now - h2.waitingSince >= limit {
            waiting.removeFirst()
            h2.waitingSince = 0
            h2.refused = true
            resetStream(h2.id, code: NGHTTP2_REFUSED_STREAM)
            listener.engineMetrics.http2.refusedAtBudget.increment()
        }
    }
}
