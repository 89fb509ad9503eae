/// HTTP/3 to clients (`http3:`): QUIC on UDP beside each TLS listener, with the same certificate
/// and the same port. Off by default and experimental, as nginx's QUIC module is. Sockets are
/// bound at start, so turning it on or off, like a listener's address, needs a restart.
///
/// The limits are the transport parameters a client is told (RFC 9000 §18.2) — enforced by
/// ngtcp2, which closes a connection that exceeds them with `FLOW_CONTROL_ERROR` or
/// `STREAM_LIMIT_ERROR` — and what nghttp3 is told (`SETTINGS_MAX_FIELD_SECTION_SIZE`, no QPACK
/// dynamic table).
public struct HTTP3Settings: Sendable, Equatable {
    /// Serve HTTP/3 on each TLS listener's address (UDP) and advertise it with `Alt-Svc`.
    public var enabled = false
    /// `initial_max_streams_bidi`: request streams a client may have open at once; more are
    /// blocked by QUIC's own stream credit, which is given back as streams end.
    public var maxStreams = 100
    /// `initial_max_stream_data_bidi_remote`: request-body bytes one stream may send ahead of
    /// what the upstream has taken.
    public var streamWindow = 256 * 1024
    /// `initial_max_data`: the same for all of a connection's streams together.
    public var connectionWindow = 1024 * 1024
    /// `max_idle_timeout`: a connection with nothing sent or received for this long ends
    /// silently (RFC 9000 §10.1), nanoseconds.
    public var idleTimeout: UInt64 = 30 * 1_000_000_000
    /// When a new connection must first prove its address with a Retry round trip.
    public var retry = QUICRetryPolicy()
    /// `Alt-Svc: h3=":PORT"; ma=…` on TLS responses, seconds.
    public var altSvcMaxAge = 86_400
    /// Accept requests in early data (0-RTT) from returning clients: a round trip saved, at the
    /// price of requests an attacker could replay. Only safe methods are served from it, never
    /// an endpoint of the OAuth layer (425 Too Early: `EarlyData`); the app sees `Early-Data: 1`.
    public var earlyData = false
    /// Packets that bring nothing new, streams the client resets, connection IDs it retires:
    /// allowed at once on one connection (`QUICWorkGuard`); past them it ends with
    /// H3_EXCESSIVE_LOAD. The same defaults as HTTP/2's frame budget.
    public var glitchBurst = 1000
    /// How fast that budget refills.
    public var glitchesPerSecond = 100

    public init() {}
}
