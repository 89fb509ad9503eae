/// The client's timer, decided by the machine. One runs at a time (`Exchange.timer`):
///
/// | state | timer |
/// |---|---|
/// | idle, before the first request | `keepAlive`, for `clientHeader` |
/// | idle, a head's first bytes in | `header` (not pushed on by later bytes: slowloris) |
/// | idle, after a response | `keepAlive` |
/// | dispatching, deciding | none |
/// | collecting, proxying with its body arriving, discarding | `body`, from each read |
/// | proxying (body in), tunnel | none — `send` while output waits for the client |
/// | lingering | `send` while output waits; then the linger (HTTP/1.1), or `send` until the stream closes (HTTP/2) |
///
/// `send` never replaces another timer: a client that stops reading while it still sends its
/// body is timed by the body timer, one between requests by the keep-alive one.
extension Exchange {
    /// What the shell does with the timer after a transition (`ClientExchange.arm`).
    enum TimerChange: Equatable {
        /// The running timer (or none) stays as it is.
        case keep
        /// `kind` runs, passing `after` nanoseconds from now (replacing the one before).
        case arm(Deadline, after: UInt64)
        /// No timer runs.
        case disarm
    }

    /// Runs `kind` for its configured time.
    @inline(__always)
    mutating func run(_ kind: Deadline) -> TimerChange {
        timer = kind
        return .arm(kind, after: duration(kind))
    }

    /// Stops the running timer.
    @inline(__always)
    mutating func stop() -> TimerChange {
        if timer == .none { return .keep }
        timer = .none
        return .disarm
    }

    @inline(__always)
    func duration(_ kind: Deadline) -> UInt64 {
        switch kind {
        case .none: return 0
        case .header: return timeouts.clientHeader
        case .body: return timeouts.clientBody
        // Before the first request a connection gets the head's time, not a keep-alive's.
        case .keepAlive: return servedAny ? timeouts.keepAlive : timeouts.clientHeader
        case .send: return timeouts.clientSend
        case .linger: return LingeringClose.quiet
        }
    }

    // MARK: Events that move only the timer

    /// The connection is open (or its TLS handshake done): its first request may take the
    /// head's time to arrive.
    mutating func opened() -> TimerChange {
        run(.keepAlive)
    }

    /// A head's bytes are in and it is not complete: the head timer starts with the first of
    /// them and is not pushed on by the rest.
    @inline(__always)
    mutating func headArriving() -> TimerChange {
        timer == .header ? .keep : run(.header)
    }

    /// Output waits for a client that is not reading: the send timer runs unless another one
    /// does, and starts over whenever some of it went out.
    @inline(__always)
    mutating func outputWaiting() -> TimerChange {
        timer == .none || timer == .send ? run(.send) : .keep
    }

    /// All output is out: the send timer stops — except on a finished HTTP/2 stream, which
    /// keeps it until the stream closes (its END_STREAM may still wait for the peer's window).
    @inline(__always)
    mutating func outputSent() -> TimerChange {
        guard timer == .send else { return .keep }
        if _slowPath(isStream) && isLingering { return .keep }
        return stop()
    }

    /// The lingering close read and dropped bytes: the client gets more time, within the limit.
    mutating func lingerInputDropped(now: UInt64) -> TimerChange {
        guard case .lingering(let l) = state, timer == .linger else { return .keep }
        return .arm(.linger, after: l.clock.extended(now: now) - now)
    }
}
