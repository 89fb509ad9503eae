import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A fixed table of two-word atomic slots, `(key, value)`, shared by every loop: the storage
/// under the per-client limits (`RateBuckets`, `ConnectionCounts`). A slot changes with one
/// double-word compare-and-swap (`cmpxchg16b`), so a key and its value never tear and no loop
/// ever waits for another. Key 0 is an empty slot.
///
/// Open addressing with a short linear probe: a client whose window is full of live entries
/// is not tracked (and so not limited) rather than evicting an address that is being limited.
/// The window is `probe` slots: with a table sized for the traffic it is rarely full; keys are
/// hashed with the process's random seed (`ClientKey`), so nobody can aim addresses at one
/// window from outside.
final class AtomicSlots: @unchecked Sendable {
    let count: Int
    let mask: Int
    static let probe = 16
    private let slots: UnsafeMutablePointer<Atomic<WordPair>>

    /// `capacity` is rounded up to a power of two. The memory comes from `calloc`: pages the
    /// kernel hands out zeroed (all slots empty) and only makes resident once touched, so a
    /// table sized for a million clients costs what its live entries do. An all-zero
    /// `Atomic<WordPair>` is the value `(0, 0)`: `Atomic` is its value's bytes, nothing more.
    init(capacity: Int) {
        var n = 1024
        while n < capacity && n < 1 << 24 { n <<= 1 }
        count = n
        mask = n - 1
        let raw = calloc(n, MemoryLayout<Atomic<WordPair>>.stride)!
        slots = raw.bindMemory(to: Atomic<WordPair>.self, capacity: n)
    }

    deinit { free(slots) }

    /// The slots a key may live in, in probe order.
    @inline(__always) func index(_ key: ClientKey, _ step: Int) -> Int { (Int(bitPattern: key.hash) &+ step) & mask }

    enum Lookup {
        /// The key's slot, and what it held when looked at.
        case found(Int, WordPair)
        /// Not there; the first slot of its window it may take (empty, or `isFree`), and what
        /// that held (the compare-and-swap that claims it must expect exactly that).
        case free(Int, WordPair)
        /// Not there, and no room in its window.
        case full
    }

    /// Looks through `key`'s window for its slot, else for one it may take.
    @inline(__always) func lookup(_ key: ClientKey, isFree: (WordPair) -> Bool) -> Lookup {
        var free = Lookup.full
        for step in 0..<Self.probe {
            let i = index(key, step)
            let held = load(i)
            if held.first == key.hash { return .found(i, held) }
            if case .full = free, held.first == 0 || isFree(held) { free = .free(i, held) }
        }
        return free
    }

    @inline(__always) func load(_ i: Int) -> WordPair { slots[i].load(ordering: .acquiring) }

    /// Replaces `expected` with `desired` if the slot still holds it; else returns what it holds.
    @inline(__always) func exchange(_ i: Int, _ expected: WordPair, _ desired: WordPair) -> (exchanged: Bool, original: WordPair) {
        slots[i].compareExchange(expected: expected, desired: desired, ordering: .acquiringAndReleasing)
    }
}
