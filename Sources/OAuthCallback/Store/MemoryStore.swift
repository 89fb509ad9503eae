import ProxyCore
import Synchronization

/// The embedded store for a single instance: a dictionary behind one lock, shared by all
/// loops.
///
/// **Memory is bounded.** Every entry has a TTL, and the store holds at most
/// `limits.maxEntries` entries and `limits.maxBytes` bytes (key + value + a fixed per-entry
/// overhead). The eviction rule:
/// 1. an entry is dead from its deadline on: reads treat it as absent and drop it;
/// 2. every operation also removes up to `sweepBudget` dead entries, earliest deadline first
///    (a min-heap of deadlines), so dead entries are reclaimed even if never read again, and
///    no single call pays for a large backlog;
/// 3. a write that would cross a bound first removes *all* dead entries;
/// 4. if it still does not fit, the write **fails** with `capacityExceeded`. A live entry is
///    never evicted: dropping a replay-guard key would let a code be redeemed twice, dropping
///    a relay code or session would break a sign-in in progress. Failing closed turns a flood
///    into refused sign-ins (which callers report as retryable) instead of a security hole.
///
/// TTLs run on an injectable monotonic clock (nanoseconds), so tests move time by hand.
public final class MemoryStore: Store {
    public struct Limits: Sendable, Equatable {
        /// Default 1,000,000 entries; with the default `maxBytes` the bytes bind first.
        public var maxEntries = 1_000_000
        /// Default 128 MiB (`store_max_memory`), counted as key + value + `entryOverhead` per
        /// entry, which is close to what the process really spends: ~530,000 replay-guard
        /// entries, so ~880 callbacks/s sustained over the default 10-minute replay window.
        /// Sized so a sidecar with a 256 MiB memory limit is refused callbacks (503) rather
        /// than killed for memory when a load test fills the store.
        public var maxBytes = 128 * 1024 * 1024
        /// Default 512 bytes: keys are namespaced hashes or ids, never payloads.
        public var maxKeyBytes = 512
        /// Default 30 days (long-lived sessions); a longer TTL is a bug.
        public var maxTTLSeconds: Int64 = 30 * 24 * 3_600

        public init() {}

        public init(maxEntries: Int, maxBytes: Int) {
            self.maxEntries = maxEntries
            self.maxBytes = maxBytes
        }
    }

    /// One entry's bookkeeping beyond its key and value bytes: dictionary slot, expiry-heap
    /// item, the key's and the value's heap blocks with their headers and malloc rounding.
    /// Measured once by hand (2026-11-30): 300,000 replay-guard entries (71-byte key, 1-byte
    /// value) in a `Table` raised the RSS by 254 bytes each, so 71 + 1 + 180 ≈ what is really
    /// spent and `maxBytes` bounds real memory, not two thirds of it. bench/callbacks reports
    /// the proxy's RSS growth per callback on every run (≈ 320 bytes, everything included).
    public static let entryOverhead = 180
    /// Dead entries removed per operation, at most (rule 2).
    static let sweepBudget = 16

    public let limits: Limits
    private let clock: @Sendable () -> UInt64
    private let table: Mutex<Table>

    /// - Parameter clock: monotonic nanoseconds; defaults to the system's monotonic clock.
    public init(limits: Limits = Limits(), clock: @escaping @Sendable () -> UInt64 = { EventLoop.monotonicNow() }) {
        self.limits = limits
        self.clock = clock
        self.table = Mutex(Table(limits: limits))
    }

    /// Live and not yet swept entries (for metrics).
    public var entryCount: Int { table.withLock { $0.entries.count } }
    /// Bytes accounted to stored entries (for metrics).
    public var byteCount: Int { table.withLock { $0.bytes } }

    public func setIfAbsent(key: String, value: [UInt8], ttlSeconds: Int64, on loop: EventLoop,
                            _ completion: @escaping (Result<Bool, StoreError>) -> Void) {
        let now = clock()
        let result = table.withLock { $0.setIfAbsent(key: key, value: value, ttlSeconds: ttlSeconds, now: now) }
        post(result, on: loop, completion)
    }

    public func getAndDelete(key: String, on loop: EventLoop,
                             _ completion: @escaping (Result<[UInt8]?, StoreError>) -> Void) {
        let now = clock()
        let result = table.withLock { $0.getAndDelete(key: key, now: now) }
        post(result, on: loop, completion)
    }

    public func get(key: String, on loop: EventLoop,
                    _ completion: @escaping (Result<[UInt8]?, StoreError>) -> Void) {
        let now = clock()
        let result = table.withLock { $0.get(key: key, now: now) }
        post(result, on: loop, completion)
    }

    public func set(key: String, value: [UInt8], ttlSeconds: Int64, on loop: EventLoop,
                    _ completion: @escaping (Result<Void, StoreError>) -> Void) {
        let now = clock()
        let result = table.withLock { $0.set(key: key, value: value, ttlSeconds: ttlSeconds, now: now) }
        post(result, on: loop, completion)
    }

    public func replace(key: String, value: [UInt8], ttlSeconds: Int64, ifHolding expected: [UInt8]?, on loop: EventLoop,
                        _ completion: @escaping (Result<Bool, StoreError>) -> Void) {
        let now = clock()
        let result = table.withLock { $0.replace(key: key, value: value, ttlSeconds: ttlSeconds, ifHolding: expected, now: now) }
        post(result, on: loop, completion)
    }

    public func delete(key: String, on loop: EventLoop,
                       _ completion: @escaping (Result<Bool, StoreError>) -> Void) {
        let now = clock()
        let result = table.withLock { $0.delete(key: key, now: now) }
        post(result, on: loop, completion)
    }

    /// Posted even though the answer is ready, so completions never run inside the call (the
    /// `Store` contract, which a network store satisfies naturally).
    private func post<T: Sendable>(_ result: T, on loop: EventLoop, _ completion: @escaping (T) -> Void) {
        // The caller is on `loop` (the Store contract) and the completion runs there too: the
        // closure never actually crosses threads, it only waits in the loop's queue.
        nonisolated(unsafe) let completion = completion
        loop.execute { completion(result) }
    }
}

extension MemoryStore {
    /// The store's state and rules, free of locks and clocks (`now` is passed in).
    struct Table {
        struct Entry {
            var value: [UInt8]
            var deadline: UInt64
            var generation: UInt64
            var cost: Int
        }

        let limits: Limits
        private(set) var entries: [String: Entry] = [:]
        private(set) var bytes = 0
        private var expiries = ExpiryHeap()
        private var generation: UInt64 = 0

        init(limits: Limits) {
            self.limits = limits
        }

        var heapCount: Int { expiries.count }

        mutating func setIfAbsent(key: String, value: [UInt8], ttlSeconds: Int64, now: UInt64) -> Result<Bool, StoreError> {
            if let error = validate(key: key, ttlSeconds: ttlSeconds) { return .failure(error) }
            sweep(now: now, budget: MemoryStore.sweepBudget)
            if liveEntry(key, now: now) != nil { return .success(false) }
            return store(key: key, value: value, ttlSeconds: ttlSeconds, now: now, replacing: nil).map { true }
        }

        mutating func set(key: String, value: [UInt8], ttlSeconds: Int64, now: UInt64) -> Result<Void, StoreError> {
            if let error = validate(key: key, ttlSeconds: ttlSeconds) { return .failure(error) }
            sweep(now: now, budget: MemoryStore.sweepBudget)
            let existing = liveEntry(key, now: now)
            return store(key: key, value: value, ttlSeconds: ttlSeconds, now: now, replacing: existing)
        }

        mutating func replace(key: String, value: [UInt8], ttlSeconds: Int64, ifHolding expected: [UInt8]?,
                              now: UInt64) -> Result<Bool, StoreError> {
            if let error = validate(key: key, ttlSeconds: ttlSeconds) { return .failure(error) }
            sweep(now: now, budget: MemoryStore.sweepBudget)
            guard let existing = liveEntry(key, now: now), expected.map({ $0 == existing.value }) ?? true else {
                return .success(false)
            }
            return store(key: key, value: value, ttlSeconds: ttlSeconds, now: now, replacing: existing).map { true }
        }

        mutating func get(key: String, now: UInt64) -> Result<[UInt8]?, StoreError> {
            if let error = validate(key: key, ttlSeconds: 1) { return .failure(error) }
            sweep(now: now, budget: MemoryStore.sweepBudget)
            return .success(liveEntry(key, now: now)?.value)
        }

        mutating func getAndDelete(key: String, now: UInt64) -> Result<[UInt8]?, StoreError> {
            if let error = validate(key: key, ttlSeconds: 1) { return .failure(error) }
            sweep(now: now, budget: MemoryStore.sweepBudget)
            guard let entry = liveEntry(key, now: now) else { return .success(nil) }
            remove(key, entry)
            return .success(entry.value)
        }

        mutating func delete(key: String, now: UInt64) -> Result<Bool, StoreError> {
            if let error = validate(key: key, ttlSeconds: 1) { return .failure(error) }
            sweep(now: now, budget: MemoryStore.sweepBudget)
            guard let entry = liveEntry(key, now: now) else { return .success(false) }
            remove(key, entry)
            return .success(true)
        }

        /// Removes up to `budget` dead entries, earliest deadline first. Heap items of entries
        /// that were replaced or deleted since are skipped (and count against the budget).
        mutating func sweep(now: UInt64, budget: Int) {
            var remaining = budget
            while remaining > 0, let first = expiries.first, first.deadline <= now {
                expiries.removeFirst()
                remaining -= 1
                if let entry = entries[first.key], entry.generation == first.generation {
                    remove(first.key, entry)
                }
            }
        }

        private func validate(key: String, ttlSeconds: Int64) -> StoreError? {
            let length = key.utf8.count
            guard length > 0, length <= limits.maxKeyBytes else {
                return StoreError(.invalidArgument, "key length \(length) outside 1...\(limits.maxKeyBytes)")
            }
            guard ttlSeconds >= 1, ttlSeconds <= limits.maxTTLSeconds else {
                return StoreError(.invalidArgument, "ttl \(ttlSeconds) s outside 1...\(limits.maxTTLSeconds)")
            }
            return nil
        }

        /// The entry if it is still alive; a dead one is dropped on sight (rule 1).
        private mutating func liveEntry(_ key: String, now: UInt64) -> Entry? {
            guard let entry = entries[key] else { return nil }
            if entry.deadline <= now {
                remove(key, entry)
                return nil
            }
            return entry
        }

        private mutating func store(key: String, value: [UInt8], ttlSeconds: Int64, now: UInt64,
                                    replacing existing: Entry?) -> Result<Void, StoreError> {
            let cost = key.utf8.count + value.count + MemoryStore.entryOverhead
            func fits() -> Bool {
                let count = entries.count + (existing == nil ? 1 : 0)
                return count <= limits.maxEntries && bytes - (existing?.cost ?? 0) + cost <= limits.maxBytes
            }
            if !fits() {
                sweep(now: now, budget: .max)   // rule 3
                guard fits() else {             // rule 4
                    return .failure(StoreError(.capacityExceeded,
                        "memory store full: \(entries.count) live entries, \(bytes) bytes "
                        + "(limits \(limits.maxEntries) entries, \(limits.maxBytes) bytes)"))
                }
            }
            let (sum, overflow) = now.addingReportingOverflow(UInt64(ttlSeconds) * 1_000_000_000)
            let deadline = overflow ? UInt64.max : sum
            generation &+= 1
            entries[key] = Entry(value: value, deadline: deadline, generation: generation, cost: cost)
            bytes += cost - (existing?.cost ?? 0)
            expiries.insert(ExpiryHeap.Item(deadline: deadline, generation: generation, key: key))
            compactIfNeeded()
            return .success(())
        }

        private mutating func remove(_ key: String, _ entry: Entry) {
            entries.removeValue(forKey: key)
            bytes -= entry.cost
        }

        /// Replaced and deleted entries leave stale heap items behind; rebuilding once they
        /// outnumber the live ones keeps the heap within a constant factor of the table.
        private mutating func compactIfNeeded() {
            guard expiries.count > 2 * entries.count + 1_024 else { return }
            expiries = ExpiryHeap(entries.map { ExpiryHeap.Item(deadline: $0.value.deadline,
                                                                generation: $0.value.generation, key: $0.key) })
        }
    }

    /// A binary min-heap of entry deadlines.
    struct ExpiryHeap {
        struct Item {
            var deadline: UInt64
            var generation: UInt64
            var key: String
        }

        private var items: [Item] = []

        init() {}

        init(_ items: [Item]) {
            self.items = items
            var i = items.count / 2
            while i > 0 {
                i -= 1
                siftDown(i)
            }
        }

        var count: Int { items.count }
        var first: Item? { items.first }

        mutating func insert(_ item: Item) {
            items.append(item)
            var child = items.count - 1
            while child > 0 {
                let parent = (child - 1) / 2
                guard items[child].deadline < items[parent].deadline else { break }
                items.swapAt(child, parent)
                child = parent
            }
        }

        mutating func removeFirst() {
            guard !items.isEmpty else { return }
            items.swapAt(0, items.count - 1)
            items.removeLast()
            siftDown(0)
        }

        private mutating func siftDown(_ start: Int) {
            var parent = start
            while true {
                let left = 2 * parent + 1
                guard left < items.count else { return }
                var smallest = left
                if left + 1 < items.count, items[left + 1].deadline < items[left].deadline { smallest = left + 1 }
                guard items[smallest].deadline < items[parent].deadline else { return }
                items.swapAt(parent, smallest)
                parent = smallest
            }
        }
    }
}
