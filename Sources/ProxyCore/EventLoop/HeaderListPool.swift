/// A loop's spare header-field lists (`RequestHead.headers`, `ResponseHead.headers`), kept like
/// `BufferPool` keeps buffers: an idle keep-alive connection holds none (its request list had
/// room for 16 fields, 544 bytes, and its response list another few hundred — most of what an
/// idle connection cost beyond its own record), and a request takes one back instead of
/// allocating. Moving an array in or out is a reference move: no copy, no allocation.
/// Loop-confined: no locks.
final class HeaderListPool {
    /// Lists kept for reuse; beyond this they go back to the allocator.
    let limit: Int
    private var free: [[HeaderField]] = []

    init(limit: Int = 256) {
        self.limit = limit
    }

    /// A list with room (from the pool), or an empty one that allocates when first appended to.
    @inline(__always)
    func take() -> [HeaderField] {
        free.popLast() ?? []
    }

    /// Takes `list`'s storage into the pool and leaves `list` empty (without storage).
    @inline(__always)
    func recycle(_ list: inout [HeaderField]) {
        guard list.capacity > 0 else { return }
        if free.count < limit {
            list.removeAll(keepingCapacity: true)
            free.append(list)
        }
        list = []
    }
}
