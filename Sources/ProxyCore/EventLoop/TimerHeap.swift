/// A binary min-heap of one-shot timers keyed by monotonic deadline.
/// Used for the few loop-wide timers (drain limits, periodic jobs); per-connection
/// timeouts use the deadline sweep instead.
struct TimerHeap {
    private var items: [(deadline: UInt64, seq: UInt64, task: () -> Void)] = []
    private var seq: UInt64 = 0

    var nextDeadline: UInt64? { items.first?.deadline }

    mutating func push(deadline: UInt64, _ task: @escaping () -> Void) {
        seq += 1
        items.append((deadline, seq, task))
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
            var i = 0
            while true {
                let l = 2 * i + 1, r = l + 1
                var m = i
                if l < items.count && less(l, m) { m = l }
                if r < items.count && less(r, m) { m = r }
                if m == i { break }
                items.swapAt(i, m)
                i = m
            }
        }
        return first.task
    }

    private func less(_ a: Int, _ b: Int) -> Bool {
        items[a].deadline < items[b].deadline || (items[a].deadline == items[b].deadline && items[a].seq < items[b].seq)
    }
}
