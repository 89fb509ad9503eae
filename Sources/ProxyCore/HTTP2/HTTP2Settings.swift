/// HTTP/2 to clients: what a listener advertises and the limits against abusive peers. (Whether
/// a TLS listener offers `h2` at all is `TLSServerSettings.http2`: ALPN is the TLS context's.)
///
/// nghttp2 (Debian's 1.52.0 with its security backports) enforces most of these itself; each
/// is set explicitly so that the value is ours, visible and configurable:
/// - concurrent streams: `SETTINGS_MAX_CONCURRENT_STREAMS`; a stream beyond it is refused
///   (`RST_STREAM REFUSED_STREAM`) and the connection goes on; past twice the limit at once,
///   a connection error (`HTTP2Connection+Limits`);
/// - rapid reset (CVE-2023-44487): a token bucket on the client's `RST_STREAM`s
///   (`nghttp2_option_set_stream_reset_rate_limit`, backported to 1.52.0-1+deb12u1); empty →
///   `GOAWAY INTERNAL_ERROR` (nghttp2's choice of code). Streams reset in the same read as they were opened never reach
///   the exchange at all (streams start after the whole read is processed);
/// - CONTINUATION floods (CVE-2024-28182): at most `maxContinuations` per header block
///   (backported in 1.52.0-1+deb12u2; the session ends without a GOAWAY); the header list is also capped by `HTTP2Stream.headerListLimit`
///   while it is decoded, so a bomb never accumulates;
/// - SETTINGS and PING floods: at most `maxOutboundAcks` unsent ACKs queued (the peer does not
///   read), at most 32 entries per SETTINGS frame;
/// - control-frame floods from a peer that does read (SETTINGS, PING, PRIORITY, WINDOW_UPDATE,
///   RST_STREAM, empty frames): ours, not nghttp2's — a budget of `glitchBurst` refilled at
///   `glitchesPerSecond` (`HTTP2FrameGuard`), HAProxy's "glitches";
/// - HPACK bombs: the decoder's table is our `SETTINGS_HEADER_TABLE_SIZE` (4,096), and every
///   decoded field counts towards the header list limit (RFC 9113 §6.5.2's size: name + value + 32).
public struct HTTP2Settings: Sendable, Equatable {
    /// Accept prior-knowledge HTTP/2 in the clear (`h2c`, RFC 9113 §3.3) on plain listeners, for a
    /// TLS-terminating balancer in front. HTTP/1.1 keeps working on the same port. Off by default.
    public var cleartext = false
    /// `SETTINGS_MAX_CONCURRENT_STREAMS`.
    public var maxConcurrentStreams: UInt32 = 128
    /// The window a stream's request body may fill before the upstream takes it
    /// (`SETTINGS_INITIAL_WINDOW_SIZE`). Window updates follow what the upstream consumed.
    public var streamWindow: UInt32 = 256 * 1024
    /// The connection's window: bounds what one connection's streams buffer in all.
    public var connectionWindow: UInt32 = 1024 * 1024
    /// Rapid reset: client `RST_STREAM`s allowed in a burst, then per second.
    public var resetBurst: UInt64 = 1000
    public var resetsPerSecond: UInt64 = 33
    /// CONTINUATION frames after one HEADERS frame.
    public var maxContinuations = 8
    /// Queued SETTINGS/PING acknowledgements before nghttp2 ends the session (no GOAWAY). It is
    /// the backstop for a peer that floods and reads nothing; set well above `glitchBurst` so
    /// that a flood from a peer that does read meets the frame guard first, and its GOAWAY
    /// ENHANCE_YOUR_CALM, metric and log line (at 1,000 each, the two raced). A peer that
    /// reads nothing is dropped after `timeouts.client_send` anyway.
    public var maxOutboundAcks = 10_000
    /// Frames that cost work and carry no request (SETTINGS, PING, PRIORITY, RST_STREAM,
    /// WINDOW_UPDATE, unknown types, empty DATA/HEADERS/CONTINUATION that end nothing) allowed at
    /// once, then per second (`HTTP2FrameGuard`); past them, `GOAWAY ENHANCE_YOUR_CALM`.
    public var glitchBurst = 1000
    public var glitchesPerSecond = 100

    public init() {}
}
