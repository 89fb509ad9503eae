/// The memory responses read ahead may hold, for the whole process (`buffering.max_memory`):
/// a response reserves what it may read ahead before it starts, and gives it back when its
/// client has taken everything (or left). Reservations are atomic: no loop waits for another.
final class BufferingBudget: Sendable {
    private let memory = MemoryReservation()
    private let buffered: Counter
    private let overBudget: Counter

    init(metrics: MetricsRegistry) {
        let family = metrics.counter("callback_proxy_buffered_responses_total",
                                     "Bodies read ahead (buffering.responses, buffering.requests), and those that streamed because buffering.max_memory was taken.",
                                     labels: ["outcome"])
        buffered = family.labels("buffered")
        overBudget = family.labels("over_budget")
        metrics.gauge("callback_proxy_buffering_bytes", "Bytes reserved by bodies being read ahead.") { [weak self] in
            Double(self?.current ?? 0)
        }
    }

    func setLimit(_ bytes: Int) { memory.setLimit(bytes) }

    /// Reserves `bytes` if they fit under the limit.
    func reserve(_ bytes: Int) -> Bool {
        guard memory.reserve(bytes) else {
            overBudget.increment()
            return false
        }
        buffered.increment()
        return true
    }

    func release(_ bytes: Int) { memory.release(bytes) }

    var current: Int { memory.current }
}
