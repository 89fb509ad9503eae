/// What the connection reads off its `Exchange` between transitions (the transitions
/// themselves are in Exchange.swift, the only code that changes the state).
extension Exchange {
    var isIdle: Bool {
        @inline(__always) get { if case .idle = state { return true } else { return false } }
    }

    var isClosed: Bool {
        @inline(__always) get { if case .closed = state { return true } else { return false } }
    }

    var isLingering: Bool {
        @inline(__always) get { if case .lingering = state { return true } else { return false } }
    }

    /// Proxied and not yet switched or finished: the upstream's events matter.
    var isProxying: Bool {
        @inline(__always) get { if case .proxying = state { return true } else { return false } }
    }

    var isTunnel: Bool {
        @inline(__always) get { if case .tunnel = state { return true } else { return false } }
    }

    /// The request body has been read to its end (true while no request is in flight).
    var requestBodyDone: Bool {
        @inline(__always) get {
            switch state {
            case .dispatching(let r), .deciding(let r, _), .collecting(let r), .proxying(let r): return r.bodyDone
            case .discarding: return false
            case .lingering(let l): return l.bodyDone
            case .idle, .tunnel, .closed: return true
            }
        }
    }

    /// The connection ends after the current response.
    var closeAfterResponse: Bool {
        @inline(__always) get {
            switch state {
            case .dispatching(let r), .deciding(let r, _), .collecting(let r), .proxying(let r): return r.closeAfter
            case .tunnel, .lingering, .closed: return true
            case .idle, .discarding: return draining
            }
        }
    }

    /// Whether the connection wants read readiness now. While a request is in flight it keeps
    /// reading (rather than switching read interest off and on, two epoll_ctl calls per
    /// request): that is how a client that leaves is noticed, and pipelined requests are
    /// buffered up to `pipelineLimit`. A request body or tunnel bytes stop being read while
    /// `highWater` bytes wait for the upstream.
    /// - buffered: bytes waiting in the connection's input.
    /// - upstreamBuffered: bytes waiting to go to the upstream (read only where they matter).
    @inline(__always)
    func wantsInput(buffered: Int, upstreamBuffered: @autoclosure () -> Int) -> Bool {
        switch state {
        case .idle, .dispatching, .lingering, .collecting, .discarding: return true
        case .proxying(let r):
            if r.bodyDone { return buffered < Exchange.pipelineLimit }
            return upstreamBuffered() < Exchange.highWater
        case .tunnel: return upstreamBuffered() < Exchange.highWater
        case .deciding: return buffered < Exchange.pipelineLimit
        case .closed: return false
        }
    }

    /// Whether the rest of the request body may be read and dropped after the response (so the
    /// connection stays open) rather than the connection closed. Not when the client waits for
    /// a `100 Continue` it never got (it may never send the body, and its next request would be
    /// taken for body bytes), not for HTTP/2 (a stream ends on its own), and not for more than
    /// `discardLimit` bytes still to come (`bodyLeft`; nil: chunked, unknown).
    func canDiscardRequestBody(bodyLeft: UInt64?) -> Bool {
        guard !isStream, let r = request, !r.awaitingContinue else { return false }
        if let left = bodyLeft { return left <= Exchange.discardLimit }
        return true
    }

    /// The request in flight, where the state has one.
    /// A response head went to the client for the request in flight (nothing can answer it
    /// any more; a failure cuts the connection).
    var responseStarted: Bool {
        @inline(__always) get { request?.responseStarted ?? false }
    }

    var request: Request? {
        switch state {
        case .dispatching(let r), .deciding(let r, _), .collecting(let r), .proxying(let r): return r
        default: return nil
        }
    }
}
