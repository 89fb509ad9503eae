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
    /// Streams refused (`REFUSED_STREAM`) because the client opened more than `max_concurrent_streams`.
    let refusedOverLimit: Counter
    /// Connections ended on a protocol error, nghttp2's or `HTTP2FrameGuard`'s (floods included).
    let connectionErrors: Counter
    private let frameRules: [Counter]
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
        refusedOverLimit = registry.counter("callback_proxy_http2_streams_over_limit_total",
                                            "HTTP/2 streams refused (REFUSED_STREAM) because the client had http2.max_concurrent_streams open.").labels()
        let rules = registry.counter("callback_proxy_http2_frame_rule_errors_total",
                                     "HTTP/2 connections ended because the client broke a frame rule, by rule.", labels: ["rule"])
        frameRules = HTTP2Metrics.ruleLabels.map { rules.labels($0) }
        connectionErrors = registry.counter("callback_proxy_http2_connection_errors_total",
                                            "HTTP/2 connections ended on a protocol error (floods included).").labels()
        let family = registry.counter("callback_proxy_http2_goaways_sent_total", "GOAWAY frames sent, by error code.",
                                      labels: ["code"])
        goaways = HTTP2Metrics.codes.map { family.labels($0) }
    }

    private static let rules: [HTTP2FrameGuard.Reason: Int] = [.flood: 0, .closedStream: 1, .reusedStreamID: 2, .priorityOnConnection: 3]
    private static let ruleLabels = ["flood", "closed_stream", "reused_stream_id", "priority_on_stream_0"]

    func frameRuleBroken(_ reason: HTTP2FrameGuard.Reason) {
        frameRules[HTTP2Metrics.rules[reason]!].increment()
    }

    func goaway(code: UInt32) {
        goaways[Int(min(code, UInt32(HTTP2Metrics.codes.count - 1)))].increment()
    }
}
