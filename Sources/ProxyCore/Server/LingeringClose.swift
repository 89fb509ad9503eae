/// The lingering close every client connection ends with when the client may still be sending
/// (RFC 9112 §9.6; nginx's `lingering_close`): after our last bytes and a half-close, read and
/// drop what the client sends until its FIN, so that unread input does not turn our close into
/// a reset that destroys those last bytes at the client. A client still uploading the body of a
/// request we refused reads the refusal only when it has sent it all, so each read that finds
/// bytes gives it another `quiet` second, up to `most` in all (nginx: 5 s and 30 s; shorter
/// here — a client still sending after ten seconds is not reading what we said, and a flood is
/// dropped in the kernel, `Socket.discardInput`, so waiting costs a descriptor and little else).
///
/// The clock only: the reads are the connection's (`Socket.discardInput`), the deadline its
/// owner's to arm (an exchange's machine, `Exchange.lingerStarted`, or an HTTP/2 connection).
struct LingeringClose: Equatable {
    static let quiet = Timeouts.second
    static let most = 10 * Timeouts.second

    private var ends: UInt64 = 0

    /// Starts the linger; returns its first deadline.
    mutating func begin(now: UInt64) -> UInt64 {
        ends = now + Self.most
        return now + Self.quiet
    }

    /// Bytes arrived and were dropped: the deadline, pushed on.
    func extended(now: UInt64) -> UInt64 {
        min(now + Self.quiet, max(ends, now))
    }

    /// Drops what has arrived. nil: the client has closed (or the socket failed): close now.
    /// Otherwise the deadline to keep — pushed on when bytes came.
    func discard(_ fd: Int32, now: UInt64, deadline: UInt64) -> UInt64? {
        switch Socket.discardInput(fd) {
        case .closed: return nil
        case .some: return extended(now: now)
        case .nothing: return deadline
        }
    }
}
