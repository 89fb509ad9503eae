import CProxyLinux
#if canImport(Glibc)
import Glibc
#endif

/// One connection to the upstream. While it serves a request it reports to its client
/// connection; between requests it waits in its loop's pool, watched for a close by the upstream.
final class UpstreamConnection: Channel {
    enum State { case connecting, handshaking, active, idle, tunnel, closed }

    var state: State = .connecting
    unowned(unsafe) var client: ClientExchange?
    unowned(unsafe) let pool: UpstreamPool
    var input = ByteBuffer()
    var output = ByteBuffer()
    let timeouts: Timeouts
    /// Taken from the pool (a connection the upstream may have closed meanwhile).
    var reused = false
    /// Any response byte arrived for the current request.
    var receivedAny = false
    var paused = false
    var shutdownPending = false
    /// The socket; gains a TLS session once connected when the upstream is `https://`.
    var transport: Transport
    /// Where it connects (one of the name's addresses for a named upstream).
    let address: SocketAddress
    /// The connection attempt itself failed (refused, unreachable): nothing was sent, so the
    /// request may try the name's next address.
    var connectFailed = false
    /// The response body is spliced (`ClientExchange+Splice`): readiness goes to the client's
    /// exchange, which moves the bytes; `input` stays empty.
    var splicing = false
    /// The request body is spliced (`ClientExchange+RequestSplice`): writability goes to the
    /// client's exchange, which moves the bytes from the pipe; `output` stays empty.
    var splicingRequest = false

    init(fd: Int32, address: SocketAddress, loop: EventLoop, pool: UpstreamPool, timeouts: Timeouts) {
        self.address = address
        self.pool = pool
        self.timeouts = timeouts
        transport = Transport(fd: fd)
        super.init(fd: fd, loop: loop)
    }

    deinit {
        input.free()
        output.free()
    }

    static func connect(to address: SocketAddress, pool: UpstreamPool, loop: EventLoop,
                        timeouts: Timeouts) throws(SystemError) -> UpstreamConnection {
        let fd = try Socket.startConnect(address)
        let up = UpstreamConnection(fd: fd, address: address, loop: loop, pool: pool, timeouts: timeouts)
        do {
            try loop.register(up, EventLoop.writable)
        } catch {
            Glibc.close(fd)
            throw error
        }
        up.deadline = loop.now + timeouts.upstreamConnect
        return up
    }

    /// Counted in its server's `inFlight` (from `attach` until parked or closed).
    private var countedInFlight = false

    /// Called when handed to a client for a new request.
    func attach(_ client: ClientExchange) {
        self.client = client
        if _slowPath(pool.countsInFlight) && !countedInFlight {
            pool.inFlight!.inFlight.wrappingAdd(1, ordering: .relaxed)
            countedInFlight = true
        }
        receivedAny = false
        paused = false
        splicingRequest = false
    }

    override func onEvent(_ events: UInt32) {
        switch state {
        case .connecting:
            let err = Socket.pendingError(fd)
            if err != 0 || events & CProxyLinux_EPOLLERR != 0 {
                connectFailed = true
                fail(SystemError(call: "connect(\(address))", errno: err == 0 ? ECONNREFUSED : err).description)
                return
            }
            if pool.tls != nil {
                startTLS()
                return
            }
            state = .active
            deadline = loop.now + timeouts.upstreamResponse
            flush()
        case .handshaking:
            handshake()
        case .idle:
            // Any readiness on an idle connection is a close (or stray bytes we cannot use).
            pool.remove(self)
            abort()
        case .active, .tunnel:
            if events & EventLoop.writable != 0 {
                if _slowPath(splicingRequest) { client?.spliceToUpstream() } else { flush() }
            }
            if state == .closed { return }
            if events & (CProxyLinux_EPOLLIN | CProxyLinux_EPOLLHUP | CProxyLinux_EPOLLERR | CProxyLinux_EPOLLRDHUP) != 0,
               interest & CProxyLinux_EPOLLIN != 0 || events & (CProxyLinux_EPOLLHUP | CProxyLinux_EPOLLERR) != 0 {
                if _slowPath(splicing) {
                    client?.spliceFromUpstream(hangup: events & (CProxyLinux_EPOLLHUP | CProxyLinux_EPOLLERR) != 0)
                } else {
                    read()
                }
            }
        case .closed:
            break
        }
    }

    /// Connected to an `https://` upstream: the handshake starts. (Out of line, like all TLS
    /// code here, so that the plain event path keeps its shape.)
    @inline(never)
    private func startTLS() {
        guard let session = pool.tls?.makeSession(fd: fd) else {
            fail("cannot allocate a TLS session")
            return
        }
        transport = Transport(fd: fd, tls: session)
        // The connect deadline also bounds the handshake.
        state = .handshaking
        handshake()
    }

    @inline(never)
    private func handshake() {
        guard let session = transport.tls else { return }
        switch session.handshake() {
        case .done:
            state = .active
            deadline = loop.now + timeouts.upstreamResponse
            flush()
        case .wantRead:
            want(read: true, write: false)
        case .wantWrite:
            want(read: false, write: true)
        case .failed(let failure):
            fail("TLS handshake with \(pool.tls?.serverName ?? "upstream") failed: \(failure.reason)")
        }
    }

    private func read() {
        let r: IOResult
        do {
            r = try transport.read(into: &input, reserve: client?.wantsLargeReads == true ? 64 * 1024 : 16 * 1024)
        } catch {
            fail(transport.describe(error))
            return
        }
        guard case .done(let n) = r else { return }
        if n == 0 {
            client?.upstreamClosed(failed: false, reason: "closed")
            return
        }
        input.writer += n
        receivedAny = true
        deadline = state == .tunnel ? 0 : loop.now + timeouts.upstreamResponse
        client?.upstreamReadable()
    }

    private func fail(_ reason: String) {
        client?.upstreamClosed(failed: true, reason: reason)
    }

    /// Body bytes were spliced out of the socket (as `read` would have counted them).
    func splicedIn() {
        receivedAny = true
        deadline = loop.now + timeouts.upstreamResponse
    }

    /// Request body bytes were spliced into the socket (as a write would have counted them).
    func splicedOut() {
        deadline = loop.now + timeouts.upstreamResponse
    }

    /// Splicing from the socket failed with `errno` (0: it hung up without saying why).
    func failSplice(_ errno: Int32) {
        fail(SystemError(call: "splice", errno: errno == 0 ? ECONNRESET : errno).description)
    }

    /// `more`: the request body goes on and its next bytes are being read now (`Socket.write`).
    func flushIfConnected(more: Bool = false) {
        if state == .active || state == .tunnel { flush(more: more) }
    }

    func flush(more: Bool = false) {
        if transport.isPlain {
            while !output.isEmpty {
                let r: IOResult
                do {
                    r = try Socket.write(fd, from: output.base! + output.reader, count: output.readable, more: more)
                } catch {
                    fail(error.description)
                    return
                }
                guard case .done(let n) = r else { break }
                output.moveReader(n)
                if state != .tunnel { deadline = loop.now + timeouts.upstreamResponse }
            }
        } else {
            guard let n = transport.drainTLS(&output) else {
                fail(transport.tlsFailure)
                return
            }
            if n > 0 && state != .tunnel { deadline = loop.now + timeouts.upstreamResponse }
        }
        if output.isEmpty {
            output.clear()
            if shutdownPending { transport.shutdownWrite(); shutdownPending = false }
            want(read: !paused, write: false)
            client?.upstreamDrained()
        } else {
            want(read: !paused, write: true)
        }
    }

    /// Whether body bytes may be written straight from the client's buffer
    /// (`writeStraight`): a plain connection that is connected, with a request on it.
    var canWriteStraight: Bool { state == .active && transport.isPlain }

    /// Writes request body bytes straight from the client's input buffer while nothing else
    /// waits to go up: one copy less per byte of a large upload (as `writeBodyStraight` for
    /// responses); what the socket does not take goes through `output` as before. How many it
    /// took; nil if none (or the write failed, and the request has failed with it).
    func writeStraight(_ bytes: UnsafeMutableRawPointer, count: Int, more: Bool) -> Int? {
        let r: IOResult
        do {
            r = try Socket.write(fd, from: bytes, count: count, more: more)
        } catch {
            fail(error.description)
            return nil
        }
        guard case .done(let n) = r else { return nil }
        deadline = loop.now + timeouts.upstreamResponse
        return n
    }

    /// Stops reading while the client has not taken what we hold. The upstream is not stalled
    /// meanwhile — the client is — so its timer stops too (as nginx arms its read timeout only
    /// while it waits for upstream bytes): a phone downloading for longer than
    /// `timeouts.upstream` must not have its response cut as "upstream stalled". The timer
    /// keeps running while request bytes wait to go up (the upstream must take them).
    func pauseReading() {
        paused = true
        if output.isEmpty { deadline = 0 }
        want(read: false, write: !output.isEmpty)
    }

    func resumeReading() {
        guard paused, state == .active || state == .tunnel else { return }
        paused = false
        if state != .tunnel { deadline = loop.now + timeouts.upstreamResponse }
        want(read: true, write: !output.isEmpty)
        // Bytes may already wait in our buffer from before the pause.
        if !input.isEmpty { client?.upstreamReadable() }
    }

    func enterTunnel() {
        state = .tunnel
        deadline = 0
    }

    func shutdownAfterFlush() {
        if output.isEmpty { transport.shutdownWrite() } else { shutdownPending = true }
    }

    override func onTimeout() {
        switch state {
        case .connecting, .handshaking: client?.upstreamTimedOut(connecting: true)
        case .active: client?.upstreamTimedOut(connecting: false)
        case .idle:
            pool.remove(self)
            abort()
        case .tunnel, .closed: break
        }
    }

    @inline(__always) private func uncountInFlight() {
        guard countedInFlight else { return }
        countedInFlight = false
        pool.inFlight!.inFlight.wrappingSubtract(1, ordering: .relaxed)
    }

    /// Parks the connection in the pool.
    func park() {
        state = .idle
        client = nil
        uncountInFlight()
        reused = true
        paused = false
        splicing = false
        input.clear()
        output.clear()
        deadline = loop.now + timeouts.upstreamIdle
        want(read: true, write: false)
    }

    /// Closes without reuse; the client (if any) is not told.
    func abort() {
        guard state != .closed else { return }
        state = .closed
        client = nil
        uncountInFlight()
        deadline = 0
        transport.prepareClose()
        loop.close(self)
    }
}

/// Idle upstream connections of one loop: a stack, so the most recently used (warmest) goes first.
final class UpstreamPool {
    let target: UpstreamTarget
    /// Set for an upstream given by host name.
    let resolver: HostResolver?
    let capacity: Int
    /// Set for `https://` upstreams.
    let tls: UpstreamTLSClient?
    private var idle: [UpstreamConnection] = []
    /// The resolver's generation the idle connections were made under.
    private var seenGeneration: UInt64

    /// The server's count of requests in flight (`balance: least_conn`; nil: not counted).
    let inFlight: UpstreamServerState?
    /// `inFlight != nil`, kept apart: testing the optional reference costs a retain per request.
    let countsInFlight: Bool

    init(target: UpstreamTarget, resolver: HostResolver?, capacity: Int, tls: UpstreamTLSClient?,
         inFlight: UpstreamServerState? = nil) {
        self.target = target
        self.inFlight = inFlight
        countsInFlight = inFlight != nil
        self.resolver = resolver
        self.capacity = capacity
        self.tls = tls
        seenGeneration = resolver?.generation ?? 0
        idle.reserveCapacity(min(capacity, 128))
    }

    /// The address for a new connection: the fixed one, or the name's next (see
    /// `HostResolver.address(after:)`). Nil while the name has no address.
    func address(after previous: SocketAddress?, now: UInt64) -> SocketAddress? {
        guard let resolver else { return previous == nil ? target.address : nil }
        return resolver.address(after: previous, now: now)
    }

    /// How many new connections one request may try: one per address of a name, at most 8
    /// (each refused attempt costs a round trip; a name with dozens of dead addresses should
    /// not hold a request that long). 1 for a fixed address.
    var maxAttempts: Int { min(resolver?.count ?? 1, 8) }

    func take() -> UpstreamConnection? {
        if let resolver, resolver.generation != seenGeneration {
            // The name's addresses changed: idle connections may go to one that is gone.
            seenGeneration = resolver.generation
            closeAll()
            return nil
        }
        guard let up = idle.popLast() else { return nil }
        up.state = .active
        up.deadline = 0
        return up
    }

    func put(_ up: UpstreamConnection) {
        guard idle.count < capacity, up.output.isEmpty else { up.abort(); return }
        up.park()
        idle.append(up)
    }

    func remove(_ up: UpstreamConnection) {
        if let i = idle.firstIndex(where: { $0 === up }) { idle.remove(at: i) }
    }

    func closeAll() {
        for up in idle { up.abort() }
        idle.removeAll()
    }
}
