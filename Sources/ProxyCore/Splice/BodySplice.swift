/// One body on its way through a pipe: bytes are spliced from the socket it arrives on into
/// the pipe (`fill`) and from the pipe into the other socket (`drain`) — upstream to client
/// for a response, client to upstream for a request. The bookkeeping only, without sockets
/// (tested alone): the exchange makes the calls (`ClientExchange+Splice`,
/// `ClientExchange+RequestSplice`) and reports what they moved.
///
/// The pipe is the only buffer: when the receiving side does not take what it holds, the
/// sending side is not read (the pipe is full, or the exchange pauses it), as
/// `Exchange.highWater` bounds the copying path. Never more than the body's remaining bytes
/// are taken: what follows on the connection is not this body's (the next response, or a
/// pipelined request).
struct BodySplice {
    enum Direction { case response, request }

    /// Bytes in the pipe, taken from the sender but not yet by the receiver.
    private(set) var inPipe = 0
    /// Body bytes the sender has still to send.
    private(set) var remaining: UInt64
    /// The pipe's size (`SplicePipe.capacity`).
    let capacity: Int
    /// A connection splices one body at a time, in one direction.
    let direction: Direction

    init(capacity: Int, remaining: UInt64, direction: Direction = .response) {
        self.capacity = capacity
        self.remaining = remaining
        self.direction = direction
    }

    /// How many bytes to splice from the sender now: what the pipe has room for, at most
    /// the rest of the body. 0 when the pipe is full or the body all taken.
    var fillLength: Int { Int(min(UInt64(capacity - inPipe), remaining)) }

    /// `n` bytes went from the sender into the pipe.
    mutating func filled(_ n: Int) {
        precondition(n > 0 && n <= fillLength, "spliced more than was asked for")
        inPipe += n
        remaining -= UInt64(n)
    }

    /// `n` bytes went from the pipe to the receiver.
    mutating func drained(_ n: Int) {
        precondition(n > 0 && n <= inPipe, "drained more than the pipe held")
        inPipe -= n
    }

    var pipeEmpty: Bool { inPipe == 0 }

    /// The whole body reached the receiver: the pipe is empty and may be used again.
    var finished: Bool { remaining == 0 && inPipe == 0 }

    /// Whether a body may be spliced: see `SpliceSettings` for the conditions, given here as
    /// facts the exchange knows (a request body is never pending, read ahead or encoded).
    /// `remaining` is nil for a body not sized by Content-Length.
    /// `encoded`: the body is compressed on its way (the bytes must pass through the encoder).
    static func eligible(remaining: UInt64?, minSize: UInt64, plainSockets: Bool, pendingBytes: Bool,
                         readAhead: Bool, encoded: Bool) -> Bool {
        guard let remaining, remaining >= minSize else { return false }
        return plainSockets && !pendingBytes && !readAhead && !encoded
    }
}
