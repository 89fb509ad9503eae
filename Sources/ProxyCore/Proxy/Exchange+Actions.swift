/// What the connection does after a transition of its `Exchange`: small values the shell
/// switches on (no payload beyond an error, so returning one costs a register).
extension Exchange {
    /// Which timer a connection runs (one at a time; chosen by the machine, `Exchange+Timer.swift`).
    enum Deadline {
        case none
        /// A request head is arriving (started with its first bytes).
        case header
        /// A request body is arriving.
        case body
        /// Idle between requests.
        case keepAlive
        /// Output waits for a client that does not read.
        case send
        /// The lingering close's reads.
        case linger
    }

    /// The `Connection` field of a response head.
    enum ConnectionField: Equatable {
        /// None (HTTP/1.1's default), or `keep-alive` for an HTTP/1.0 client.
        case keepAlive
        case close
        /// A 101's `Connection: upgrade`.
        case upgrade
    }

    /// What follows a complete response.
    enum AfterResponse: Equatable {
        /// Wait for the next request; it may already be buffered.
        case readNext
        /// Read and drop the request body's rest, then the next request (`bodyDiscarded`).
        case discardBody
        /// Write what is left, then the lingering close (or the close: `outputWritten`).
        case close
        /// An HTTP/2 stream: END_STREAM follows the response's last byte.
        case endStream
    }

    /// How a response the proxy makes itself goes out.
    enum LocalAnswer: Equatable {
        case send(ConnectionField)
        /// Part of a response is out already: cutting the connection is the only honest signal left.
        case abort(EngineError)
    }

    /// What the client's end of input (or its hangup) means.
    enum ClientEnd: Equatable {
        /// Close now; nothing is in flight (or only the lingering close was).
        case close
        /// Cut the request in flight.
        case abort(EngineError)
        /// A tunnel's client finished sending: pass its end on to the upstream, keep relaying.
        case halfCloseTunnel
    }

    /// What a passed deadline means.
    enum TimeoutAction: Equatable {
        case none
        /// Answer with the error (a refusal: the connection closes after it).
        case refuse(EngineError)
        /// Give up on the upstream, if any, and answer with the error.
        case failRequest(EngineError)
        /// Cut the connection with the request in flight.
        case abort(EngineError)
        /// Close; nothing worth saving is in flight.
        case close
    }

    /// What to do once the output is all written.
    enum AfterWrite: Equatable {
        case none
        /// Shut the write side and read until the client's FIN.
        case linger
        case close
    }
}
