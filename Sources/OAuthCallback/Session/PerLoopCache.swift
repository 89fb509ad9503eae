import ProxyCore

/// Values worth keeping per event loop, by a string key: the cookie sessions already opened
/// (`SessionLayer.opened`) and the assertions already signed (`JWTAssertions`). Each loop
/// touches only its own table, on its own thread: no lock. A full table is emptied — cheaper
/// than tracking use, and refilled at one miss per active user.
final class PerLoopCache<Value>: @unchecked Sendable {
    private let capacity: Int

    private final class Table {
        var entries: [String: Value] = [:]
    }

    /// One table per possible loop (`loops` is at most 256), made up front so that no loop
    /// ever writes to the array itself.
    private let tables: [Table] = (0..<256).map { _ in Table() }

    init(capacity: Int) {
        self.capacity = capacity
    }

    /// The value kept for `key` while `isFresh` accepts it; otherwise the one `make` gives,
    /// kept unless it is nil (what does not make is never kept, so junk cannot push real
    /// entries out). Call on `loop`'s thread.
    @inline(__always)
    func value(for key: String, on loop: EventLoop, isFresh: (Value) -> Bool, make: () -> Value?) -> Value? {
        let table = tables[loop.index & 255]
        if let kept = table.entries[key] {
            if isFresh(kept) { return kept }
            table.entries[key] = nil
        }
        guard let made = make() else { return nil }
        if table.entries.count >= capacity { table.entries.removeAll(keepingCapacity: true) }
        table.entries[key] = made
        return made
    }

    /// Entries held for `loop` (tests).
    func count(on loop: EventLoop) -> Int { tables[loop.index & 255].entries.count }
}
