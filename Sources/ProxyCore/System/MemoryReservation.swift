import Synchronization

/// Memory that work in flight on any loop may hold, under a limit: each piece reserves what it
/// will hold before it starts, and gives it back when done. Atomic: no loop waits for another.
/// (`BufferingBudget`: bodies read ahead; `CompressionBudget`: encoders' state.)
final class MemoryReservation: Sendable {
    private let reserved = Atomic<Int>(0)
    /// Replaced on reload (what was reserved under the old limit goes back as usual).
    private let limit = Atomic<Int>(0)

    init(limit: Int = 0) { self.limit.store(limit, ordering: .relaxed) }

    func setLimit(_ bytes: Int) { limit.store(bytes, ordering: .relaxed) }

    /// Reserves `bytes` if they fit under the limit.
    func reserve(_ bytes: Int) -> Bool {
        var current = reserved.load(ordering: .relaxed)
        while current + bytes <= limit.load(ordering: .relaxed) {
            let r = reserved.compareExchange(expected: current, desired: current + bytes, ordering: .relaxed)
            if r.exchanged { return true }
            current = r.original
        }
        return false
    }

    func release(_ bytes: Int) { reserved.wrappingSubtract(bytes, ordering: .relaxed) }

    var current: Int { reserved.load(ordering: .relaxed) }
}
