/// `callback_proxy_http3_*`: how much HTTP/3 is used, and every datagram the proxy did not use,
/// by reason.
struct HTTP3Metrics: Sendable {
    enum DropReason: Int, CaseIterable {
        case malformed, notInitial, draining, connectionLimit, clientLimit, invalidToken, handshakeSetup, versionNegotiation
        case unknownConnection, sendFailed, receiveBufferFull

        var label: String {
            switch self {
            case .malformed: return "malformed"
            case .notInitial: return "not_initial"
            case .draining: return "draining"
            case .connectionLimit: return "connection_limit"
            case .clientLimit: return "client_limit"
            case .invalidToken: return "invalid_token"
            case .handshakeSetup: return "handshake_setup"
            case .versionNegotiation: return "version_negotiation"
            case .unknownConnection: return "unknown_connection"
            case .sendFailed: return "send_failed"
            case .receiveBufferFull: return "receive_buffer_full"
            }
        }
    }

    let connections: Counter
    let handshakesFailed: Counter
    let streams: Counter
    let datagramsReceived: Counter
    let packetsSent: Counter
    let bytesReceived: Counter
    let bytesSent: Counter
    let retriesSent: Counter
    let statelessResets: Counter
    /// Datagrams another loop's socket received for a connection of this loop (the client's
    /// address changed).
    let handedOver: Counter
    /// Streams the client reset while their exchange was in flight.
    let resetsReceived: Counter
    /// Streams that waited to start because limits.max_connections was reached, and those of
    /// them rejected (H3_REQUEST_REJECTED) after waiting timeouts.client_header.
    let waitedForBudget: Counter
    let refusedAtBudget: Counter
    /// Connections ended on a protocol error (ours or the client's CONNECTION_CLOSE with an error).
    let connectionErrors: Counter
    private let drops: [Counter]
    /// Datagrams that arrived coalesced by the kernel (UDP GRO), counted in `datagramsReceived` too.
    let coalesced: Counter
    /// Datagrams by their ECN mark: ECT(1), ECT(0), CE (index: the mark's value less one).
    private let ecn: [Counter]
    /// Connections ended with H3_EXCESSIVE_LOAD, by the glitch that emptied their budget.
    private let excessiveLoad: [Counter]

    init(registry: MetricsRegistry) {
        connections = registry.counter("callback_proxy_http3_connections_total", "QUIC connections accepted for HTTP/3.").labels()
        handshakesFailed = registry.counter("callback_proxy_http3_handshakes_failed_total",
                                            "QUIC connections that ended before their handshake completed.").labels()
        streams = registry.counter("callback_proxy_http3_streams_total", "HTTP/3 request streams opened by clients.").labels()
        datagramsReceived = registry.counter("callback_proxy_http3_datagrams_received_total", "UDP datagrams received on HTTP/3 sockets.").labels()
        packetsSent = registry.counter("callback_proxy_http3_packets_sent_total", "QUIC packets sent.").labels()
        bytesReceived = registry.counter("callback_proxy_http3_received_bytes_total", "UDP payload bytes received by QUIC connections.").labels()
        bytesSent = registry.counter("callback_proxy_http3_sent_bytes_total", "UDP payload bytes sent by QUIC connections.").labels()
        retriesSent = registry.counter("callback_proxy_http3_retries_sent_total",
                                       "Retry packets sent to make a new client prove its address (http3.retry).").labels()
        statelessResets = registry.counter("callback_proxy_http3_stateless_resets_sent_total",
                                           "Stateless resets sent for packets of connections no loop knows.").labels()
        handedOver = registry.counter("callback_proxy_http3_datagrams_handed_over_total",
                                      "Datagrams received on one loop's socket for a connection of another loop.").labels()
        resetsReceived = registry.counter("callback_proxy_http3_stream_resets_received_total",
                                          "HTTP/3 streams the client reset before their response was complete.").labels()
        waitedForBudget = registry.counter("callback_proxy_http3_streams_waited_total",
                                           "HTTP/3 streams that waited to start because limits.max_connections was reached.").labels()
        refusedAtBudget = registry.counter("callback_proxy_http3_streams_refused_total",
                                           "HTTP/3 streams rejected (H3_REQUEST_REJECTED) after waiting timeouts.client_header to start.").labels()
        connectionErrors = registry.counter("callback_proxy_http3_connection_errors_total",
                                            "QUIC connections ended on a protocol error.").labels()
        let family = registry.counter("callback_proxy_http3_datagrams_dropped_total", "Datagrams not used, by reason.", labels: ["reason"])
        drops = DropReason.allCases.map { family.labels($0.label) }
        coalesced = registry.counter("callback_proxy_http3_datagrams_coalesced_total",
                                     "Datagrams that arrived coalesced by the kernel (UDP GRO); counted in datagrams_received too.").labels()
        let marks = registry.counter("callback_proxy_http3_datagrams_ecn_total", "Datagrams received with an ECN mark, by mark.",
                                     labels: ["mark"])
        ecn = ["ect1", "ect0", "ce"].map { marks.labels($0) }
        let load = registry.counter("callback_proxy_http3_excessive_load_total",
                                    "QUIC connections ended with H3_EXCESSIVE_LOAD (http3.glitch_burst), by what spent the budget.",
                                    labels: ["glitch"])
        excessiveLoad = QUICWorkGuard.Glitch.allCases.map { load.labels($0.label) }
    }

    /// A datagram arrived with the ECN bits `mark` (1–3).
    func ecnMarked(_ mark: UInt8) {
        ecn[Int(mark & 3) - 1].increment()
    }

    func endedForLoad(_ glitch: QUICWorkGuard.Glitch) {
        excessiveLoad[glitch.rawValue].increment()
    }

    func dropped(_ reason: DropReason, count: Int = 1) {
        drops[reason.rawValue].increment(by: count)
    }
}
