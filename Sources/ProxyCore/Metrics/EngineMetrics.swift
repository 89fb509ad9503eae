/// What a request was, for `callback_proxy_requests_total{route}`. The engine knows whether it
/// went upstream; the phases name the routes they own (`HTTPPhases.route`).
public enum RequestRoute: Int, Sendable, CaseIterable {
    /// Sent to the upstream.
    case proxied
    /// The `/_oauth_callback` contract (including a relay forward to the app's callback).
    case callback
    /// The proxy's other sign-in endpoints (`/_oauth/…`).
    case oauth
    /// The internal listener (health, metrics, relay token endpoint).
    case `internal`
    /// Answered by the proxy itself: malformed HTTP, limits, the HTTPS redirect.
    case local

    var label: String {
        switch self {
        case .proxied: return "proxied"
        case .callback: return "callback"
        case .oauth: return "oauth"
        case .internal: return "internal"
        case .local: return "local"
        }
    }
}

/// The engine's metrics. Every series the request path touches is looked up here, once.
public final class EngineMetrics: Sendable {
    public let registry: MetricsRegistry
    /// [route][status / 100 - 1]
    private let requests: [[Counter]]
    /// [status - 502]: 502, 503, 504
    private let gatewayErrors: [Counter]
    let upstreamResponse: Histogram
    private let open: MetricFamily<Gauge>
    private let accepted: MetricFamily<Counter>
    private let tlsFailures: MetricFamily<Counter>
    private let tlsHandshakes: MetricFamily<Counter>
    private let acceptPauses: MetricFamily<Counter>
    let http2: HTTP2Metrics
    let http3: HTTP3Metrics
    let compression: CompressionMetrics
    let clientLimits: ClientLimitMetrics
    /// `callback_proxy_client_access_refusals_total{rule}`: requests `client_access` refused.
    let clientAccessRefusals: MetricFamily<Counter>
    /// `callback_proxy_maintenance{listener}`: 1 while the listener's maintenance page is on.
    let maintenance: MetricFamily<Gauge>

    public init(registry: MetricsRegistry) {
        self.registry = registry
        let family = registry.counter("callback_proxy_requests_total",
                                      "Requests answered, by route and status class.", labels: ["route", "code_class"])
        requests = RequestRoute.allCases.map { route in
            (1...5).map { family.labels(route.label, "\($0)xx") }
        }
        let gateway = registry.counter("callback_proxy_gateway_errors_total",
                                       "Proxied requests the proxy answered itself because the upstream failed (502), had no server available (503) or timed out (504).",
                                       labels: ["status"])
        gatewayErrors = (502...504).map { gateway.labels(String($0)) }
        upstreamResponse = registry.histogram(
            "callback_proxy_upstream_response_seconds",
            "From sending a request upstream (connect included) to receiving the response head.").labels()
        open = registry.gauge("callback_proxy_open_connections", "Client connections open now.", labels: ["listener"])
        accepted = registry.counter("callback_proxy_connections_total", "Client connections accepted.", labels: ["listener"])
        tlsFailures = registry.counter("callback_proxy_tls_handshake_failures_total",
                                       "TLS handshakes that failed or timed out (plaintext on a TLS port included).",
                                       labels: ["listener"])
        tlsHandshakes = registry.counter("callback_proxy_tls_handshakes_total",
                                         "TLS handshakes completed, by whether the client resumed a session (a ticket).",
                                         labels: ["listener", "session"])
        acceptPauses = registry.counter("callback_proxy_accept_pauses_total",
                                        "Times a listener stopped accepting for a moment: out of file descriptors or memory.",
                                        labels: ["listener"])
        http2 = HTTP2Metrics(registry: registry)
        http3 = HTTP3Metrics(registry: registry)
        compression = CompressionMetrics(registry: registry)
        clientLimits = ClientLimitMetrics(registry: registry)
        maintenance = registry.gauge("callback_proxy_maintenance",
                                     "1 while the listener answers 503 with its maintenance page (maintenance.file exists).",
                                     labels: ["listener"])
        clientAccessRefusals = registry.counter("callback_proxy_client_access_refusals_total",
                                                "Requests refused by client_access (an address rule on their paths), by rule.",
                                                labels: ["rule"])
    }

    func listener(_ name: String) -> ListenerMetrics {
        ListenerMetrics(open: open.labels(name), accepted: accepted.labels(name), tlsFailures: tlsFailures.labels(name),
                        tlsNew: tlsHandshakes.labels(name, "new"), tlsResumed: tlsHandshakes.labels(name, "resumed"),
                        acceptPauses: acceptPauses.labels(name))
    }

    /// A response was sent (status 0 — nothing sent, the peer went first — is not counted).
    @inline(__always) func request(_ route: RequestRoute, status: Int) {
        let cls = status / 100
        guard cls >= 1 && cls <= 5 else { return }
        requests[route.rawValue][cls - 1].increment()
    }

    /// A proxied request the engine answered with its own 502/503/504 (`EngineError`), as
    /// opposed to a 5xx the upstream sent: the first is the proxy's path to the app failing.
    @inline(__always) func gatewayError(status: Int) {
        guard status >= 502 && status <= 504 else { return }
        gatewayErrors[status - 502].increment()
    }
}

struct ListenerMetrics: Sendable {
    let open: Gauge
    let accepted: Counter
    let tlsFailures: Counter
    /// Completed handshakes: full ones, and resumed ones (a fleet whose `tls.session_ticket_keys`
    /// differ between machines shows up as `resumed` staying near 0).
    let tlsNew: Counter
    let tlsResumed: Counter
    let acceptPauses: Counter
}
