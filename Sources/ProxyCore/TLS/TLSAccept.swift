import CProxyLinux
#if canImport(Glibc)
import Glibc
#endif

/// An accepted connection on a TLS listener until its handshake is done. The handshake runs
/// on the loop, driven by readiness (no thread per connection), under its own deadline; on
/// success the socket and the session are handed to an `HTTP1Connection`, which takes over
/// the epoll registration in place. Keeping the handshake in its own channel leaves the
/// request state machine unchanged.
final class TLSAccept: Channel {
    let listener: ListenerContext
    let peer: PeerAddress
    let session: TLSSession
    /// The certificate generation this handshake started from: its SNI callback points here.
    private let server: TLSServerContext
    private var lingering = false
    private var linger = LingeringClose()
    private var closed = false

    private init(fd: Int32, loop: EventLoop, listener: ListenerContext, peer: PeerAddress,
                 session: TLSSession, server: TLSServerContext) {
        self.listener = listener
        self.peer = peer
        self.session = session
        self.server = server
        super.init(fd: fd, loop: loop)
    }

    /// Starts the handshake on a freshly accepted socket (which this takes over).
    static func start(fd: Int32, loop: EventLoop, listener: ListenerContext, peer: PeerAddress, credentials: TLSCredentials) {
        let server = credentials.context
        guard let session = server.makeSession(fd: fd) else {
            listener.log.error("cannot allocate a TLS session", [:])
            Glibc.close(fd)
            listener.clientGone(peer)
            return
        }
        let accept = TLSAccept(fd: fd, loop: loop, listener: listener, peer: peer, session: session, server: server)
        do {
            try loop.register(accept, EventLoop.readable)
        } catch {
            Glibc.close(fd)
            listener.clientGone(peer)
            return
        }
        listener.connectionOpened(loop)
        accept.deadline = loop.now + listener.config.timeouts.tlsHandshake
        // The ClientHello often arrives with the connection: try at once rather than after
        // another trip through epoll.
        accept.step()
    }

    override func onEvent(_ events: UInt32) {
        if lingering { discard(); return }
        step()
    }

    private func step() {
        switch session.handshake() {
        case .done:
            handOver()
        case .wantRead:
            want(read: true, write: false)
        case .wantWrite:
            want(read: false, write: true)
        case .failed(let failure):
            listener.metrics.tlsFailures.increment()
            if failure.plaintextHTTP {
                refusePlaintext()
            } else {
                // Scanners, old clients and impatient ones fail here all day: debug, not warn.
                listener.log.debug("TLS handshake failed", ["peer": peer.text, "reason": failure.reason])
                close()
            }
        }
    }

    override func onTimeout() {
        if !lingering {
            listener.metrics.tlsFailures.increment()
            listener.log.debug("TLS handshake timed out", ["peer": peer.text])
        }
        close()
    }

    /// A handshake under way when a reload replaced its listener's configuration goes on (its
    /// connection then moves to the new one); at shutdown it is dropped.
    override func onDrain() {
        if listener.isDraining(loop) { close() }
    }

    private func handOver() {
        deadline = 0
        closed = true
        (session.resumed ? listener.metrics.tlsResumed : listener.metrics.tlsNew).increment()
        if session.negotiatedHTTP2 {
            let connection = HTTP2Connection(fd: fd, loop: loop, listener: listener, peer: peer,
                                             transport: Transport(fd: fd, tls: session))
            loop.handOver(self, to: connection)
            connection.start(initialBytes: nil)
            return
        }
        let connection = HTTP1Connection(fd: fd, loop: loop, listener: listener, peer: peer,
                                          transport: Transport(fd: fd, tls: session))
        loop.handOver(self, to: connection)
        connection.startAfterHandshake()
    }

    /// Plain HTTP on the TLS port: one short plain-text 400 saying so, then a lingering close
    /// so the answer is not lost to a reset.
    private func refusePlaintext() {
        listener.log.debug("plain HTTP on a TLS port", ["peer": peer.text])
        let answer: StaticString = "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 40\r\nConnection: close\r\n\r\nThis port speaks HTTPS, not plain HTTP.\n"
        _ = try? Socket.write(fd, from: answer.utf8Start, count: answer.utf8CodeUnitCount)
        shutdown(fd, Int32(SHUT_WR))
        lingering = true
        deadline = linger.begin(now: loop.now)
        want(read: true, write: false)
        discard()
    }

    private func discard() {
        guard let next = linger.discard(fd, now: loop.now, deadline: deadline) else { return close() }
        deadline = next
    }

    private func close() {
        guard !closed else { return }
        closed = true
        deadline = 0
        loop.close(self)
        listener.connectionClosed(loop)
        listener.clientGone(peer)
    }
}
