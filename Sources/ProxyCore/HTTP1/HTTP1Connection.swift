import CProxyLinux
#if canImport(Glibc)
import Glibc
#endif

/// An accepted HTTP/1.1 client connection: the socket (plain or with its TLS session) under a
/// `ClientExchange`, which it owns. It reads into the exchange's `input`, writes its `output`,
/// runs its timer (`Channel.deadline`) and its epoll interest, and closes: with a lingering
/// close when the exchange says so (`LingeringClose`), or hands the socket to an
/// `HTTP2Connection` when a plain listener sees the HTTP/2 preface.
final class HTTP1Connection: Channel {
    /// The socket, plain or with its TLS session.
    let transport: Transport
    let exchange: ClientExchange

    init(fd: Int32, loop: EventLoop, listener: ListenerContext, peer: PeerAddress, transport: Transport? = nil) {
        self.transport = transport ?? Transport(fd: fd)
        exchange = ClientExchange(loop: loop, listener: listener, peer: peer)
        super.init(fd: fd, loop: loop)
        watchHangup = true
        exchange.downstream = .connection(.init(self))
    }

    var listener: ListenerContext { exchange.listener }

    func start() {
        exchange.opened()
        do {
            try loop.register(self, EventLoop.readable)
        } catch {
            Glibc.close(fd)
            exchange.end(.downstreamGone)
            listener.clientGone(exchange.peer)
            return
        }
        listener.connectionOpened(loop)
        // Moved here from another loop's listener after this loop began to drain: an idle
        // connection, closed as the drain closed the others.
        if listener.isDraining(loop) { exchange.drain() }
    }

    /// Takes over from a finished TLS handshake (`TLSAccept`), which already holds the epoll
    /// registration (handed over in place) and counts as an open connection.
    func startAfterHandshake() {
        // Its listener was replaced by a reload during the handshake: the session is made, the
        // first request is served by the new configuration.
        exchange.followReload()
        if listener.isDraining(loop) { exchange.drain(closeIfIdle: false) }
        exchange.opened()
        want(read: true, write: false)
        // The request usually follows the client's Finished message at once.
        readable()
    }

    // MARK: Events

    override func onEvent(_ events: UInt32) {
        if events & (CProxyLinux_EPOLLERR) != 0 {
            exchange.abort(.clientSocketError)
            return
        }
        if events & EventLoop.writable != 0 {
            flush()
            if exchange.isClosed { return }
        }
        if events & CProxyLinux_EPOLLIN != 0 && interest & CProxyLinux_EPOLLIN != 0 {
            readable()
        } else if events & (CProxyLinux_EPOLLRDHUP | CProxyLinux_EPOLLHUP) != 0 && !exchange.isClosed {
            exchange.clientHungUp()
        }
    }

    private func readable() {
        if exchange.isLingering {
            discardInput()
            return
        }
        if exchange.isClosed { return }
        if _slowPath(exchange.splicePipe != nil) && exchange.splice?.direction == .request {
            // The request body goes through a pipe (`ClientExchange+RequestSplice`).
            exchange.spliceFromClient()
            return
        }
        if exchange.input.base == nil { exchange.input = loop.buffers.take() }
        let result: IOResult
        do {
            result = try transport.read(into: &exchange.input, reserve: 8 * 1024)
        } catch {
            exchange.abort(.clientReadFailed)
            return
        }
        guard case .done(let n) = result else { return }
        if n == 0 {
            exchange.inputEnded()
            return
        }
        exchange.input.writer += n
        exchange.inputFilled = exchange.input.writable == 0
        exchange.bytesIn += UInt64(n)
        exchange.inputArrived()
    }

    override func onTimeout() {
        exchange.timedOut()
    }

    override func onDrain() {
        // A listener that drains last (the internal one) is still serving: not this round.
        guard listener.isDraining(loop) else { return }
        exchange.drain()
    }

    override func onReload() {
        exchange.reloaded()
    }

    // MARK: Output

    /// Writes as much of the exchange's output as the socket takes; arranges for the rest.
    func flush() {
        let x = exchange
        if _slowPath(x.splicePipe != nil) && x.splice?.direction == .response {
            // A spliced response body: `output` is empty until it ends (`ClientExchange+Splice`).
            x.flushSplice()
            return
        }
        if transport.isPlain {
            while !x.output.isEmpty {
                let r: IOResult
                do {
                    r = try Socket.write(fd, from: x.output.base! + x.output.reader, count: x.output.readable)
                } catch {
                    x.abort(.clientWriteFailed)
                    return
                }
                guard case .done(let n) = r else { break }
                x.output.moveReader(n)
                x.bytesOut += UInt64(n)
            }
        } else {
            guard let n = transport.drainTLS(&x.output) else {
                x.abort(.clientWriteFailed)
                return
            }
            x.bytesOut += UInt64(n)
        }
        if x.output.isEmpty {
            x.output.clear()
            switch x.outputWritten() {
            case .none: break
            case .linger: startLinger(); return
            case .close: x.finishClose(); return
            }
            x.outputSent()
        } else {
            x.outputWaiting(readMore: x.wantsInput && x.output.readable < Exchange.highWater)
        }
    }

    /// Writes body bytes from the upstream's buffer straight to a plain socket
    /// (`ClientExchange.writeBodyStraight`): how many the socket took, nil if it took none
    /// (or the write failed, and the exchange is aborted).
    func writeStraight(_ bytes: UnsafeMutableRawPointer, count: Int) -> Int? {
        let r: IOResult
        do {
            r = try Socket.write(fd, from: bytes, count: count)
        } catch {
            exchange.abort(.clientWriteFailed)
            return nil
        }
        guard case .done(let written) = r else { return nil }
        return written
    }

    // MARK: Closing

    private func startLinger() {
        transport.shutdownWrite()
        exchange.lingerStarted()
        want(read: true, write: false)
        discardInput()
    }

    private func discardInput() {
        switch Socket.discardInput(fd) {
        case .closed: exchange.finishClose()
        case .some: exchange.lingerInputDropped()
        case .nothing: break
        }
    }

    /// The exchange is over: the socket closes.
    func exchangeClosed() {
        transport.prepareClose()
        loop.close(self)
        listener.connectionClosed(loop)
        listener.clientGone(exchange.peer)
    }

    // MARK: h2c with prior knowledge

    /// The input begins with the HTTP/2 client preface's request line (RFC 9113 §3.4).
    var startsWithHTTP2Preface: Bool {
        let line = 16  // "PRI * HTTP/2.0\r\n"
        let input = exchange.input
        return input.readable >= line && memcmp(input.base! + input.reader, HTTP2Connection.preface.utf8Start, line) == 0
    }

    /// The socket speaks HTTP/2 from its first byte: an `HTTP2Connection` takes it over (with
    /// the bytes read so far), as a TLS handshake hands over to its connection.
    func handOverToHTTP2() {
        let connection = HTTP2Connection(fd: fd, loop: loop, listener: listener, peer: exchange.peer, transport: transport)
        loop.handOver(self, to: connection)
        let bytes = Array(exchange.input.readableBytes)
        exchange.end(.handedOver)
        bytes.withUnsafeBytes { connection.start(initialBytes: $0) }
    }
}
