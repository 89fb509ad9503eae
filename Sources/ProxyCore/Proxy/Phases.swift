/// The seam between the engine and whatever decides about requests (the OAuth layer, the
/// internal endpoints). In the spirit of Pingora's `ProxyHttp`: one protocol, a default for
/// every phase, decisions returned as enums. All phases run on the connection's event loop
/// and must not block it; slow work returns `.deferred` and answers through the sink.
public protocol HTTPPhases: Sendable {
    /// First, once per request whose head parsed: what the later phases need to know about it
    /// (which endpoint it is for, its metrics route), read back as `request.context`.
    func context(for request: borrowing RequestView) -> RequestContext
    /// Before anything is sent upstream. May answer directly.
    func requestFilter(_ request: borrowing RequestView) -> RequestDecision
    /// Edits to the head sent upstream (runs after the engine's own hop-by-hop and X-Forwarded-* work).
    func upstreamRequestFilter(_ request: borrowing RequestView, _ edits: inout HeaderEdits)
    /// Edits to the response head sent to the client.
    func responseFilter(_ request: borrowing RequestView, status: Int, _ edits: inout HeaderEdits)
    /// Once per request, after the response is done (or the connection failed).
    func logging(_ record: borrowing AccessRecord)
    /// Whether a request that arrived in early data (TLS 1.3 / QUIC 0-RTT, which an attacker
    /// can replay) may be served before the handshake completes. Asked only for the safe
    /// methods the engine would serve from it (`EarlyData`); false answers 425 Too Early
    /// (RFC 8470) and the client sends it again after the handshake.
    func acceptsEarlyData(_ request: borrowing RequestView) -> Bool
}

extension HTTPPhases {
    public func context(for request: borrowing RequestView) -> RequestContext { .none }
    public func requestFilter(_ request: borrowing RequestView) -> RequestDecision { .continue }
    public func upstreamRequestFilter(_ request: borrowing RequestView, _ edits: inout HeaderEdits) {}
    public func responseFilter(_ request: borrowing RequestView, status: Int, _ edits: inout HeaderEdits) {}
    public func logging(_ record: borrowing AccessRecord) {}
    public func acceptsEarlyData(_ request: borrowing RequestView) -> Bool { true }
}

/// What the phases learned about a request when its head arrived, kept with the request for
/// every phase after (Pingora's per-request `CTX`): `HTTPPhases.context(for:)` makes it once,
/// and the request, response and logging phases read it back (`RequestView.context`) instead of
/// matching the path again. Two bytes, so a request never allocates for it; what `endpoint`
/// numbers is the phases' own business.
public struct RequestContext: Sendable, Equatable {
    /// The metrics route of a request these phases own (`nil`: the engine's view — `proxied`
    /// when it went upstream, else `local`).
    public var route: RequestRoute?
    /// Which of the phases' endpoints the request is for, in their own numbering (0: none).
    public var endpoint: UInt8

    public init(route: RequestRoute? = nil, endpoint: UInt8 = 0) {
        self.route = route
        self.endpoint = endpoint
    }

    /// Nothing learned: a request the phases do not single out.
    public static let none = RequestContext()
}

/// What `requestFilter` decided.
public enum RequestDecision: Sendable {
    /// Proxy the request upstream.
    case `continue`
    /// Proxy it upstream with these changes (what the filter learned now — a session's
    /// identity headers — so that `upstreamRequestFilter` need not work it out again).
    case proceed(UpstreamRewrite)
    /// Answer now without contacting the upstream.
    case respond(Response)
    /// Answer later: the engine calls the closure once with a sink; the filter keeps the sink,
    /// does its slow work anywhere, and completes it exactly once from any thread.
    case deferred(@Sendable (ResponseSink) -> Void)
    /// Read the whole request body first (at most `limit` bytes, else 413), then continue as
    /// `.deferred` with the body. For small local endpoints (a token endpoint's form POST),
    /// never for proxied traffic.
    case collectBody(limit: Int, @Sendable ([UInt8], ResponseSink) -> Void)
}

/// A complete response produced by a phase (not the proxied path: small bodies only).
public struct Response: Sendable {
    public var status: Int
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]

    public init(status: Int, headers: [(name: String, value: String)] = [], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    public init(status: Int, contentType: String = "text/plain; charset=utf-8", text: String,
                headers: [(name: String, value: String)] = []) {
        self.init(status: status, headers: [("Content-Type", contentType)] + headers, body: Array(text.utf8))
    }
}

/// Header changes a phase asks for. Names compare case-insensitively.
public struct HeaderEdits: Sendable {
    public var remove: [String] = []
    /// Upstream requests only: also removes every field whose raw name this returns true for —
    /// for families of names (every case and `_`/`-` spelling) that a list would have to spell
    /// out and compare one by one. Keep the closure in a property: one made per request would
    /// allocate.
    public var removeMatching: (@Sendable (UnsafeRawBufferPointer) -> Bool)? = nil
    public var add: [(name: String, value: String)] = []
    public init() {}
    public var isEmpty: Bool { remove.isEmpty && add.isEmpty && removeMatching == nil }
}

/// How a deferred request continues upstream: optionally with another target (path and query)
/// and with header edits. Used by the relay hand-off, which forwards the app's own callback.
public struct UpstreamRewrite: Sendable {
    public var target: String?
    public var edits: HeaderEdits
    public init(target: String? = nil, edits: HeaderEdits = HeaderEdits()) {
        self.target = target
        self.edits = edits
    }
}

/// The completion handle of a deferred request. Thread-safe; the first completion wins and
/// later ones are ignored. If the client has gone, completing it does nothing.
public final class ResponseSink: Sendable {
    private let loop: EventLoop
    private let complete: @Sendable (DeferredOutcome) -> Void

    init(loop: EventLoop, complete: @escaping @Sendable (DeferredOutcome) -> Void) {
        self.loop = loop
        self.complete = complete
    }

    public func respond(_ response: Response) {
        let complete = self.complete
        loop.execute { complete(.respond(response)) }
    }

    public func proceed(_ rewrite: UpstreamRewrite = UpstreamRewrite()) {
        let complete = self.complete
        loop.execute { complete(.proceed(rewrite)) }
    }
}

enum DeferredOutcome: Sendable {
    case respond(Response)
    case proceed(UpstreamRewrite)
}
