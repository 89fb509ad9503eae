/// What a `ClientExchange` writes its response to and reads its request from: the two kinds
/// of client side, each owning its exchange.
///
/// - An `HTTP1Connection` is a socket of its own: bytes are written to it as they are produced
///   (plain or through TLS), heads as HTTP/1.1 text, the body framed by Content-Length or
///   chunks; it takes the next request when a response ends, and closes with a lingering close.
/// - An `HTTP2Stream` is one stream of an `HTTP2Connection`: its heads go to nghttp2 as HEADERS,
///   its body is pulled as DATA as the peer's windows allow, a response ends with END_STREAM,
///   and an abort is a `RST_STREAM`. Its timers are swept by its connection.
/// - An `HTTP3Stream` is one request stream of an `HTTP3Connection` (QUIC): as an HTTP/2
///   stream, through nghttp3, but its response bytes are held until the client acknowledges
///   them, and an abort resets the QUIC stream both ways.
///
/// An enum, not a protocol: the exchange's calls are a switch over three known kinds, inlined
/// into the hot path (no witness table, no existential box). Everything in which the kinds
/// differ is a member below, each a `switch` with no `default`: HTTP/3 arrived as a third case,
/// and the package did not compile until each member said what it does (docs/architecture.md's table lists them; `ArchitectureDocsTests` checks it does).
/// The HTTP/1.1-only fast paths (splice, `writeStraight`, the h2c preface) reach the
/// connection itself (`connection`) and say so where they do.
///
/// The links are unowned: the downstream owns its exchange (`HTTP1Connection.exchange`,
/// `HTTP2Stream.exchange`, `HTTP3Stream.exchange`) and outlives it.
enum Downstream {
    case connection(Link<HTTP1Connection>)
    case stream(Link<HTTP2Stream>)
    case quicStream(Link<HTTP3Stream>)
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

    /// The HTTP/1.1 connection, for its own fast paths (nil for any other kind).
    var connection: HTTP1Connection? {
        if case .connection(let c) = self { return c.retained }
        return nil
    }
}

/// Where the kinds differ: each member an exhaustive switch (see the type's comment).
extension Downstream {
    /// Whether the downstream carries one request (an HTTP/2 stream) rather than one after
    /// another: no keep-alive, no body left to drop, no lingering of its own (`Exchange.isStream`).
    var carriesOneRequest: Bool {
        switch self {
        case .connection, .detached: return false
        case .stream, .quicStream: return true
        }
    }

    /// Whether a response body of no known length is re-framed as chunks for an HTTP/1.1
    /// client (so that its connection outlives the body); a stream's body ends with END_STREAM.
    var chunksBodies: Bool {
        @inline(__always) get {
            switch self {
            case .connection, .detached: return true
            case .stream, .quicStream: return false
            }
        }
    }

    /// Whether the exchange moves to a reloaded configuration at a request boundary: a
    /// connection does; a stream stays on its connection's (which sends GOAWAY on a reload).
    var followsReloads: Bool {
        @inline(__always) get {
            switch self {
            case .connection, .detached: return true
            case .stream, .quicStream: return false
            }
        }
    }

    /// The protocol as ALPN names it, for the access log.
    func protocolName(http10: Bool) -> StaticString {
        switch self {
        case .connection, .detached: return http10 ? "http/1.0" : "http/1.1"
        case .stream: return "h2"
        case .quicStream: return "h3"
        }
    }

    /// Writes a response head in the downstream's own form: HTTP/1.1 text into the exchange's
    /// output (a detached exchange's too, where a test reads it), or fields for the stream's
    /// HEADERS, submitted when it flushes. `composer` says what the head says, once for all
    /// kinds; it is specialised per writer.
    @inline(__always)
    func writeHead<C: ResponseHeadComposer>(_ composer: C, for x: ClientExchange, http10: Bool) {
        switch self {
        case .connection, .detached:
            var writer = HTTP1HeadWriter(into: x.output, http10: http10)
            composer.compose(into: &writer, for: x)
            x.output = writer.out
        case .stream(let s):
            var writer = StreamHeadWriter()
            composer.compose(into: &writer, for: x)
            // Counted now, as an HTTP/1.1 head is once in `output`: the access line may be
            // written before the stream flushes its heads.
            x.bytesOut += UInt64(writer.byteCount)
            s.with { $0.heads.append(writer) }
        case .quicStream(let s):
            var writer = StreamHeadWriter()
            composer.compose(into: &writer, for: x)
            x.bytesOut += UInt64(writer.byteCount)
            s.with { $0.heads.append(writer) }
        }
    }

    /// The exchange's response is complete in its output and the exchange says the downstream
    /// ends it (`Exchange.AfterResponse.endStream`): END_STREAM follows its last byte. An
    /// HTTP/1.1 connection's responses end in the exchange (keep-alive or close), never here.
    func endResponse() {
        switch self {
        case .stream(let s): s.retained.responseFinished()
        case .quicStream(let s): s.retained.responseFinished()
        case .connection, .detached: assertionFailure("only a stream ends its response itself")
        }
    }

    /// When the exchange's timer passes (monotonic nanoseconds; 0: none).
    var deadline: UInt64 {
        @inline(__always) get {
            switch self {
            case .connection(let c): return c.with { $0.deadline }
            case .stream(let s): return s.with { $0.deadline }
            case .quicStream(let s): return s.with { $0.deadline }
            case .detached: return 0
            }
        }
        @inline(__always) nonmutating set {
            switch self {
            case .connection(let c): c.with { $0.deadline = newValue }
            case .stream(let s): s.with { $0.deadline = newValue }
            case .quicStream(let s): s.with { $0.deadline = newValue }
            case .detached: break
            }
        }
    }

    @inline(__always)
    func want(read: Bool, write: Bool) {
        switch self {
        case .connection(let c): c.with { $0.want(read: read, write: write) }
        case .stream(let s): s.with { $0.want(read: read, write: write) }
        case .quicStream(let s): s.with { $0.want(read: read, write: write) }
        case .detached: break
        }
    }

    @inline(__always)
    func flush() {
        switch self {
        case .connection(let c): c.with { $0.flush() }
        case .stream(let s): s.with { $0.flush() }
        case .quicStream(let s): s.with { $0.flush() }
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
        case .quicStream(let s): s.retained.exchangeClosed()
        case .detached: break
        }
    }
}
