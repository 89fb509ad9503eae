/// The proxied path: building the upstream request, streaming the body, relaying the response.
extension ClientExchange {
    func proceedUpstream(rewrite: UpstreamRewrite?) {
        // An internal location is never proxied nor served, whoever rewrote what.
        if _slowPath(listener.accelRedirect != nil) && refuseInternalLocation(listener.accelRedirect!) { return }
        // A file under the static root answers instead (nginx's `try_files $uri @app`): here,
        // after the phases let the request through, so a path they protect is never served to
        // a client they refuse. Not for a target a phase rewrote: that one is the app's.
        if _slowPath(listener.servesStatic) && rewrite?.target == nil && serveStaticFile() { return }
        guard listener.hasUpstream else {
            respondLocal(Response(status: 404, text: "404 Not Found\n"))
            return
        }
        if _slowPath(listener.hasRoutes) { chooseGroup(listener.routes!, target: rewrite?.target) }
        arm(machine.proxy())
        let buffering = _slowPath(listener.buffersRequests) && startsBufferingRequest()
        buildUpstreamHead(rewrite)
        if buffering {
            pumpRequestBody()
            return
        }
        connectUpstream(fresh: false)
        if machine.isProxying { flush() }
    }

    /// `after`: the address whose connection just failed, to try the next one of a name's.
    func connectUpstream(fresh: Bool, after failed: SocketAddress? = nil) {
        let balancer = self.balancer
        if current!.attempt.server < 0 {
            // One server and no health checks: nothing to choose (most sites).
            let server = balancer.only != nil ? 0 : balancer.pick(now: loop.now, excluding: current!.attempt.triedServers,
                                                                  key: hashKey(balancer))
            guard let server else {
                respondError(.noUpstreamAvailable)
                return
            }
            current!.attempt.serverChosen(server)
        }
        let pool = balancer.only ?? balancer.pools[current!.attempt.server]
        let up: UpstreamConnection
        if !fresh, let pooled = pool.take() {
            up = pooled
        } else {
            guard let address = pool.address(after: failed, now: loop.now) else {
                let reason = pool.resolver?.problem?.description ?? "no address"
                var facts = attemptFacts(nil)
                facts.addressTried = false
                attemptFailed(.upstreamUnreachable(reason), reason, facts)
                return
            }
            current!.attempt.connecting()
            do {
                up = try UpstreamConnection.connect(to: address, pool: pool, loop: loop, timeouts: balancer.timeouts)
            } catch {
                addressFailed(address, error.description)
                attemptFailed(.upstreamUnreachable("\(error)"), error.description, attemptFacts(nil), address: address)
                return
            }
        }
        up.attach(self)
        upstream = up
        let resending = upstreamStart != 0
        if upstreamStart == 0 { upstreamStart = loop.now }
        up.output.append(upstreamHead.readableBytes)
        if _slowPath(current!.bodyBuffer.readable > 0) {
            // The body read ahead (`buffering.requests`) follows the head in one write.
            up.output.append(current!.bodyBuffer.readableBytes)
            current!.bodyBuffer.free()
        } else if _slowPath(resending && head.framing == .chunked && machine.requestBodyDone && requestBodyBytes == 0) {
            // An empty chunked body sent again (an HTTP/2 request whose END_STREAM came on an
            // empty DATA frame): its last chunk left with the failed connection, and without it
            // the next server would wait for a body until `timeouts.upstream`.
            up.output.append("0\r\n\r\n")
        }
        if !machine.requestBodyDone { pumpRequestBody() }
        if machine.isProxying { up.flushIfConnected() }
    }

    private func buildUpstreamHead(_ rewrite: UpstreamRewrite?) {
        var edits = rewrite?.edits ?? HeaderEdits()
        if _slowPath(listener.rewritesHeaders) { config.headerRules.request.apply(to: &edits, expand: expandRuleValue) }
        phases { $0.upstreamRequestFilter(RequestView(self), &edits) }
        let buffer = headBytes
        let bytes = buffer.baseAddress!
        let trusted = listener.isTrusted(peer)
        var out = upstreamHead.base == nil ? loop.buffers.take() : upstreamHead
        out.clear()
        out.append(bytes + head.methodRange.start, count: head.methodRange.count)
        out.append(byte: 0x20)
        if let target = rewrite?.target {
            out.append(string: target)
        } else {
            // The canonical path (the one every phase decided on), then the query as received.
            let pathOnly = head.pathOnly
            if head.canonicalPath.isEmpty {
                out.append(bytes + pathOnly.start, count: pathOnly.count)
            } else {
                head.canonicalPath.withUnsafeBytes { out.append($0) }
            }
            out.append(bytes + pathOnly.end, count: head.path.end - pathOnly.end)
        }
        out.append(" HTTP/1.1\r\n")
        // Host is preserved; for an absolute-form target its authority is the host (RFC 9112 §3.2.2).
        var hostValue: ByteRange? = head.authority
        if hostValue == nil, let i = head.hostIndex { hostValue = head.headers[i].value }
        if let h = hostValue {
            out.append("Host: ")
            out.append(bytes + h.start, count: h.count)
            out.append("\r\n")
        } else {
            // HTTP/1.0 clients may omit Host; HTTP/1.1 (our upstream side) requires one.
            out.append("Host: ")
            out.append(string: listener.upstreamHost)
            out.append("\r\n")
        }
        var forwardedFor: [ByteRange] = []
        var sawProto = false, sawHost = false
        let underscoresAllowed = config.allowUnderscoresInHeaders
        for field in head.headers {
            let kind = HeaderKind.of(buffer, field.name)
            // `_` in a name: CGI, Rack and WSGI fold it into `-`, so `X_Forwarded_For` would
            // be read as ours. Forwarding fields never pass in that spelling; others only when
            // the operator allows it (nginx's `underscores_in_headers`).
            if (kind.isForwarding || !underscoresAllowed) && ByteMatching.contains(buffer, field.name, 0x5F) { continue }
            switch kind {
            case .hopByHop, .transferEncoding, .contentLength, .host, .sendfileControl:
                continue
            case .expect:
                // Forwarded, not answered by us (RFC 9110 §10.1.1): the upstream may refuse
                // the body with a final status before the client sends it.
                // (Not when the body is read here first: the 100 came from us.)
                if !(head.expectContinue && !machine.requestBodyDone && head.version == .http11) || current!.bufferingBody { continue }
            case .upgrade:
                if !head.upgrade { continue }
            case .xForwardedFor:
                if trusted { forwardedFor.append(field.value) }
                continue
            case .xForwardedProto:
                if !trusted || sawProto { continue }
                sawProto = true
            case .xForwardedHost:
                if !trusted || sawHost { continue }
                sawHost = true
            case .forwarding:
                if !trusted { continue }
            case .xRequestID:
                // Replaced by the one id this request is logged under (below).
                continue
            case .other:
                if !head.connectionTokens.isEmpty && isNamedIn(head.connectionTokens, bytes, field.name, tokenBytes: bytes) { continue }
            }
            if !edits.remove.isEmpty && edits.remove.contains(where: { nameMatches($0, bytes, field.name) }) { continue }
            if let matching = edits.removeMatching,
               matching(UnsafeRawBufferPointer(start: bytes + field.name.start, count: field.name.count)) { continue }
            out.append(bytes + field.name.start, count: field.name.count)
            out.append(": ")
            out.append(bytes + field.value.start, count: field.value.count)
            out.append("\r\n")
        }
        out.append("X-Request-Id: ")
        appendRequestID(to: &out)
        out.append("\r\n")
        out.append("X-Forwarded-For: ")
        for v in forwardedFor where v.count > 0 {
            out.append(bytes + v.start, count: v.count)
            out.append(", ")
        }
        peerText.withUnsafeBytes { out.append($0) }
        out.append("\r\n")
        if !sawProto {
            // Two literal appends rather than one of a chosen literal: a length known at compile
            // time is copied inline, without a call to memcpy.
            if listener.tls { out.append("X-Forwarded-Proto: https\r\n") } else { out.append("X-Forwarded-Proto: http\r\n") }
        }
        if !sawHost, let h = hostValue {
            out.append("X-Forwarded-Host: ")
            out.append(bytes + h.start, count: h.count)
            out.append("\r\n")
        }
        if _slowPath(listener.accelRedirect != nil) && balancer.group.followsAccelRedirect {
            listener.accelMappingFields.withUnsafeBytes { out.append($0) }
        }
        switch head.framing {
        case .contentLength(let n):
            out.append("Content-Length: ")
            out.append(decimal: n)
            out.append("\r\n")
        case .chunked:
            out.append("Transfer-Encoding: chunked\r\n")
        case .none, .untilClose:
            break
        }
        if head.upgrade { out.append("Connection: upgrade\r\n") }
        // RFC 8470 §5.1: the app may answer 425 itself to what it will not serve from early data.
        if _slowPath(earlyData) { out.append("Early-Data: 1\r\n") }
        for (name, value) in edits.add {
            out.append(string: name)
            out.append(": ")
            out.append(string: value)
            out.append("\r\n")
        }
        out.append("\r\n")
        upstreamHead = out
    }

    /// Streams request body bytes from `input` to the upstream.
    func pumpRequestBody() {
        if _slowPath(current?.bufferingBody == true) {
            bufferRequestBody()
            return
        }
        guard !machine.requestBodyDone, let up = upstream else { return }
        let chunked = head.framing == .chunked
        if up.output.isEmpty && up.canWriteStraight {
            let n = requestBody.straightBytes(available: input.readable, chunkedOut: chunked)
            let more = inputFilled && UInt64(n) < requestBody.remaining ?? 0
            if n > 0, let written = up.writeStraight(input.base! + input.reader, count: n, more: more) {
                input.moveReader(written)
                requestBody.consumedStraight(written)
            }
            guard upstream === up else { return }  // the write failed
        }
        let step = requestBody.transfer(from: &input, to: &up.output, chunkedOut: chunked)
        requestBodyBytes = requestBody.total
        if config.maxBodySize > 0 && requestBodyBytes > config.maxBodySize {
            upstreamFailure(.bodyTooLarge(limit: config.maxBodySize))
            return
        }
        switch step {
        case .more:
            break
        case .done:
            arm(machine.requestBodyEnded())
        case .error(let e):
            arm(machine.requestBodyEnded())
            upstreamFailure(.invalidBody(e))
            return
        }
        // While the client's next body bytes wait in its socket, hold the partial segment
        // back (HAProxy does the same); the write after the last read that drains it pushes.
        up.flushIfConnected(more: inputFilled && step == .more)
        // (After the write: a failed one has let the upstream go.)
        if _slowPath(listener.splices) && step == .more && upstream === up && !current!.bodySpliceConsidered {
            startRequestSpliceIfWorthIt(up)
        }
        if machine.isProxying { want(read: wantsInput, write: !output.isEmpty) }
    }

    // MARK: Upstream events

    /// The upstream took our buffered bytes: resume reading the request body.
    func upstreamDrained() {
        if machine.isProxying || machine.isTunnel { want(read: wantsInput, write: !output.isEmpty) }
    }

    /// New bytes in `upstream.input`.
    func upstreamReadable() {
        guard let up = upstream else { return }
        if machine.isTunnel {
            output.append(up.input.readableBytes)
            up.input.clear()
            flush()
            if output.readable >= Exchange.highWater { up.pauseReading() }
            return
        }
        // Heads until the final one: `response.status` stays 0 until that is written (1xx
        // heads are passed on without it; a 101 leaves for the tunnel).
        while response.status < 200 {
            let result = listener.responseParser.parseHead(up.input.readableBytes, requestMethod: head.method, into: &response.head)
            switch result {
            case .incomplete:
                return
            case .error(let e):
                upstreamFailure(.upstreamInvalidResponse(e.reason))
                return
            case .complete(let length):
                let status = response.head.status
                if status == 101 {
                    guard head.upgrade else {
                        upstreamFailure(.upstreamUnexpectedSwitch)
                        return
                    }
                    writeResponseHead(up)
                    up.input.reader += length
                    enterTunnel(up)
                    return
                }
                if _slowPath(listener.countsStatuses) && balancer.group.countsStatus(status) && current!.attempt.server >= 0 {
                    // The server's health hears of it; the answer goes to the client as it is,
                    // unless the group sends the request to another server on it.
                    balancer.group.failed(current!.attempt.server, .status, "answered \(status)", now: loop.now)
                }
                if _slowPath(listener.retriesOnStatus) && retryElsewhere(status: status) { return }
                if status < 200 {
                    // Interim responses go to HTTP/1.1 clients (RFC 9110 §15.2); HTTP/1.0 ones
                    // cannot take them.
                    if head.version == .http11 { writeInterim(up, length: length) }
                    up.input.reader += length
                    continue
                }
                if _slowPath(listener.accelRedirect != nil) && balancer.group.followsAccelRedirect
                    && followAccelRedirect(up, listener.accelRedirect!, headLength: length) {
                    return
                }
                writeResponseHead(up)
                up.input.reader += length
            }
        }
        let step: BodyReader.Step
        if _slowPath(response.encoder != nil) {
            guard let s = encodeBody(from: up) else {
                logProblem(.error, "response compression failed", key: "compression", [("status", "\(response.status)")])
                abort(.compressionFailed)
                return
            }
            step = s
        } else {
            if output.isEmpty, case .connection(let c) = downstream, c.with({ $0.transport.isPlain }) {
                writeBodyStraight(from: up, to: c)
                if machine.isClosed { return }  // the write failed
            }
            step = response.body.transfer(from: &up.input, to: &output, chunkedOut: response.chunkedToClient)
        }
        switch step {
        case .more:
            // Not with MSG_MORE, unlike request bodies (`pumpRequestBody`): tried, it cost 1 MiB
            // responses 20-40 % more CPU a request (bench/results/NOTES.md, issue 25).
            flush()
            if machine.isProxying && output.readable >= response.window { up.pauseReading() }
            // (Closed first: a failed write above has let the request's state go.)
            if _slowPath(listener.splices) && !machine.isClosed && output.isEmpty && !response.spliceConsidered {
                startSpliceIfWorthIt(up)
            }
        case .done:
            responseComplete()
        case .error(let e):
            logProblem(.warn, "upstream response body invalid", key: e.reason, [("reason", e.reason)])
            abort(.upstreamInvalidBody(e.reason))
        }
    }

    /// Body bytes that go out as they came are written to the client straight from the
    /// upstream's buffer while nothing else waits to be sent (what the socket does not take is
    /// copied to `output` as before): one copy less per byte of a large response, in the
    /// common case. Plain HTTP/1.1 only: TLS copies into its records anyway, and an HTTP/2
    /// stream's body goes out as DATA frames.
    private func writeBodyStraight(from up: UpstreamConnection, to c: Downstream.Link<HTTP1Connection>) {
        let n = response.body.straightBytes(available: up.input.readable, chunkedOut: response.chunkedToClient)
        guard n > 0, let written = c.with({ $0.writeStraight(up.input.base! + up.input.reader, count: n) }) else { return }
        up.input.moveReader(written)
        response.body.consumedStraight(written)
        bytesOut += UInt64(written)
    }

    /// The response head, in the client's kind of connection's form (`Downstream.writeHead`).
    private func writeResponseHead(_ up: UpstreamConnection) {
        downstream.writeHead(UpstreamResponseHead(upstream: .passUnretained(up)), for: self, http10: head.version == .http10)
    }

    /// The upstream's head as the client gets it (`writeResponseHead(_:into:)`).
    private struct UpstreamResponseHead: ResponseHeadComposer {
        // Borrowed (the exchange holds its upstream through the call): no retain on the hot path.
        let upstream: Unmanaged<UpstreamConnection>
        @inline(__always)
        func compose<W: ResponseHeadWriter>(into w: inout W, for x: ClientExchange) {
            upstream._withUnsafeGuaranteedRef { x.writeResponseHead($0, into: &w) }
        }
    }

    /// The upstream's head as the client gets it: its fields less the hop-by-hop ones (and any
    /// its `Connection` names), less what the phases remove and the operator's HSTS replaces,
    /// plus what the phases add; framing as the exchange decides here. Specialised per writer.
    fileprivate func writeResponseHead<W: ResponseHeadWriter>(_ up: UpstreamConnection, into w: inout W) {
        // Decided before `r` is bound: an opaque call while it lives would make `r` a real
        // copy of the head (its field list retained and released, ~80 instructions).
        var compression = _slowPath(listener.compresses) ? compressionDecision(up.input.readableBytes) : .none
        if _slowPath(listener.buffersResponses) { decideBuffering(up.input.readableBytes) }
        let r = response.head
        let buffer = up.input.readableBytes
        response.status = r.status
        listener.engineMetrics.upstreamResponse.observe(nanos: loop.now - upstreamStart)
        var sendLength: UInt64? = nil
        // A body that can end only with the connection: one read to the upstream's close, or a
        // chunked one, for a client that cannot take chunks (HTTP/1.0).
        var bodyEndsWithClose = false
        switch r.framing {
        case .none:
            response.body = BodyReader()
        case .contentLength(let n):
            response.body = BodyReader(contentLength: n)
            sendLength = n
        case .chunked:
            response.body = BodyReader(chunked: ())
            // (An HTTP/2 stream's body ends with END_STREAM: never re-framed.)
            if head.version == .http11 && downstream.chunksBodies { response.chunkedToClient = true } else { bodyEndsWithClose = true }
        case .untilClose:
            // Re-framed as chunked for an HTTP/1.1 client, so its connection outlives the
            // upstream's; an HTTP/1.0 client gets the bytes and the close, as sent.
            response.body = BodyReader(untilClose: ())
            if head.version == .http11 && downstream.chunksBodies { response.chunkedToClient = true } else { bodyEndsWithClose = true }
        }
        response.upstreamKeepAlive = r.keepAlive && r.framing != .untilClose
        // Compression (off unless configured): the body is re-framed as chunks (HTTP/1.1) or
        // DATA (HTTP/2), so its length goes.
        var varyNamed = false
        if _slowPath(compression != .none) {
            if case .compress(let coding) = compression {
                if let encoder = makeEncoder(coding, sizeHint: sendLength) {
                    response.encoder = encoder
                    listener.engineMetrics.compression.started(encoder.coding)
                    sendLength = nil
                    if downstream.chunksBodies { response.chunkedToClient = true }
                } else {
                    compression = .varyOnly
                }
            }
        }
        var edits = HeaderEdits()
        if _slowPath(listener.rewritesHeaders) { config.headerRules.response.apply(to: &edits, expand: expandRuleValue) }
        phases { $0.responseFilter(RequestView(self), status: r.status, &edits) }
        let connection = machine.responseHead(switching: r.status == 101, bodyEndsWithClose: bodyEndsWithClose,
                                               bodyLeft: requestBody.remaining, draining: listener.isDraining(loop))
        let bytes = buffer.baseAddress!
        w.begin(status: r.status, reason: UnsafeRawBufferPointer(start: bytes + r.reason.start, count: r.reason.count))
        let switching = r.status == 101
        for field in r.headers {
            switch HeaderKind.of(buffer, field.name) {
            case .hopByHop, .transferEncoding, .sendfileControl: continue
            case .upgrade: if !switching { continue }
            case .contentLength: if sendLength != nil || response.encoder != nil { continue }
            default:
                if !r.connectionTokens.isEmpty && isNamedIn(r.connectionTokens, bytes, field.name, tokenBytes: bytes) { continue }
            }
            if !edits.remove.isEmpty && edits.remove.contains(where: { nameMatches($0, bytes, field.name) }) { continue }
            // The operator's HSTS policy, set where TLS ends, replaces whatever the app says.
            if listener.hsts != nil && nameMatches("Strict-Transport-Security", bytes, field.name) { continue }
            // So is its Alt-Svc while the proxy advertises HTTP/3: the app's would name a service the
            // proxy does not run, or contradict the proxy's own.
            if listener.altSvc != nil && nameMatches("Alt-Svc", bytes, field.name) { continue }
            if _slowPath(compression != .none)
                && Self.compressionEdits(field, bytes, encoding: response.encoder != nil, varyNamed: &varyNamed, into: &w) { continue }
            w.field(UnsafeRawBufferPointer(start: bytes + field.name.start, count: field.name.count),
                    UnsafeRawBufferPointer(start: bytes + field.value.start, count: field.value.count))
        }
        for (name, value) in edits.add { w.field(name, value) }
        if let hsts = listener.hsts { hsts.withUnsafeBytes { w.field("Strict-Transport-Security", $0) } }
        if let altSvc = listener.altSvc { altSvc.withUnsafeBytes { w.field("Alt-Svc", $0) } }
        if _slowPath(compression != .none) {
            if let encoder = response.encoder { w.field("Content-Encoding", encoder.coding.token) }
            if !varyNamed { w.field("Vary", "Accept-Encoding") }
        }
        w.end(contentLength: sendLength, chunked: response.chunkedToClient, connection: connection)
        statusSent = r.status
    }

    /// A 1xx head from the upstream, passed on (less its hop-by-hop and framing fields).
    private func writeInterim(_ up: UpstreamConnection, length: Int) {
        let r = response.head
        if r.status == 100 { machine.continueSent() }
        downstream.writeHead(InterimHead(head: r, buffer: up.input.readableBytes), for: self, http10: false)
        flush()
    }

    /// A 1xx head from the upstream as the client gets it: less its hop-by-hop and framing fields.
    private struct InterimHead: ResponseHeadComposer {
        let head: ResponseHead
        let buffer: UnsafeRawBufferPointer

        func compose<W: ResponseHeadWriter>(into w: inout W, for x: ClientExchange) {
            let bytes = buffer.baseAddress!
            w.begin(status: head.status, reason: UnsafeRawBufferPointer(start: nil, count: 0))
            for field in head.headers {
                switch HeaderKind.of(buffer, field.name) {
                case .hopByHop, .transferEncoding, .contentLength, .upgrade: continue
                default: break
                }
                w.field(UnsafeRawBufferPointer(start: bytes + field.name.start, count: field.name.count),
                        UnsafeRawBufferPointer(start: bytes + field.value.start, count: field.value.count))
            }
            w.end(contentLength: nil, chunked: false, connection: .keepAlive)
        }
    }

    func responseComplete() {
        releaseUpstream(reusable: response.upstreamKeepAlive)
        finishRequest()
    }

    /// The upstream's answer is all read: its connection goes back to the pool if `reusable`
    /// says it may and nothing else stands against it, else it is closed.
    func releaseUpstream(reusable: Bool) {
        upstreamEnd = loop.now
        guard let up = upstream else { return }
        upstream = nil
        // A context replaced by a reload pools nothing more: its pool is closed, and the new
        // configuration may name another upstream.
        if reusable && machine.requestBodyDone && up.input.isEmpty && !listener.state(loop).retired {
            up.pool.put(up)
        } else {
            up.abort()
        }
    }

    /// The upstream closed (EOF) or failed.
    func upstreamClosed(failed: Bool, reason: String) {
        guard let up = upstream else { return }
        if machine.isTunnel {
            upstream = nil
            up.abort()
            machine.tunnelEnded()
            flush()
            return
        }
        if !machine.responseStarted {
            // A connection that never opened is an unreachable upstream, not one that failed.
            if up.connectFailed { addressFailed(up.address, reason) }
            attemptFailed(up.connectFailed ? .upstreamUnreachable(reason) : failed ? .upstreamFailed(reason) : .upstreamClosedEarly,
                          reason, attemptFacts(up), address: up.address)
            return
        }
        if case .untilClose = response.body.mode {
            if failed && response.chunkedToClient {
                // A reset is not the end of the body: without the last chunk the client can
                // tell the body is cut, which the clean end below would hide.
                logProblem(.warn, "upstream failed mid-response", key: reason, [("status", "\(response.status)"), ("reason", reason)])
                abort(.upstreamFailedMidResponse(reason))
                return
            }
            if response.encoder != nil && !finishEncoding() {
                abort(.compressionFailed)
                return
            }
            if response.chunkedToClient { output.append("0\r\n\r\n") }
            response.body = BodyReader()
            response.upstreamKeepAlive = false
            responseComplete()
            return
        }
        logProblem(.warn, "upstream closed mid-response", key: "", [("status", "\(response.status)")])
        abort(.upstreamClosedMidResponse)
    }

    func upstreamTimedOut(connecting: Bool) {
        if connecting {
            let up = upstream
            if let up { addressFailed(up.address, "connect timed out") }
            attemptFailed(.upstreamConnectTimeout, "connect timed out", attemptFacts(up), address: up?.address)
        } else if machine.responseStarted {
            logProblem(.warn, "upstream stalled mid-response", key: "", [("status", "\(response.status)")])
            abort(.upstreamStalled)
        } else {
            attemptFailed(.upstreamResponseTimeout, "no response in time", attemptFacts(upstream))
        }
    }

    /// What the machine needs to know of a failed attempt (`up`: its connection, if one began).
    private func attemptFacts(_ up: UpstreamConnection?) -> UpstreamAttempt.Facts {
        let server = current!.attempt.server
        let pools = balancer.pools
        return UpstreamAttempt.Facts(idempotent: head.method.isIdempotent,
                              addresses: server >= 0 && server < pools.count ? pools[server].maxAttempts : 1,
                              reused: up?.reused ?? false,
                              receivedAny: up?.receivedAny ?? false, bodyBytes: requestBodyBytes,
                              bodyUnsent: up.map { $0.state == .connecting || $0.state == .handshaking } ?? true)
    }

    /// An attempt failed before any response began (`detail`: for the server's health log):
    /// `UpstreamAttempt` decides what follows; this does it — counts the failure against the
    /// server, and sends the request again (the same server on a fresh connection, the name's
    /// next address after `address`, another server) or answers with the error.
    private func attemptFailed(_ error: EngineError, _ detail: String, _ facts: UpstreamAttempt.Facts,
                               address: SocketAddress? = nil) {
        let (next, count) = current!.attempt.failed(error, facts)
        let server = current!.attempt.server
        let group = balancer.group
        if let count, server >= 0 { group.failed(server, count, detail, now: loop.now) }
        switch next {
        case .fail(let error):
            upstreamFailure(error)
        case .freshConnection:
            dropFailedConnection()
            listener.log.debug("retrying on a fresh upstream connection", [:])
            connectUpstream(fresh: true)
        case .nextAddress:
            dropFailedConnection()
            connectUpstream(fresh: true, after: address)
        case .nextServer(let elseFail):
            if !moveToAnotherServer(reason: detail, key: "moved \(count?.rawValue ?? "")", setting: nil, drop: dropFailedConnection) {
                upstreamFailure(elseFail)
            }
        }
    }

    /// `retry_statuses`: the upstream answered `status` (a final one; 1xx heads may have gone
    /// out before it); if the group sends such a request on (`UpstreamAttempt.movesOnAnswer`)
    /// and has a server not tried yet, the answer is dropped with its connection (its body is not
    /// read: the connection cannot be reused) and the request goes there. False: the answer goes
    /// to the client.
    func retryElsewhere(status: Int) -> Bool {
        guard machine.requestBodyDone,
              current!.attempt.movesOnAnswer(status, retryStatuses: balancer.group.retryStatuses, attemptFacts(upstream)) else {
            return false
        }
        return moveToAnotherServer(reason: "answered \(status)", key: "moved status \(status)", setting: "retry_statuses") {
            self.upstream?.abort()
            self.upstream = nil
        }
    }

    /// Sends the request to a server of its group it has not tried, if one may take it: `drop`
    /// lets the current connection go, the move is logged (rate-limited under `key`), and the
    /// request goes out on a fresh connection. False when the group has no such server.
    private func moveToAnotherServer(reason: String, key: String, setting: String?, drop: () -> Void) -> Bool {
        let balancer = self.balancer
        let server = current!.attempt.server
        guard server >= 0, balancer.group.count > 1,
              let other = balancer.pick(now: loop.now, excluding: current!.attempt.triedServers, key: hashKey(balancer)) else {
            return false
        }
        drop()
        current!.attempt.serverChosen(other)
        let servers = balancer.group.servers
        var fields = [("from", servers[server].label), ("to", servers[other].label), ("reason", reason)]
        if let setting { fields.append(("setting", setting)) }
        logProblem(.info, "upstream request moved to another server", key: key, fields)
        connectUpstream(fresh: true)
        return true
    }

    /// The failed connection goes; body bytes it holds unsent (it never opened: a connection
    /// writes only once connected, and splicing or straight writes need it connected too) go
    /// back into `bodyBuffer`, which `connectUpstream` sends after the head on the next one.
    /// (`UpstreamAttempt` sends a request with a body again only when they are unsent.)
    private func dropFailedConnection() {
        guard let up = upstream else { return }
        upstream = nil
        if requestBodyBytes > 0 {
            let queued = up.output.readableBytes
            let headLength = upstreamHead.readable
            if queued.count > headLength {
                current!.bodyBuffer.append(UnsafeRawBufferPointer(rebasing: queued[headLength...]))
            }
            up.output.clear()
        }
        up.abort()
    }

    /// A connection to one of a name's addresses failed: it is passed over for a while
    /// (`HostResolver.failTimeout`), and that is logged once per period, not per request.
    private func addressFailed(_ address: SocketAddress, _ reason: String) {
        guard let resolver = balancer.pools[max(0, current!.attempt.server)].resolver else { return }
        if resolver.markFailed(address, now: loop.now) {
            listener.log.warn("upstream address failed; passed over for 10 s", [
                "name": resolver.name, "address": "\(address)", "reason": reason,
            ])
        }
    }

    /// Gives up on the upstream; the client gets the error's status if nothing was sent yet,
    /// else a cut connection.
    func upstreamFailure(_ error: EngineError) {
        upstream?.abort()
        upstream = nil
        upstreamEnd = loop.now
        if machine.responseStarted {
            abort(error)
        } else {
            respondError(error)
        }
    }

    // MARK: Tunnel (after 101 Switching Protocols)

    private func enterTunnel(_ up: UpstreamConnection) {
        arm(machine.switchedProtocols())
        up.enterTunnel()
        // Bytes the client sent after its upgrade request belong to the new protocol.
        if !input.isEmpty { pumpTunnelFromClient() }
        upstreamReadable()
        want(read: wantsInput, write: !output.isEmpty)
    }

    func pumpTunnelFromClient() {
        guard let up = upstream else { return }
        up.output.append(input.readableBytes)
        input.reader = input.writer
        up.flushIfConnected()
        want(read: wantsInput, write: !output.isEmpty)
    }

    func tunnelClientClosed() {
        guard let up = upstream else { close(); return }
        // The client's half-close is expected here; stop watching for it.
        downstream.connection?.watchHangup = false
        // Pass the client's end-of-stream on once its last bytes are out.
        up.shutdownAfterFlush()
        want(read: false, write: !output.isEmpty)
    }
}
