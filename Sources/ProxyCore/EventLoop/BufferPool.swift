#if canImport(Glibc)
import Glibc
#endif

/// A loop's free list of standard-size buffers. Connections return their buffers when they
/// go idle (an idle keep-alive connection holds none) and take them back for the next
/// request, so the request path does not go through malloc/free and memory stays with the
/// few buffers in use rather than one set per connection. Loop-confined: no locks.
///
/// **The pool shrinks after a burst.** Many requests at once (a thousand connections each
/// sending one request) leave hundreds of buffers in the pool that steady traffic never needs
/// again: 16 MiB across two loops, which the idle-connection benchmark counted as 1.7 KiB per
/// idle connection. `trim()` (every `trimInterval`, from the loop) gives back the buffers that
/// stayed in the pool through the whole interval — the fewest free since the last trim, less a
/// floor of `keep` — so a busy loop keeps what it cycles through and an idle one little.
final class BufferPool {
    static let bufferSize = 16 * 1024
    /// How often the loop trims its pool (nanoseconds).
    static let trimInterval: UInt64 = 5_000_000_000
    /// Buffers kept for reuse; beyond this they go back to the allocator.
    let limit: Int
    /// Buffers a trim leaves in the pool whatever happened (a few requests' worth).
    let keep: Int
    private var free: [UnsafeMutableRawPointer] = []
    /// The fewest buffers the pool held since the last trim: none of those was needed.
    private var lowWater = 0

    init(limit: Int = 512, keep: Int = 16) {
        self.limit = limit
        self.keep = keep
        free.reserveCapacity(limit)
    }

    /// Buffers in the pool now.
    var count: Int { free.count }

    deinit {
        for p in free { Glibc.free(p) }
    }

    /// A buffer with at least `bufferSize` bytes of capacity.
    @inline(__always)
    func take() -> ByteBuffer {
        if let p = free.popLast() {
            if free.count < lowWater { lowWater = free.count }
            return ByteBuffer(adopting: p, capacity: BufferPool.bufferSize)
        }
        lowWater = 0
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

    /// Frees the buffers no request took since the last trim (beyond `keep`); returns how many.
    @discardableResult
    func trim() -> Int {
        let idle = max(0, min(lowWater, free.count - keep))
        for _ in 0..<idle { Glibc.free(free.removeLast()) }
        lowWater = free.count
        return idle
    }
}
