/// Response bytes handed to nghttp3 and not yet acknowledged by the client, oldest first.
/// nghttp3 keeps pointers into them and may send them again until the client's ACK (RFC 9000
/// §13.3), so they cannot stay in the exchange's output, which is reused as soon as it is read;
/// each piece is copied into a chunk of its own, freed when the acknowledgements pass its end.
/// `limit` bounds what one stream holds whatever the client's pace.
struct UnackedBytes {
    static let limit = 512 * 1024

    private var chunks: [UnsafeMutableRawBufferPointer] = []
    /// Index of the oldest chunk still held.
    private var first = 0
    /// Bytes of `chunks[first]` already acknowledged.
    private var ackedInFirst = 0
    /// Bytes held, not yet acknowledged.
    private(set) var count = 0

    /// What may still be taken before the limit.
    var room: Int { Self.limit - count }

    /// Copies `bytes` into a new chunk, held until acknowledged; the chunk nghttp3 is to send.
    mutating func keep(copying bytes: UnsafeRawBufferPointer) -> UnsafeMutableRawBufferPointer {
        let chunk = UnsafeMutableRawBufferPointer.allocate(byteCount: bytes.count, alignment: 1)
        chunk.copyMemory(from: bytes)
        chunks.append(chunk)
        count += bytes.count
        return chunk
    }

    /// The client acknowledged the next `n` bytes (nghttp3 reports them in order): the chunks they
    /// cover are freed.
    mutating func acknowledge(_ n: Int) {
        var left = min(n, count)
        count -= left
        while left > 0 && first < chunks.count {
            let remaining = chunks[first].count - ackedInFirst
            if left < remaining {
                ackedInFirst += left
                break
            }
            left -= remaining
            chunks[first].deallocate()
            first += 1
            ackedInFirst = 0
        }
        if first == chunks.count {
            chunks.removeAll(keepingCapacity: true)
            first = 0
        } else if first > 32 {
            chunks.removeFirst(first)
            first = 0
        }
    }

    /// Frees every chunk (the stream is gone).
    mutating func release() {
        for chunk in chunks[first...] { chunk.deallocate() }
        chunks.removeAll()
        first = 0
        ackedInFirst = 0
        count = 0
    }

    /// Chunks held (for tests).
    var chunksHeld: Int { chunks.count - first }
}
