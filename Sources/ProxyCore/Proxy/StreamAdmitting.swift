/// **Streams and the descriptor budget**, for a multiplexed connection (HTTP/2's, HTTP/3's).
/// Every stream may hold an upstream connection of its own, so streams count in the
/// client-connection budget (`ConnectionBudget`) as HTTP/1.1 connections do: the connection's own
/// unit runs one stream, and every stream beyond it runs on a unit of its own, taken when it
/// starts and given back when it ends (`StreamAdmission`). Without this, 128 streams on each of a
/// few connections could open sockets past the descriptor limit, and the upstream `socket()` of
/// every request would fail with EMFILE (502), as it did for HTTP/1.1 before the budget existed.
///
/// With the budget spent (a flood, or a descriptor limit small for the load) a new stream
/// **waits**, as a new HTTP/1.1 connection waits in the kernel's backlog: its request bytes are
/// held (the stream's flow-control window bounds them; nothing is credited back while it waits),
/// and it starts when a unit comes free — at once when one of its connection's own streams ends,
/// else at the next look (every `Acceptor.pauseAtBudget`, as a paused listener looks). A stream
/// that waits longer than `timeouts.client_header` is refused in the way its protocol says nothing
/// of it was processed and the client may retry (HTTP/2's `RST_STREAM REFUSED_STREAM`, RFC 9113
/// §8.7; HTTP/3's H3_REQUEST_REJECTED, RFC 9114 §8.1). Refusing at once was tried first: h2load
/// (8 × 128 streams at `ulimit -n 1024`) then saw 3,360 of 4,096 requests fail, since many
/// clients do not retry; the build before the budget counted streams served 3,693 and 502'd the
/// rest.
///
/// The connection brings what differs (`HTTP2Connection+Admission`, `HTTP3Connection+Admission`):
/// its metrics and name, how a refusal is sent, what runs once a stream starts.
protocol StreamAdmitting: AnyObject {
    associatedtype AdmittedStream: BudgetedStream
    var admission: StreamAdmission<AdmittedStream> { get set }
    /// The next look for a free unit while streams wait.
    var admitRetry: TimerHandle? { get set }
    var loop: EventLoop { get }
    var listener: ListenerContext { get }
    var peer: PeerAddress { get }
    /// Streams may still start: the connection is neither closed nor closing.
    var admitsStreams: Bool { get }
    /// Its protocol's counters and name, for the metrics and the log line.
    var admissionReport: StreamAdmissionReport { get }
    /// A waiting stream got its unit: its head (and any DATA) arrived while it waited, so it runs
    /// with the next batch.
    func started(_ stream: AdmittedStream)
    /// A stream waited longer than `timeouts.client_header`: it is refused (and counted).
    func refuse(_ stream: AdmittedStream)
    /// After a look that may have started or refused streams: they run, and what they wrote goes.
    func admissionLooked()
}

/// What a connection's admission counts and logs under.
struct StreamAdmissionReport {
    /// "HTTP/2", "HTTP/3".
    let protocolName: String
    /// The log line's throttle key.
    let key: String
    let waited: Counter
}

extension StreamAdmitting {
    /// A stream opened: it starts now if a unit is free and none of its connection's streams
    /// waits before it, else it waits.
    func admit(_ stream: AdmittedStream) {
        guard admission.admit(stream, now: loop.now, budget: listener.budget, started: { self.started($0) }) else { return }
        scheduleAdmitRetry()
        let report = admissionReport
        report.waited.increment()
        let budget = listener.budget
        listener.throttle.log(.warn, "\(report.protocolName) stream waits: connection limit reached", key: report.key, fields: [
            ("listener", listener.spec.name), ("peer", peer.text), ("open", "\(budget.current)"), ("limit", "\(budget.limit)"),
            ("setting", "limits.max_connections (and the descriptor limit: LimitNOFILE, ulimit -n)"),
        ], on: loop)
    }

    /// A stream ended (normally, reset, or with its connection): its unit goes back, to the next
    /// waiting stream first.
    func streamEnded(_ stream: AdmittedStream) {
        admission.ended(stream)
        guard !admission.waiting.isEmpty, admitsStreams else { return }
        admission.startWaiting(budget: listener.budget, started: { self.started($0) })
    }

    private func scheduleAdmitRetry() {
        guard admitRetry == nil, admitsStreams else { return }
        admitRetry = loop.scheduleTimer(after: Acceptor.pauseAtBudget) { [weak self] in
            guard let self else { return }
            self.admitRetry = nil
            guard self.admitsStreams else { return }
            // Streams that waited longer than timeouts.client_header are refused: the client may
            // retry them, on this connection or another.
            self.admission.takeWaiters(waitingAtLeast: self.listener.config.timeouts.clientHeader, now: self.loop.now) {
                self.refuse($0)
            }
            self.admission.startWaiting(budget: self.listener.budget, started: { self.started($0) })
            if !self.admission.waiting.isEmpty { self.scheduleAdmitRetry() }
            self.admissionLooked()
        }
    }
}
