/// What a `ClientExchange` writes its response to and reads its request from: the two kinds
/// of client side, each owning its exchange.
///
/// - An `HTTP1Connection` is a socket of its own: bytes are written to it as they are produced
///   (plain or through TLS), heads as HTTP/1.1 text, the body framed by Content-Length or
///   chunks; it takes the next request when a response ends, and closes with a lingering close.
/// - An `HTTP2Stream` is one stream of an `HTTP2Connection`: its heads go to nghttp2 as HEADERS,
///   its body is pulled as DATA as the peer's windows allow, a response ends with END_STREAM,
///   and an abort is a `RST_STREAM`. Its timers are swept by its connection.
///
/// An enum, not a protocol: the exchange's calls are a switch over two known kinds, inlined
/// into the hot path (no witness table, no existential box). A third kind (HTTP/3, one QUIC
/// stream) would be a third case and a third head writer (docs/architecture.md).
///
/// The links are unowned: the downstream owns its exchange (`HTTP1Connection.exchange`,
/// `HTTP2Stream.exchange`) and outlives it.
enum Downstream {
    case connection(Link<HTTP1Connection>)
    case stream(Link<HTTP2Stream>)
    /// Before its owner links it, or after an `HTTP1Connection` handed its socket over to HTTP/2.
    case detached

    /// An unretained reference to the owner. Calls through it borrow the owner in place
    /// (`_withUnsafeGuaranteedRef`): a strong copy would cost a retain and a release per call,
    /// about a dozen pairs per request. Sound because the owner holds the exchange that holds
    /// the link, so it is alive whenever the exchange runs.
    struct Link<Owner: AnyObject> {
        private let owner: Unmanaged<Owner>
        init(_ owner: Owner) { self.owner = .passUnretained(owner) }

        @inline(__always)
        func with<R>(_ body: (Owner) -> R) -> R { owner._withUnsafeGuaranteedRef(body) }

        /// A strong reference, for a call during which the owner may let go of itself.
        var retained: Owner { owner.takeUnretainedValue() }
    }

    var connection: HTTP1Connection? {
        if case .connection(let c) = self { return c.retained }
        return nil
    }

    var stream: HTTP2Stream? {
        if case .stream(let s) = self { return s.retained }
        return nil
    }

    /// When the exchange's timer passes (monotonic nanoseconds; 0: none).
    var deadline: UInt64 {
        @inline(__always) get {
            switch self {
            case .connection(let c): return c.with { $0.deadline }
            case .stream(let s): return s.with { $0.deadline }
            case .detached: return 0
            }
        }
        @inline(__always) nonmutating set {
            switch self {
            case .connection(let c): c.with { $0.deadline = newValue }
            case .stream(let s): s.with { $0.deadline = newValue }
            case .detached: break
            }
        }
    }

    @inline(__always)
    func want(read: Bool, write: Bool) {
        switch self {
        case .connection(let c): c.with { $0.want(read: read, write: write) }
        case .stream(let s): s.with { $0.want(read: read, write: write) }
        case .detached: break
        }
    }

    @inline(__always)
    func flush() {
        switch self {
        case .connection(let c): c.with { $0.flush() }
        case .stream(let s): s.with { $0.flush() }
        case .detached: break
        }
    }

    /// The exchange is over (closed, aborted, or its stream ended): the socket closes, or the
    /// stream is reset unless nghttp2 already closed it.
    func exchangeClosed() {
        switch self {
        // Retained: closing lets the loop (or the connection's stream table) drop the owner.
        case .connection(let c): c.retained.exchangeClosed()
        case .stream(let s): s.retained.exchangeClosed()
        case .detached: break
        }
    }
}
