/// Why the engine refused, failed or cut a request: what went wrong, on which side, and whether
/// sending the same request again may help (after Pingora's `pingora-error`: a kind, a source, a
/// retry flag). A client gets `status` when no response has begun — and, for a 4xx, `reason`;
/// a 5xx's reason names inside things (upstream addresses, errno texts) and goes to the log
/// only. The access log carries `name` and `source` (`AccessRecord.error`).
///
/// Built only when something fails: the `reason` string costs nothing on the request path.
public struct EngineError: Error, Sendable, Equatable {
    /// Whose fault or whose doing.
    public enum Source: Sendable, Equatable {
        /// The client's request was refused, or the client left or stalled.
        case client
        /// The upstream could not be reached, failed, or answered something unusable.
        case upstream
        /// The proxy itself could not go on (a state it cannot honestly continue from).
        case proxy
    }

    enum Code: Sendable, Equatable {
        // A request refused before anything went upstream (4xx).
        case invalidHead, headTimeout, bodyTooLarge, bodyWithoutLength, methodNotSupported, invalidBody, bodyStalled,
             rateLimited, addressRefused, internalLocation, tooEarly
        // The client left or failed mid-request (the connection is cut; nothing is sent).
        case clientClosed, clientSocketError, clientReadFailed, clientWriteFailed, clientBodyTimeout,
             clientSendTimeout, streamReset
        // The upstream (502/504 before the response began, a cut connection after).
        case upstreamUnreachable, upstreamUnavailable, upstreamConnectTimeout, upstreamResponseTimeout, upstreamFailed,
             upstreamClosedEarly, upstreamInvalidResponse, upstreamUnexpectedSwitch, upstreamInvalidBody,
             upstreamFailedMidResponse, upstreamClosedMidResponse, upstreamStalled,
             accelFileNotFound, accelRedirectUnmapped
        // The proxy: an answer it cannot send any more (part of a response is already out);
        // the operator's maintenance page.
        case answerAfterResponseStarted, invalidStreamHead, compressionFailed, staticReadFailed, underMaintenance
    }

    let code: Code
    /// The status the client gets when no response has begun; 0 where the connection is cut.
    public let status: Int
    /// For the logs (and a 4xx's body): what exactly happened.
    public let reason: String
    /// `Retry-After` for a refusal that says when to come back (429).
    public var retryAfterSeconds: Int? = nil

    init(_ code: Code, status: Int = 0, _ reason: String) {
        self.code = code
        self.status = status
        self.reason = reason
    }

    public var source: Source {
        switch code {
        case .invalidHead, .headTimeout, .bodyTooLarge, .bodyWithoutLength, .methodNotSupported, .invalidBody,
             .bodyStalled, .rateLimited, .addressRefused, .internalLocation, .tooEarly, .clientClosed, .clientSocketError, .clientReadFailed, .clientWriteFailed,
             .clientBodyTimeout, .clientSendTimeout, .streamReset:
            return .client
        case .upstreamUnreachable, .upstreamUnavailable, .upstreamConnectTimeout, .upstreamResponseTimeout, .upstreamFailed,
             .upstreamClosedEarly, .upstreamInvalidResponse, .upstreamUnexpectedSwitch, .upstreamInvalidBody,
             .upstreamFailedMidResponse, .upstreamClosedMidResponse, .upstreamStalled, .accelFileNotFound, .accelRedirectUnmapped:
            return .upstream
        case .answerAfterResponseStarted, .invalidStreamHead, .compressionFailed, .staticReadFailed, .underMaintenance:
            return .proxy
        }
    }

    /// Whether the same request, sent again (by the client, or by a load balancer in front), may
    /// succeed: the upstream was unreachable, slow, or went away before answering; the client was
    /// slow. Never for a refused request or for a response cut halfway (the app has seen it).
    public var retryable: Bool {
        switch code {
        case .upstreamUnreachable, .upstreamUnavailable, .upstreamConnectTimeout, .upstreamResponseTimeout, .upstreamFailed,
             .upstreamClosedEarly, .headTimeout, .bodyStalled, .tooEarly:
            return true
        default:
            return false
        }
    }

    /// What the proxy itself may do with a request after this error, before any response began
    /// (`UpstreamAttempt`): after Pingora's `RetryType`, the decision travels with the error.
    enum Resend: Equatable {
        /// Nothing reached the app (no connection opened): any request may go elsewhere, its
        /// body with it.
        case any
        /// The connection opened and closed (or failed) without an answer: the app may or may
        /// not have seen the request, so only one that is safe to repeat — idempotent, no body
        /// — may go again.
        case ifIdempotent
        /// The app has the request (it is slow, or answered something unusable), or there is
        /// nowhere to send it: answer with the error.
        case never
    }

    var resend: Resend {
        switch code {
        case .upstreamUnreachable, .upstreamConnectTimeout: return .any
        case .upstreamFailed, .upstreamClosedEarly: return .ifIdempotent
        default: return .never
        }
    }

    /// A stable snake_case name for the access log and metrics.
    public var name: StaticString {
        switch code {
        case .invalidHead: return "invalid_head"
        case .headTimeout: return "head_timeout"
        case .bodyTooLarge: return "body_too_large"
        case .bodyWithoutLength: return "body_without_length"
        case .methodNotSupported: return "method_not_supported"
        case .rateLimited: return "rate_limited"
        case .addressRefused: return "address_refused"
        case .internalLocation: return "internal_location"
        case .tooEarly: return "too_early"
        case .underMaintenance: return "under_maintenance"
        case .invalidBody: return "invalid_body"
        case .bodyStalled: return "body_stalled"
        case .clientClosed: return "client_closed"
        case .clientSocketError: return "client_socket_error"
        case .clientReadFailed: return "client_read_failed"
        case .clientWriteFailed: return "client_write_failed"
        case .clientBodyTimeout: return "client_body_timeout"
        case .clientSendTimeout: return "client_send_timeout"
        case .streamReset: return "stream_reset"
        case .upstreamUnreachable: return "upstream_unreachable"
        case .upstreamUnavailable: return "upstream_unavailable"
        case .upstreamConnectTimeout: return "upstream_connect_timeout"
        case .upstreamResponseTimeout: return "upstream_response_timeout"
        case .upstreamFailed: return "upstream_failed"
        case .upstreamClosedEarly: return "upstream_closed_early"
        case .upstreamInvalidResponse: return "upstream_invalid_response"
        case .upstreamUnexpectedSwitch: return "upstream_unexpected_switch"
        case .upstreamInvalidBody: return "upstream_invalid_body"
        case .upstreamFailedMidResponse: return "upstream_failed_mid_response"
        case .upstreamClosedMidResponse: return "upstream_closed_mid_response"
        case .upstreamStalled: return "upstream_stalled"
        case .accelFileNotFound: return "accel_file_not_found"
        case .accelRedirectUnmapped: return "accel_redirect_unmapped"
        case .answerAfterResponseStarted: return "answer_after_response_started"
        case .invalidStreamHead: return "invalid_stream_head"
        case .compressionFailed: return "compression_failed"
        case .staticReadFailed: return "static_read_failed"
        }
    }
}

extension EngineError.Source {
    var name: StaticString {
        switch self {
        case .client: return "client"
        case .upstream: return "upstream"
        case .proxy: return "proxy"
        }
    }
}

// MARK: The errors, one constructor each (the reason texts are the ones the logs have always had)

extension EngineError {
    // Refusals.
    static func invalidHead(_ e: HTTPParseError) -> EngineError { EngineError(.invalidHead, status: e.status, e.reason) }
    static func invalidHead(status: Int, _ reason: String) -> EngineError { EngineError(.invalidHead, status: status, reason) }
    static var headTimeout: EngineError { EngineError(.headTimeout, status: 408, "request head not received in time") }
    static func bodyTooLarge(limit: some BinaryInteger) -> EngineError {
        EngineError(.bodyTooLarge, status: 413, "request body larger than \(limit) bytes")
    }
    static var bodyWithoutLength: EngineError { EngineError(.bodyWithoutLength, status: 400, "request body without length") }
    /// A request that arrived in early data (0-RTT) and may not be served from it (RFC 8470):
    /// the client sends it again once the handshake is complete.
    static func tooEarly(_ why: String) -> EngineError { EngineError(.tooEarly, status: 425, "request in early data: \(why)") }
    static var connectNotSupported: EngineError { EngineError(.methodNotSupported, status: 501, "CONNECT is not supported") }
    /// The maintenance page is on (`maintenance.file` exists).
    static func underMaintenance(retryAfterSeconds: Int) -> EngineError {
        var e = EngineError(.underMaintenance, status: 503, "down for maintenance (maintenance.file exists)")
        e.retryAfterSeconds = retryAfterSeconds
        return e
    }

    /// `client_access` refused the client's address on this path (`rule`: which rule).
    static func addressRefused(rule: String) -> EngineError {
        // The rule's name is the operator's: it goes to the log line, not to the client.
        EngineError(.addressRefused, status: 403, "client address not allowed here")
    }

    static func rateLimited(_ reason: String, retryAfterSeconds: Int) -> EngineError {
        var e = EngineError(.rateLimited, status: 429, reason)
        e.retryAfterSeconds = retryAfterSeconds
        return e
    }
    /// The path is an `x_accel_redirect` location's: only the app's `X-Accel-Redirect` reaches it.
    static var internalLocation: EngineError { EngineError(.internalLocation, status: 404, "not found") }
    static func invalidBody(_ e: HTTPParseError) -> EngineError { EngineError(.invalidBody, status: e.status, e.reason) }
    static var bodyStalled: EngineError { EngineError(.bodyStalled, status: 408, "request body stalled") }

    // The client's side of a cut connection.
    static var clientClosed: EngineError { EngineError(.clientClosed, "client closed") }
    static var clientSocketError: EngineError { EngineError(.clientSocketError, "client socket error") }
    static var clientReadFailed: EngineError { EngineError(.clientReadFailed, "client read failed") }
    static var clientWriteFailed: EngineError { EngineError(.clientWriteFailed, "client write failed") }
    static var clientBodyTimeout: EngineError { EngineError(.clientBodyTimeout, "client body timeout") }
    static var clientSendTimeout: EngineError { EngineError(.clientSendTimeout, "client send timeout") }
    static var streamReset: EngineError { EngineError(.streamReset, "stream reset by the client") }

    // The upstream.
    /// Every upstream server is out (`upstream_health`): the engine's own 503.
    static var noUpstreamAvailable: EngineError {
        EngineError(.upstreamUnavailable, status: 503, "no upstream server available: every one is out (upstream_health; /readyz lists why)")
    }
    static func upstreamUnreachable(_ detail: String) -> EngineError {
        EngineError(.upstreamUnreachable, status: 502, "upstream unreachable (\(detail))")
    }
    static var upstreamConnectTimeout: EngineError { EngineError(.upstreamConnectTimeout, status: 504, "upstream connect timed out") }
    static var upstreamResponseTimeout: EngineError { EngineError(.upstreamResponseTimeout, status: 504, "upstream response timed out") }
    static func upstreamFailed(_ detail: String) -> EngineError { EngineError(.upstreamFailed, status: 502, "upstream failed: \(detail)") }
    static var upstreamClosedEarly: EngineError { EngineError(.upstreamClosedEarly, status: 502, "upstream closed without a response") }
    static func upstreamInvalidResponse(_ detail: String) -> EngineError {
        EngineError(.upstreamInvalidResponse, status: 502, "invalid upstream response: \(detail)")
    }
    static var upstreamUnexpectedSwitch: EngineError {
        EngineError(.upstreamUnexpectedSwitch, status: 502, "upstream switched protocols without an upgrade request")
    }
    static func upstreamInvalidBody(_ detail: String) -> EngineError { EngineError(.upstreamInvalidBody, "invalid upstream body: \(detail)") }
    static func upstreamFailedMidResponse(_ detail: String) -> EngineError {
        EngineError(.upstreamFailedMidResponse, "upstream failed mid-response: \(detail)")
    }
    static var upstreamClosedMidResponse: EngineError { EngineError(.upstreamClosedMidResponse, "upstream closed mid-response") }
    static var upstreamStalled: EngineError { EngineError(.upstreamStalled, "upstream stalled mid-response") }

    /// The upstream's `X-Accel-Redirect` names no file the location's root serves (missing, a
    /// directory, a dotfile, `..`, a symlink out of the root): a 404, as from nginx.
    static var accelFileNotFound: EngineError { EngineError(.accelFileNotFound, status: 404, "not found") }
    /// The upstream's `X-Accel-Redirect` names a URI under no location: the proxy cannot follow it.
    static var accelRedirectUnmapped: EngineError {
        EngineError(.accelRedirectUnmapped, status: 502, "X-Accel-Redirect names a URI under no x_accel_redirect location")
    }

    // The proxy.
    static var answerAfterResponseStarted: EngineError {
        EngineError(.answerAfterResponseStarted, "an answer came after the response had started")
    }
    static var invalidStreamHead: EngineError { EngineError(.invalidStreamHead, "response head cannot be sent over HTTP/2") }
    static var compressionFailed: EngineError { EngineError(.compressionFailed, "the response body could not be compressed") }
    /// A static file's body could not be read to the length its head promised (it shrank while
    /// it was sent, or the read failed): the connection is cut, as for an upstream cut midway.
    static func staticReadFailed(_ detail: String) -> EngineError { EngineError(.staticReadFailed, "static file read failed: \(detail)") }
}
