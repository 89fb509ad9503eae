import CBrotli
import CZlib

/// Compresses one response body as it streams: zlib's deflate with the gzip wrapper, or
/// Brotli's streaming encoder. Bytes go in as the upstream's reads deliver them and come out
/// into the client's output; nothing is held back between reads (`.flush` after each), so a
/// response the upstream sends slowly reaches the client as slowly, not at the end.
///
/// Memory: the window is sized to the body when its length is known (nginx does the same), at
/// most 32 KiB for gzip (about 260 KiB of zlib state in all) and 256 KiB for Brotli (whose
/// state at quality 4 is 1.7–2.5 MiB in all, measured with a counting allocator). The state
/// lives as long as the response and goes with it; it is reserved first from
/// `compression.max_memory` (`memory(for:sizeHint:)`, given back in `deinit`), so a crowd of
/// slow readers cannot make the encoders' state grow without bound.
final class BodyEncoder {
    enum Operation {
        /// Take the bytes; output what is ready.
        case process
        /// Take the bytes and output everything they allow a decoder to read now.
        case flush
        /// Take the bytes and end the stream (gzip's trailer, Brotli's last block).
        case finish
    }

    let coding: ContentCoding
    private let zlib: UnsafeMutablePointer<z_stream>?
    private let brotli: OpaquePointer?
    /// What was reserved for this encoder's state, and where (given back in `deinit`).
    private let reserved: (budget: MemoryReservation, bytes: Int)?

    /// The state an encoder for `coding` holds at most, for a body of `sizeHint` bytes: zlib's
    /// own formula (2^(bits+2) + 2^(memLevel+9)) plus its buffers; for Brotli the largest
    /// figure measured at quality 4 for the window chosen.
    static func memory(for coding: ContentCoding, sizeHint: UInt64?) -> Int {
        switch coding {
        case .gzip:
            let bits = windowBits(for: sizeHint, min: 9, max: 15)
            let memLevel = max(1, 8 - (15 - bits))
            return (4 << bits) + (512 << memLevel) + 8 << 10
        case .brotli:
            return windowBits(for: sizeHint, min: 10, max: 18) >= 16 ? 5 << 19 : 2 << 20
        }
    }

    /// nil if the library could not set up (out of memory); `reserved` (the caller's
    /// reservation for this state) is then given back.
    init?(_ coding: ContentCoding, settings: CompressionSettings, sizeHint: UInt64?,
          reserved: (budget: MemoryReservation, bytes: Int)? = nil) {
        self.coding = coding
        self.reserved = reserved
        switch coding {
        case .gzip:
            // Window bits: 15 (32 KiB), or fewer for a body known to be smaller; memLevel
            // shrinks with it (zlib's state is about 2^(bits+2) + 2^(memLevel+9) bytes).
            let bits = Int32(Self.windowBits(for: sizeHint, min: 9, max: 15))
            let memLevel = max(1, 8 - (15 - bits))
            let z = UnsafeMutablePointer<z_stream>.allocate(capacity: 1)
            z.initialize(to: z_stream())
            // + 16: the gzip wrapper (RFC 1952) rather than zlib's own.
            guard CZlib_deflateInit2(z, settings.gzipLevel, Z_DEFLATED, bits + 16, memLevel, Z_DEFAULT_STRATEGY) == Z_OK else {
                z.deallocate()
                reserved?.budget.release(reserved!.bytes)
                return nil
            }
            zlib = z
            brotli = nil
        case .brotli:
            guard let state = BrotliEncoderCreateInstance(nil, nil, nil) else {
                reserved?.budget.release(reserved!.bytes)
                return nil
            }
            BrotliEncoderSetParameter(state, BROTLI_PARAM_QUALITY, settings.brotliQuality)
            BrotliEncoderSetParameter(state, BROTLI_PARAM_LGWIN, UInt32(Self.windowBits(for: sizeHint, min: 10, max: 18)))
            if let size = sizeHint { BrotliEncoderSetParameter(state, BROTLI_PARAM_SIZE_HINT, UInt32(clamping: size)) }
            BrotliEncoderSetParameter(state, BROTLI_PARAM_MODE, BROTLI_MODE_TEXT.rawValue)
            brotli = state
            zlib = nil
        }
    }

    deinit {
        if let zlib {
            deflateEnd(zlib)
            zlib.deallocate()
        }
        if let brotli { BrotliEncoderDestroyInstance(brotli) }
        if let reserved { reserved.budget.release(reserved.bytes) }
    }

    /// The smallest window that holds `size` bytes, within the coding's range.
    static func windowBits(for size: UInt64?, min lower: Int, max upper: Int) -> Int {
        guard let size, size > 0 else { return upper }
        var bits = lower
        while bits < upper && (UInt64(1) << UInt64(bits)) < size { bits += 1 }
        return bits
    }

    /// Compresses all of `input` into `out` (appended). False if the library failed.
    func encode(_ input: UnsafeRawBufferPointer, into out: inout ByteBuffer, _ operation: Operation) -> Bool {
        if let zlib { return deflate(zlib, input, &out, operation) }
        return brotliEncode(brotli!, input, &out, operation)
    }

    private func deflate(_ z: UnsafeMutablePointer<z_stream>, _ input: UnsafeRawBufferPointer, _ out: inout ByteBuffer,
                         _ operation: Operation) -> Bool {
        let flush: Int32
        switch operation {
        case .process: flush = Z_NO_FLUSH
        case .flush: flush = Z_SYNC_FLUSH
        case .finish: flush = Z_FINISH
        }
        z.pointee.next_in = UnsafeMutablePointer(mutating: input.baseAddress?.assumingMemoryBound(to: Bytef.self))
        z.pointee.avail_in = UInt32(input.count)
        // zlib's contract: called again with more room while a call fills all it was given;
        // a call that leaves room has taken all input and done what `flush` asks.
        var rc: Int32
        repeat {
            out.reserveWritable(Swift.max(4096, input.count / 2))
            z.pointee.next_out = out.writePointer.assumingMemoryBound(to: Bytef.self)
            let room = UInt32(clamping: out.writable)
            z.pointee.avail_out = room
            rc = CZlib.deflate(z, flush)
            if rc == Z_STREAM_ERROR { return false }
            out.writer += Int(room - z.pointee.avail_out)
        } while z.pointee.avail_out == 0
        return flush != Z_FINISH || rc == Z_STREAM_END
    }

    private func brotliEncode(_ state: OpaquePointer, _ input: UnsafeRawBufferPointer, _ out: inout ByteBuffer,
                              _ operation: Operation) -> Bool {
        let op: BrotliEncoderOperation
        switch operation {
        case .process: op = BROTLI_OPERATION_PROCESS
        case .flush: op = BROTLI_OPERATION_FLUSH
        case .finish: op = BROTLI_OPERATION_FINISH
        }
        var availableIn = input.count
        var nextIn = input.baseAddress?.assumingMemoryBound(to: UInt8.self)
        while true {
            out.reserveWritable(Swift.max(4096, input.count / 2))
            var availableOut = out.writable
            var nextOut: UnsafeMutablePointer<UInt8>? = out.writePointer.assumingMemoryBound(to: UInt8.self)
            let before = availableOut
            guard BrotliEncoderCompressStream(state, op, &availableIn, &nextIn, &availableOut, &nextOut, nil) == BROTLI_TRUE else {
                return false
            }
            out.writer += before - availableOut
            let done = operation == .finish ? BrotliEncoderIsFinished(state) == BROTLI_TRUE
                                            : availableIn == 0 && BrotliEncoderHasMoreOutput(state) == BROTLI_FALSE
            if done { return true }
        }
    }
}
