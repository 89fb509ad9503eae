/// The pipes spliced bodies may hold, for the whole process (`splice.max_pipes`), and what
/// the operator sees of them. A pipe is reserved before it is made and released when it is
/// closed; pipes waiting in a loop's `PipePool` stay reserved. Atomic: no loop waits for another.
final class SpliceBudget: Sendable {
    /// Counted in pipes, not bytes: the same compare-and-swap under a limit.
    private let open = MemoryReservation(limit: SpliceSettings().maxPipes)
    private let spliced: Counter
    private let noPipe: Counter
    private let requestSpliced: Counter
    private let requestNoPipe: Counter

    init(metrics: MetricsRegistry) {
        let family = metrics.counter("callback_proxy_spliced_responses_total",
                                     "Response bodies eligible for splice(2): moved through a pipe, or copied because no pipe was free (splice.max_pipes, or the connection budget).",
                                     labels: ["outcome"])
        spliced = family.labels("spliced")
        noPipe = family.labels("no_pipe")
        let requests = metrics.counter("callback_proxy_spliced_requests_total",
                                       "Request bodies eligible for splice(2): moved through a pipe, or copied because no pipe was free.",
                                       labels: ["outcome"])
        requestSpliced = requests.labels("spliced")
        requestNoPipe = requests.labels("no_pipe")
        metrics.gauge("callback_proxy_splice_pipes", "Pipes open for splice(2), in use or kept for reuse.") { [weak self] in
            Double(self?.current ?? 0)
        }
    }

    func setLimit(_ pipes: Int) { open.setLimit(pipes) }

    /// Takes one pipe's place if the limit allows.
    func reserve() -> Bool { open.reserve(1) }

    func release() { open.release(1) }

    var current: Int { open.current }

    func counted(spliced ok: Bool, _ direction: BodySplice.Direction) {
        switch direction {
        case .response: (ok ? spliced : noPipe).increment()
        case .request: (ok ? requestSpliced : requestNoPipe).increment()
        }
    }
}
