/// A binary min-heap of one-shot timers keyed by monotonic deadline, served to the
/// millisecond (the loop's `epoll_wait` timeout is the next deadline's). Used for loop-wide
/// timers (drain limits, periodic jobs, libcurl's) and `LoopSource`s' timers; client and
/// upstream connections' timeouts use the deadline sweep instead (one comparison per
/// connection ten times a second is cheaper than a heap entry per read).
struct TimerHeap {
    private var items: [(deadline: UInt64, seq: UInt64, handle: TimerHandle?, task: () -> Void)] = []
    private var seq: UInt64 = 0

    var count: Int { items.count }

    var nextDeadline: UInt64? { items.first?.deadline }

    mutating func push(deadline: UInt64, handle: TimerHandle? = nil, _ task: @escaping () -> Void) {
        seq += 1
        items.append((deadline, seq, handle, task))
        var i = items.count - 1
        while i > 0 {
            let parent = (i - 1) / 2
            if less(i, parent) { items.swapAt(i, parent); i = parent } else { break }
        }
    }

    mutating func popExpired(now: UInt64) -> (() -> Void)? {
        guard let first = items.first, first.deadline <= now else { return nil }
        let last = items.removeLast()
        if !items.isEmpty {
            items[0] = last
            siftDown(0)
        }
        return first.task
    }

    /// Drops cancelled timers. Callers that re-arm often (libcurl resets its timeout on
    /// nearly every call) would otherwise leave thousands of dead entries until their deadlines.
    mutating func removeCancelled() {
        items.removeAll { $0.handle?.cancelled == true }
        // Re-establish the heap property bottom-up.
        var i = items.count / 2 - 1
        while i >= 0 {
            siftDown(i)
            i -= 1
        }
    }

    private mutating func siftDown(_ start: Int) {
        var i = start
        while true {
            let l = 2 * i + 1, r = l + 1
            var m = i
            if l < items.count && less(l, m) { m = l }
            if r < items.count && less(r, m) { m = r }
            if m == i { return }
            items.swapAt(i, m)
            i = m
        }
    }

    private func less(_ a: Int, _ b: Int) -> Bool {
        items[a].deadline < items[b].deadline || (items[a].deadline == items[b].deadline && items[a].seq < items[b].seq)
    }
}
