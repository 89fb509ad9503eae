/// What an `HTTP3Stream` asks of the connection it is a stream of: its loop and settings, the
/// library calls made on the stream's behalf, and the lists its connection runs once the library
/// has returned (`HTTP3Connection`, "Re-entrancy").
///
/// `HTTP3Connection` is the one host in the product: its members below call ngtcp2 and nghttp3.
/// A unit test hosts a stream with neither (`HTTP3StreamTests`), and so drives the stream and its
/// exchange — the rewrite, the phases, the upstream, the response heads, the body under the
/// unacknowledged-bytes limit, resets — with no QUIC and no socket.
///
/// An existential, not a generic parameter: `Downstream.quicStream` names one stream type. Its
/// calls are a few per request, next to a QUIC packet's encryption.
protocol HTTP3StreamHost: AnyObject {
    var loop: EventLoop { get }
    /// The configuration the stream runs on (its connection's).
    var listener: ListenerContext { get }
    var peer: PeerAddress { get }
    /// The peer address as text, shared by the connection's streams.
    var peerTextCache: [UInt8] { get }
    /// Our QPACK streams are open: nghttp3 takes responses only then.
    var streamsBound: Bool { get }

    // MARK: Calls into the libraries

    /// nghttp3 takes an informational (1xx) head; false if it refused it.
    func submitInformational(_ head: StreamHeadWriter, on stream: Int64) -> Bool
    /// nghttp3 takes the final head, with a body it pulls (`HTTP3Stream.pullBody`) or with FIN
    /// on HEADERS; false if it refused it.
    func submitResponse(_ head: StreamHeadWriter, withBody: Bool, on stream: Int64) -> Bool
    /// nghttp3 asks for body bytes again (it stopped after `pullBody` had none).
    func resumeBody(_ stream: Int64)
    /// The client gets back `bytes` of flow-control credit on the stream and the connection.
    func credit(_ stream: Int64, bytes: Int)
    /// Both directions are reset with `code`.
    func resetStream(_ stream: Int64, code: UInt64)
    /// The client is told to stop sending the request body (STOP_SENDING, H3_NO_ERROR).
    func stopReading(_ stream: Int64)
    /// Something is ready to send.
    func scheduleWrite()

    // MARK: What the connection runs after the library returns

    /// Request bytes arrived for `stream`: it runs (`HTTP3Stream.run`) with the next batch.
    func markPending(_ stream: HTTP3Stream)
    /// Its response waits for `streamsBound`; it flushes again then.
    func holdForStreams(_ stream: HTTP3Stream)
    /// nghttp3 emptied its output: its upstream may be read again (`HTTP3Stream.outputDrained`).
    func markDrained(_ stream: HTTP3Stream)
    /// Its response ended before its request body: `stopReading` follows.
    func markEndedEarly(_ stream: HTTP3Stream)
    /// nghttp3 closed it: it leaves the connection's table and gives back its budget unit.
    func streamClosed(_ stream: HTTP3Stream)
}
