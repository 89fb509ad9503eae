#if canImport(Glibc)
import Glibc
#endif

/// A client connection that another module drives without ever blocking its loop: a
/// non-blocking connect, the TLS handshake when a client context is given (verification as
/// for `https://` upstreams: always on, name or IP checked), then bytes both ways. The Redis
/// store talks to its server through it, over plain TCP or TLS alike.
///
/// The owner encodes straight into the output buffer (`send`); output given before the
/// connection is ready waits and goes out once it is. Input is handed over as it arrives.
/// There is no timer here: the owner bounds what it waits for (the Redis store times each
/// command, which also bounds a hanging connect or handshake).
///
/// Loop-confined: made, used and closed on its loop's thread. `handler` runs on the loop,
/// never inside `init` or `send`; `.closed` comes at most once, and never after `close()`.
public final class OutboundStream {
    public enum Event {
        /// Connected, and the TLS handshake (if any) is done.
        case ready
        /// Bytes arrived: valid only during the call (copy what is kept).
        case received(UnsafeRawBufferPointer)
        /// The connection failed or ended (refused, TLS failure, EOF, I/O error): the stream is
        /// closed. The reason is for logs and errors.
        case closed(reason: String)
    }

    private enum State { case connecting, handshaking, ready, closed }

    public let address: SocketAddress
    private let loop: EventLoop
    private let tls: UpstreamTLSClient?
    /// Checked instead of `tls.serverName` (see `UpstreamTLSClient.makeSession`).
    private let serverName: String?
    private let handler: (Event) -> Void
    private var state = State.connecting
    private var transport: Transport
    private var watch: FDWatch?
    private var input = ByteBuffer()
    private var output = ByteBuffer()
    /// A flush after the current batch is already queued.
    private var flushScheduled = false

    /// Connected, with the TLS handshake under way (for the owner's timeout message: a plain
    /// server answers a TLS client's hello with silence).
    public var handshaking: Bool { state == .handshaking }

    /// Starts connecting to `address` (an IP address: names are resolved by the owner, off the
    /// loop). Throws when the connect fails at once (no route, bad address family).
    public init(to address: SocketAddress, tls: UpstreamTLSClient?, serverName: String? = nil, on loop: EventLoop,
                _ handler: @escaping (Event) -> Void) throws(SystemError) {
        self.address = address
        self.loop = loop
        self.tls = tls
        self.serverName = serverName
        self.handler = handler
        let fd = try Socket.startConnect(address)
        transport = Transport(fd: fd)
        do {
            // Weak: the watch belongs to the stream; a strong capture would keep both alive.
            watch = try loop.watch(fd: fd, readable: false, writable: true) { [weak self] readable, writable in
                self?.onEvent(readable: readable, writable: writable)
            }
        } catch {
            Glibc.close(fd)
            throw error
        }
    }

    deinit {
        close()
        input.free()
        output.free()
    }

    /// Appends to the output (`encode` writes into the buffer); it goes out after the loop's
    /// current batch of events, together with whatever else was sent meanwhile (or once the
    /// connection is ready). One write for the commands of many requests: a write per command
    /// doubled the Redis server's CPU per callback (bench/callbacks). A failure to send is
    /// reported as `.closed` from that later flush, never inside this call.
    public func send(_ encode: (inout ByteBuffer) -> Void) {
        guard state != .closed else { return }
        encode(&output)
        guard state == .ready, !flushScheduled else { return }
        flushScheduled = true
        loop.afterThisBatch { [weak self] in
            guard let self else { return }
            self.flushScheduled = false
            if self.state == .ready { self.flush() }
        }
    }

    /// Closes the socket (a TLS peer gets a close_notify, best effort). No event follows.
    /// Idempotent; may be called from inside `handler`.
    public func close() {
        guard state != .closed else { return }
        state = .closed
        watch?.cancel()
        watch = nil
        transport.prepareClose()
        Glibc.close(transport.fd)
        input.clear()
        output.clear()
    }

    // MARK: Events

    private func onEvent(readable: Bool, writable: Bool) {
        switch state {
        case .connecting:
            let err = Socket.pendingError(transport.fd)
            if err != 0 {
                fail(SystemError(call: "connect(\(address))", errno: err).description)
            } else if writable {
                connected()
            }
        case .handshaking:
            handshake()
        case .ready:
            if writable { flush() }
            if readable && state == .ready { read() }
        case .closed:
            break
        }
    }

    private func connected() {
        guard let tls else {
            becomeReady()
            return
        }
        guard let session = tls.makeSession(fd: transport.fd, serverName: serverName) else {
            fail("cannot allocate a TLS session")
            return
        }
        transport = Transport(fd: transport.fd, tls: session)
        state = .handshaking
        handshake()
    }

    private func handshake() {
        guard let session = transport.tls else { return }
        switch session.handshake() {
        case .done:
            becomeReady()
        case .wantRead:
            watch?.update(readable: true, writable: false)
        case .wantWrite:
            watch?.update(readable: false, writable: true)
        case .failed(let failure):
            fail("TLS handshake with \(serverName ?? tls?.serverName ?? address.description) failed: \(failure.reason)")
        }
    }

    private func becomeReady() {
        state = .ready
        handler(.ready)
        // The handler may have closed the stream; otherwise send what waited for the connection.
        if state == .ready { flush() }
    }

    /// Reads what is there, a bounded number of times (epoll is level-triggered: the rest
    /// comes on the next turn, so one busy server cannot hold the loop).
    private func read() {
        for _ in 0..<8 {
            let r: IOResult
            do {
                r = try transport.read(into: &input, reserve: 16 * 1024)
            } catch {
                fail(transport.describe(error))
                return
            }
            guard case .done(let n) = r else { return }
            guard n > 0 else {
                fail("connection closed by the server")
                return
            }
            input.writer += n
            handler(.received(input.readableBytes))
            guard state == .ready else { return }
            input.clear()
        }
    }

    /// Writes what the socket takes; watches for writability while output remains.
    /// `deferFailure`: called by the owner (`send`), whose caller must not see `.closed` inside.
    private func flush() {
        var failure: String?
        if transport.isPlain {
            while !output.isEmpty {
                let r: IOResult
                do {
                    r = try Socket.write(transport.fd, from: output.base! + output.reader, count: output.readable)
                } catch {
                    failure = error.description
                    break
                }
                guard case .done(let n) = r else { break }
                output.moveReader(n)
            }
        } else if transport.drainTLS(&output) == nil {
            failure = transport.tlsFailure
        }
        if let failure { return fail(failure) }
        if output.isEmpty { output.clear() }
        watch?.update(readable: true, writable: !output.isEmpty)
    }

    private func fail(_ reason: String) {
        guard state != .closed else { return }
        close()
        handler(.closed(reason: reason))
    }
}
