#if canImport(Glibc)
import Glibc
#endif

/// A client exchange with no client socket, for unit tests of phases — the domain's seam
/// (after SwiftNIO's `EmbeddedChannel`). The request is written into the exchange's input as a
/// socket would; the response is read from its output, in HTTP/1.1 form; everything between
/// is the real engine: the parser, the phases (deferred answers hop through a real event
/// loop, turned by hand), the exchange's machine, and a real upstream connection to a unix
/// socket this object listens on, whose bytes `upstreamRequest()` reads as the app would.
///
/// Not a mock: only the client's socket is missing, so what a test sees here is what a
/// client would, less the socket's timing. The timer is the machine's (`timer`); a test
/// passes it with `timerPasses()`, as the loop's sweep would.
///
/// One thread at a time, the test's: the loop has no thread of its own.
public final class EmbeddedExchange {
    let loop: EventLoop
    let listener: ListenerContext
    let exchange: ClientExchange
    private let upstream: EmbeddedUpstream
    /// How much of what the app was sent `upstreamRequest` has returned.
    private var upstreamRead = 0

    /// With the default settings, the client at 192.0.2.10.
    ///
    /// An overload, not a default argument: a default `ProxyConfig` would be built in the
    /// caller's module, in a buffer of the size it last compiled against — and a test module
    /// that never names `ProxyConfig` is not rebuilt when the struct grows (an incremental
    /// build then overflows the caller's stack).
    public convenience init(phases: any HTTPPhases) throws {
        try self.init(phases: phases, config: ProxyConfig())
    }

    /// - phases: the phases under test; config: the listener's settings (its upstream is
    ///   replaced by this object's socket); peer: the client's address.
    public init(phases: any HTTPPhases, config: ProxyConfig, peer: String = "192.0.2.10") throws {
        upstream = try EmbeddedUpstream()
        loop = try EventLoop(index: 0)
        listener = upstream.listener(named: "embedded", phases: phases, config: config)
        exchange = ClientExchange(loop: loop, listener: listener, peer: PeerAddress(text: peer) ?? PeerAddress(text: "192.0.2.10")!)
        exchange.opened()
    }

    deinit {
        exchange.close()
    }

    // MARK: The client's side

    /// The client sends `bytes` (a request, or part of one).
    public func send(_ bytes: String) {
        var bytes = bytes
        if exchange.input.base == nil { exchange.input = loop.buffers.take() }
        bytes.withUTF8 { exchange.input.append(UnsafeRawBufferPointer($0)) }
        exchange.bytesIn += UInt64(bytes.utf8.count)
        exchange.inputArrived()
    }

    /// What the client has been sent since the last call, as text; the client has read it (the
    /// exchange goes on: the next request, or the close).
    public func receive() -> String {
        guard exchange.output.base != nil, !exchange.output.isEmpty else { return "" }
        let text = String(decoding: exchange.output.readableBytes, as: UTF8.self)
        exchange.bytesOut += UInt64(exchange.output.readable)
        exchange.output.clear()
        switch exchange.outputWritten() {
        case .none: exchange.outputSent()
        case .linger, .close: exchange.finishClose()
        }
        return text
    }

    /// Turns the loop until `done` holds or `seconds` pass (a deferred phase's answer, an
    /// upstream connection's events). Returns whether `done` held.
    @discardableResult
    public func run(until done: () -> Bool, seconds: Double = 5) -> Bool {
        let end = EventLoop.monotonicNow() + UInt64(seconds * 1e9)
        while !done() {
            if EventLoop.monotonicNow() >= end { return false }
            loop.turn(longestWaitMS: 10)
        }
        return true
    }

    /// The request went upstream (the phases let it through).
    public var proxied: Bool { exchange.isProxying }
    /// A phase has not answered yet.
    public var deciding: Bool { exchange.isDeciding }
    /// The connection is closed.
    public var closed: Bool { exchange.isClosed }
    /// The requests sent from now on arrive in early data (0-RTT), as a downstream that accepts
    /// it would mark them.
    public var earlyData: Bool {
        get { exchange.earlyData }
        set { exchange.earlyData = newValue }
    }
    /// The timer the exchange runs now (`Exchange.Deadline`'s name: none, header, body, …).
    public var timer: String { "\(exchange.timer)" }

    /// The running timer passes, as the loop's sweep finds it.
    public func timerPasses() {
        guard exchange.timer != .none else { return }
        exchange.timedOut()
    }

    // MARK: The app's side

    /// The bytes the app has been sent on its connections since the last call (the upstream
    /// request: its head with the phases' edits, then any body), or nil if none reached it
    /// within `seconds`.
    public func upstreamRequest(seconds: Double = 5) -> String? {
        run(until: {
            upstream.pump()
            // A whole head is enough to look at (the tests send no bodies upstream).
            return upstream.received.count >= upstreamRead + 4 && upstream.received.suffix(4) == [13, 10, 13, 10]
        }, seconds: seconds)
        let received = upstream.received[upstreamRead...]
        upstreamRead = upstream.received.count
        return received.isEmpty ? nil : String(decoding: received, as: UTF8.self)
    }

    /// The app answers `bytes` on the connection it last accepted (after `upstreamRequest()`),
    /// and the loop turns until the exchange has read them and the request is no longer
    /// proxied, or `seconds` pass. Returns whether the exchange is done with it.
    @discardableResult
    public func upstreamResponds(_ bytes: String, seconds: Double = 5) -> Bool {
        guard upstream.respond(Array(bytes.utf8)) else { return false }
        return run(until: {
            upstream.pump()
            return !exchange.isProxying || exchange.isClosed
        }, seconds: seconds)
    }
}
