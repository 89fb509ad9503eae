import CNghttp2

/// `callback_proxy_http2_*`: how much HTTP/2 is used and how often peers misbehave.
struct HTTP2Metrics: Sendable {
    let connections: Counter
    let streams: Counter
    /// Streams the client reset while their exchange was in flight.
    let resetsReceived: Counter
    /// Streams the proxy reset (an error code other than NO_ERROR).
    let resetsSent: Counter
    /// Streams that waited for a client-connection budget unit, and those of them refused
    /// (`REFUSED_STREAM`) after waiting `timeouts.client_header` (`HTTP2Connection+Admission`).
    let waitedForBudget: Counter
    let refusedAtBudget: Counter
    /// Connections nghttp2 ended on a protocol error (floods included).
    let connectionErrors: Counter
    private let goaways: [Counter]
    private static let codes = ["no_error", "protocol_error", "internal_error", "flow_control_error", "settings_timeout",
                                "stream_closed", "frame_size_error", "refused_stream", "cancel", "compression_error",
                                "connect_error", "enhance_your_calm", "inadequate_security", "http_1_1_required", "other"]

    init(registry: MetricsRegistry) {
        connections = registry.counter("callback_proxy_http2_connections_total", "Client connections that spoke HTTP/2.").labels()
        streams = registry.counter("callback_proxy_http2_streams_total", "HTTP/2 streams opened by clients.").labels()
        resetsReceived = registry.counter("callback_proxy_http2_stream_resets_received_total",
                                          "HTTP/2 streams the client reset before their response was complete.").labels()
        resetsSent = registry.counter("callback_proxy_http2_stream_resets_sent_total",
                                      "HTTP/2 streams the proxy reset with an error code.").labels()
        waitedForBudget = registry.counter("callback_proxy_http2_streams_waited_total",
                                           "HTTP/2 streams that waited to start because limits.max_connections was reached.").labels()
        refusedAtBudget = registry.counter("callback_proxy_http2_streams_refused_total",
                                           "HTTP/2 streams refused (REFUSED_STREAM) after waiting timeouts.client_header to start.").labels()
        connectionErrors = registry.counter("callback_proxy_http2_connection_errors_total",
                                            "HTTP/2 connections ended on a protocol error (floods included).").labels()
        let family = registry.counter("callback_proxy_http2_goaways_sent_total", "GOAWAY frames sent, by error code.",
                                      labels: ["code"])
        goaways = HTTP2Metrics.codes.map { family.labels($0) }
    }

    func goaway(code: UInt32) {
        goaways[Int(min(code, UInt32(HTTP2Metrics.codes.count - 1)))].increment()
    }
}
