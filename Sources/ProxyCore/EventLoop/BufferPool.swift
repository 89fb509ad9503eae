#if canImport(Glibc)
import Glibc
#endif

/// A loop's free list of standard-size buffers. Connections return their buffers when they
/// go idle (an idle keep-alive connection holds none) and take them back for the next
/// request, so the request path does not go through malloc/free and memory stays with the
/// few buffers in use rather than one set per connection. Loop-confined: no locks.
final class BufferPool {
    static let bufferSize = 16 * 1024
    /// Buffers kept for reuse; beyond this they go back to the allocator.
    let limit: Int
    private var free: [UnsafeMutableRawPointer] = []

    init(limit: Int = 512) {
        self.limit = limit
        free.reserveCapacity(limit)
    }

    deinit {
        for p in free { Glibc.free(p) }
    }

    /// A buffer with at least `bufferSize` bytes of capacity.
    @inline(__always)
    func take() -> ByteBuffer {
        if let p = free.popLast() { return ByteBuffer(adopting: p, capacity: BufferPool.bufferSize) }
        return ByteBuffer(capacity: BufferPool.bufferSize)
    }

    /// Gives `buffer`'s memory back (to the pool if it has the standard size) and empties it.
    @inline(__always)
    func recycle(_ buffer: inout ByteBuffer) {
        guard let p = buffer.base else { return }
        if buffer.capacity == BufferPool.bufferSize && free.count < limit {
            free.append(p)
            buffer.forget()
        } else {
            buffer.free()
        }
    }
}
