import CProxyLinux
#if canImport(Glibc)
import Glibc
#endif

/// Response bodies spliced through a pipe (`SpliceSettings`, `BodySplice`): the exchange's
/// side. Once a sized body has at least `splice.min_size` bytes to come and nothing is
/// pending on either side, the upstream connection stops reading into its buffer
/// (`UpstreamConnection.splicing`) and its readiness comes here instead; the client
/// connection's writability too (`HTTP1Connection.flush`). Back-pressure is the pipe's: a
/// client that does not take what the pipe holds pauses the upstream as a full `output` does.
extension ClientExchange {
    /// At most this many fill-and-drain rounds per readiness event (4 × 64 KiB, as the copying
    /// path's 64 KiB reads), so that one fast transfer does not hold its loop. Both directions.
    static let spliceRoundsPerEvent = 4

    /// Called while a response body streams (after the bytes at hand went out), until
    /// `response.spliceConsidered` (the caller tests it, on the hot path): starts splicing if
    /// the response qualifies and a pipe is free. Once per response: one that finds no pipe
    /// is copied to its end (and counted once), rather than asking again on every read.
    @inline(never)
    func startSpliceIfWorthIt(_ up: UpstreamConnection) {
        // (A request body still in a pipe — an early answer — leaves this response copied.)
        guard splice == nil, case .connection(let c) = downstream,
              BodySplice.eligible(remaining: response.body.remaining, minSize: config.splice.minSize,
                                  plainSockets: up.transport.isPlain && c.with({ $0.transport.isPlain }),
                                  pendingBytes: !output.isEmpty || !up.input.isEmpty,
                                  readAhead: response.window != Exchange.highWater,
                                  encoded: response.encoder != nil),
              let budget = listener.spliceBudget
        else { return }
        response.spliceConsidered = true
        if takeSplicePipe(budget, remaining: response.body.remaining!, .response) { up.splicing = true }
    }

    /// Takes a pipe for a body of `remaining` bytes (counted in the metrics either way); false
    /// when none is free, and the body is copied.
    func takeSplicePipe(_ budget: SpliceBudget, remaining: UInt64, _ direction: BodySplice.Direction) -> Bool {
        let pipe = loop.pipes.take(budget: listener.budget, pipes: budget)
        budget.counted(spliced: pipe != nil, direction)
        guard let pipe else { return false }
        splicePipe = pipe
        splice = BodySplice(capacity: pipe.capacity, remaining: remaining, direction: direction)
        return true
    }

    /// The upstream is readable (or hung up) while its body is spliced.
    func spliceFromUpstream(hangup: Bool) {
        guard let up = upstream, var s = splice, let pipe = splicePipe, case .connection(let c) = downstream else { return }
        let clientFD = c.with { $0.fd }
        var rounds = 0
        fill: while rounds < ClientExchange.spliceRoundsPerEvent {
            rounds += 1
            let want = s.fillLength
            if want == 0 {
                // The pipe is full, or holds the body's last bytes: the client must take them
                // first. If the upstream hung up meanwhile (a reset right after the body, say),
                // what it sent before is still the client's: with the whole body taken, the
                // upstream is done with; otherwise its socket still holds the rest (readable
                // after a reset too), read once the pipe has room. Until then it leaves the
                // epoll set, which would repeat the hang-up in a loop.
                if hangup {
                    splice = s
                    if s.remaining == 0 {
                        upstream = nil
                        up.abort()
                        spliceProgressed(nil)
                        return
                    }
                    guard up.output.isEmpty else {
                        // Request bytes still to send to a peer that is gone: nothing to save.
                        up.failSplice(Socket.pendingError(up.fd))
                        return
                    }
                    up.pauseReading()
                    loop.mute(up)
                }
                break
            }
            switch SpliceCall.run(from: up.fd, to: pipe.writeFD, count: want) {
            case .moved(let n):
                s.filled(n)
                response.body.consumedStraight(n)
                up.splicedIn()
            case .ended:
                splice = s
                upstreamClosed(failed: false, reason: "closed")
                return
            case .failed(let e):
                splice = s
                up.failSplice(e)
                return
            case .wouldBlock:
                break fill
            }
            guard drainPipe(&s, pipe: pipe, to: clientFD) else { return }
            if !s.pipeEmpty || s.remaining == 0 { break }
        }
        splice = s
        spliceProgressed(up)
    }

    /// The client is writable while a body is spliced (`HTTP1Connection.flush`).
    func flushSplice() {
        guard var s = splice, let pipe = splicePipe, case .connection(let c) = downstream else { return }
        guard drainPipe(&s, pipe: pipe, to: c.with { $0.fd }) else { return }
        splice = s
        spliceProgressed(upstream)
    }

    /// Moves what the pipe holds to the client. False if the write failed (the exchange is
    /// aborted).
    private func drainPipe(_ s: inout BodySplice, pipe: SplicePipe, to fd: Int32) -> Bool {
        while !s.pipeEmpty {
            switch SpliceCall.run(from: pipe.readFD, to: fd, count: s.inPipe) {
            case .moved(let n):
                s.drained(n)
                bytesOut += UInt64(n)
            case .wouldBlock:
                return true
            case .ended, .failed:
                splice = s
                abort(.clientWriteFailed)
                return false
            }
        }
        return true
    }

    /// After bytes moved: the body is complete, or waits for the client (the upstream paused,
    /// the send timer running), or for the upstream.
    /// `up`: nil once the upstream is gone with the whole body taken (see the hang-up above).
    private func spliceProgressed(_ up: UpstreamConnection?) {
        guard let s = splice else { return }
        if s.finished {
            endSplice(keepPipe: true)
            up?.splicing = false
            responseComplete()
        } else if !s.pipeEmpty {
            up?.pauseReading()
            outputWaiting(readMore: wantsInput)
        } else {
            outputSent()
        }
    }

    /// `want` while a body is in a pipe. A response's bytes there wait for the client as
    /// `output`'s do, whichever caller asks; a request's client is read only while the pipe
    /// has room and the body goes on (what follows it stays in the socket until the request
    /// is done, as a pipelined request does).
    @inline(never)
    func wantWhileSplicing(read: Bool, write: Bool) {
        guard let s = splice else { return downstream.want(read: read, write: write) }
        switch s.direction {
        case .response: downstream.want(read: read, write: write || !s.pipeEmpty)
        case .request: downstream.want(read: read && s.fillLength > 0, write: write)
        }
    }

    /// The pipe goes back to the loop if it is empty, and is closed if not (a body cut
    /// midway leaves bytes in it that no one will read).
    func endSplice(keepPipe: Bool) {
        guard let pipe = splicePipe else { return }
        if keepPipe && splice?.pipeEmpty == true { loop.pipes.put(pipe) } else { pipe.close() }
        splicePipe = nil
        splice = nil
    }
}
