/// Request bodies spliced through a pipe, client socket → pipe → upstream socket: the mirror
/// of `ClientExchange+Splice`. Once a body sized by Content-Length has at least
/// `splice.min_size` bytes still to come, everything the client sent so far has gone up, and
/// both sockets are plain, the client's readability comes here (`HTTP1Connection.readable`)
/// and the upstream's writability too (`UpstreamConnection.splicingRequest`). Back-pressure is
/// the pipe's: while the upstream has not taken what the pipe holds, the client is read only
/// as far as the pipe has room (`wantWhileSplicing`).
extension ClientExchange {
    /// Called by `pumpRequestBody` once what `input` held has gone up and the body goes on,
    /// until `current.bodySpliceConsidered`: starts splicing if the body qualifies and a pipe
    /// is free. Conditions that may still change (the upstream connecting, bytes waiting in a
    /// buffer) are asked again on the next pump; a body that found no pipe is copied to its end.
    @inline(never)
    func startRequestSpliceIfWorthIt(_ up: UpstreamConnection) {
        guard splice == nil, machine.isProxying, !machine.requestBodyDone, requestBodyBytes > 0,
              input.isEmpty, up.output.isEmpty, up.canWriteStraight, !up.receivedAny,
              case .connection(let c) = downstream,
              BodySplice.eligible(remaining: requestBody.remaining, minSize: config.splice.minSize,
                                  plainSockets: up.transport.isPlain && c.with({ $0.transport.isPlain }),
                                  pendingBytes: false, readAhead: false, encoded: false),
              let budget = listener.spliceBudget
        else { return }
        current!.bodySpliceConsidered = true
        if takeSplicePipe(budget, remaining: requestBody.remaining!, .request) { up.splicingRequest = true }
    }

    /// The client is readable while its body is spliced.
    func spliceFromClient() {
        guard var s = splice, let pipe = splicePipe, let up = upstream, case .connection(let c) = downstream else { return }
        let clientFD = c.with { $0.fd }
        var rounds = 0
        var moved = false
        fill: while rounds < ClientExchange.spliceRoundsPerEvent {
            rounds += 1
            let want = s.fillLength
            if want == 0 { break }
            var more = false
            switch SpliceCall.run(from: clientFD, to: pipe.writeFD, count: want) {
            case .moved(let n):
                s.filled(n)
                requestBody.consumedStraight(n)
                requestBodyBytes = requestBody.total
                bytesIn += UInt64(n)
                moved = true
                // A fill that took all it asked for likely left more in the socket, read next
                // round: hold the partial segment back (as `pumpRequestBody`'s MSG_MORE).
                more = n == want && s.remaining > 0
            case .ended:
                // The client left mid-body (what the pipe holds is dropped with the exchange).
                splice = s
                inputEnded()
                return
            case .failed:
                splice = s
                abort(.clientReadFailed)
                return
            case .wouldBlock:
                break fill
            }
            guard drainRequestPipe(&s, pipe: pipe, to: up, more: more) else { return }
            if !s.pipeEmpty { break }
        }
        splice = s
        if moved { arm(machine.requestBodyArrived()) }
        requestSpliceProgressed(up)
    }

    /// The upstream is writable while a request body is spliced.
    func spliceToUpstream() {
        guard var s = splice, let pipe = splicePipe, let up = upstream else { return }
        guard drainRequestPipe(&s, pipe: pipe, to: up) else { return }
        splice = s
        requestSpliceProgressed(up)
    }

    /// Moves what the pipe holds to the upstream. False if the write failed (the request
    /// has failed with it, as a failed copy would: `upstreamClosed`).
    private func drainRequestPipe(_ s: inout BodySplice, pipe: SplicePipe, to up: UpstreamConnection,
                                  more: Bool = false) -> Bool {
        while !s.pipeEmpty {
            switch SpliceCall.run(from: pipe.readFD, to: up.fd, count: s.inPipe, more: more) {
            case .moved(let n):
                s.drained(n)
                up.splicedOut()
            case .wouldBlock:
                return true
            case .ended:
                splice = s
                up.failSplice(0)
                return false
            case .failed(let e):
                splice = s
                up.failSplice(e)
                return false
            }
        }
        return true
    }

    /// After bytes moved: the body is all up (the exchange waits for the response as after a
    /// copied body), or the pipe waits for the upstream, or the client is read again.
    private func requestSpliceProgressed(_ up: UpstreamConnection) {
        guard let s = splice else { return }
        up.want(read: !up.paused, write: !s.pipeEmpty)
        if s.finished {
            endRequestSplice()
            arm(machine.requestBodyEnded())
        }
        if machine.isProxying { want(read: wantsInput, write: !output.isEmpty) }
    }

    /// The pipe goes back to the loop if empty (closed with whatever it still holds: a
    /// response came first, or the request failed), and the sockets are read as usual.
    func endRequestSplice() {
        upstream?.splicingRequest = false
        endSplice(keepPipe: true)
    }
}
