/// One response body on its way through a pipe: bytes are spliced from the upstream's socket
/// into the pipe (`fill`) and from the pipe into the client's (`drain`). The bookkeeping
/// only, without sockets (tested alone): the exchange makes the calls
/// (`ClientExchange+Splice`) and reports what they moved.
///
/// The pipe is the only buffer: when the client does not take what it holds, the upstream is
/// not read (the pipe is full, or the exchange pauses it), as `Exchange.highWater` bounds the
/// copying path. Never more than the body's remaining bytes are taken from the upstream: what
/// follows on the connection is not this response's.
struct BodySplice {
    /// Bytes in the pipe, taken from the upstream but not yet by the client.
    private(set) var inPipe = 0
    /// Body bytes the upstream has still to send.
    private(set) var remaining: UInt64
    /// The pipe's size (`SplicePipe.capacity`).
    let capacity: Int

    init(capacity: Int, remaining: UInt64) {
        self.capacity = capacity
        self.remaining = remaining
    }

    /// How many bytes to splice from the upstream now: what the pipe has room for, at most
    /// the rest of the body. 0 when the pipe is full or the body all taken.
    var fillLength: Int { Int(min(UInt64(capacity - inPipe), remaining)) }

    /// `n` bytes went from the upstream into the pipe.
    mutating func filled(_ n: Int) {
        precondition(n > 0 && n <= fillLength, "spliced more than was asked for")
        inPipe += n
        remaining -= UInt64(n)
    }

    /// `n` bytes went from the pipe to the client.
    mutating func drained(_ n: Int) {
        precondition(n > 0 && n <= inPipe, "drained more than the pipe held")
        inPipe -= n
    }

    var pipeEmpty: Bool { inPipe == 0 }

    /// The whole body reached the client: the pipe is empty and may be used again.
    var finished: Bool { remaining == 0 && inPipe == 0 }

    /// Whether a response may be spliced: see `SpliceSettings` for the conditions, given here
    /// as facts the exchange knows. `remaining` is nil for a body not sized by Content-Length.
    /// `encoded`: the body is compressed on its way (the bytes must pass through the encoder).
    static func eligible(remaining: UInt64?, minSize: UInt64, plainSockets: Bool, pendingBytes: Bool,
                         readAhead: Bool, encoded: Bool) -> Bool {
        guard let remaining, remaining >= minSize else { return false }
        return plainSockets && !pendingBytes && !readAhead && !encoded
    }
}
