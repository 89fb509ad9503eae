import CZlib

/// Raw DEFLATE (RFC 1951, no zlib or gzip header: the sealed box already authenticates and
/// frames the bytes) for session cookies that would otherwise need more chunks.
enum RawDeflate {
    /// Negative window bits select a raw stream in zlib; 15 is the largest window.
    private static let windowBits: Int32 = -15

    static func compress(_ input: [UInt8]) -> [UInt8]? {
        var stream = z_stream()
        guard CZlib_deflateInit2(&stream, Z_BEST_COMPRESSION, Z_DEFLATED, windowBits, 8, Z_DEFAULT_STRATEGY) == Z_OK else {
            return nil
        }
        defer { deflateEnd(&stream) }
        var source = input
        var output = [UInt8](repeating: 0, count: Int(deflateBound(&stream, uLong(input.count))))
        let status = source.withUnsafeMutableBufferPointer { src in
            output.withUnsafeMutableBufferPointer { dst in
                stream.next_in = src.baseAddress
                stream.avail_in = uInt(src.count)
                stream.next_out = dst.baseAddress
                stream.avail_out = uInt(dst.count)
                // deflateBound guarantees one Z_FINISH call completes the stream.
                return deflate(&stream, Z_FINISH)
            }
        }
        guard status == Z_STREAM_END else { return nil }
        output.removeLast(Int(stream.avail_out))
        return output
    }

    /// Nil for anything but one complete raw stream with nothing after it, or when the
    /// output would exceed `limit` bytes (a decompression bomb, even an authenticated one,
    /// must not cost memory).
    static func decompress(_ input: [UInt8], limit: Int) -> [UInt8]? {
        var stream = z_stream()
        guard CZlib_inflateInit2(&stream, windowBits) == Z_OK else { return nil }
        defer { inflateEnd(&stream) }
        var source = input
        var output: [UInt8] = []
        var block = [UInt8](repeating: 0, count: 4096)
        return source.withUnsafeMutableBufferPointer { src -> [UInt8]? in
            stream.next_in = src.baseAddress
            stream.avail_in = uInt(src.count)
            while true {
                let (status, produced) = block.withUnsafeMutableBufferPointer { dst -> (Int32, Int) in
                    stream.next_out = dst.baseAddress
                    stream.avail_out = uInt(dst.count)
                    let status = inflate(&stream, Z_NO_FLUSH)
                    return (status, dst.count - Int(stream.avail_out))
                }
                guard status == Z_OK || status == Z_STREAM_END else { return nil }
                guard output.count + produced <= limit else { return nil }
                output.append(contentsOf: block[0..<produced])
                if status == Z_STREAM_END { return stream.avail_in == 0 ? output : nil }
                // No progress and no input left: the stream is truncated.
                if produced == 0, stream.avail_in == 0 { return nil }
            }
        }
    }
}
