// Parsed HTTP/1.x message heads. Every field is an offset range into the buffer
// the parser was given, so parsing allocates nothing once the header storage
// has reached its working capacity (it is reused across requests on a connection).

/// A half-open range of byte offsets into the buffer that was parsed.
public struct ByteRange: Sendable, Equatable {
    public var start: Int
    public var count: Int
    public init(start: Int, count: Int) { self.start = start; self.count = count }
    public static let empty = ByteRange(start: 0, count: 0)
    public var end: Int { start + count }
}

public struct HeaderField: Sendable, Equatable {
    /// The field name as sent (case preserved).
    public var name: ByteRange
    /// The field value with leading and trailing OWS removed.
    public var value: ByteRange
    public init(name: ByteRange, value: ByteRange) { self.name = name; self.value = value }
}

public enum HTTPVersion: Sendable, Equatable {
    case http10, http11
}

public enum HTTPMethod: Sendable, Equatable {
    case get, head, post, put, delete, options, patch, connect, trace, other

    /// RFC 9110 §9.2.2: a failed attempt may be retried automatically.
    public var isIdempotent: Bool {
        switch self {
        case .get, .head, .put, .delete, .options, .trace: return true
        case .post, .patch, .connect, .other: return false
        }
    }
}

/// How the message body is delimited (RFC 9112 §6.3).
public enum BodyFraming: Sendable, Equatable {
    case none
    case contentLength(UInt64)
    case chunked
    /// Responses only: the body runs until the upstream closes the connection.
    case untilClose
}

/// A refusal with the status the client should see and a short reason for logs and the body.
public struct HTTPParseError: Error, Sendable, Equatable {
    public var status: Int
    public var reason: String
    public init(status: Int, reason: String) { self.status = status; self.reason = reason }
}

public enum HeadParseResult: Sendable, Equatable {
    /// No complete head yet and the limits are not exceeded: read more.
    case incomplete
    /// A complete, valid head of `headLength` bytes (including the final CRLF CRLF).
    case complete(headLength: Int)
    case error(HTTPParseError)
}

public struct HTTPLimits: Sendable, Equatable {
    /// Longest request line (method SP target SP version), excluding CRLF; beyond it: 414.
    public var maxRequestLine: Int = 8192
    /// Largest head (request/status line plus all fields plus CRLFs); beyond it: 431 (502 upstream).
    public var maxHeadBytes: Int = 32768
    /// Most header fields in one head; beyond it: 431.
    public var maxHeaderCount: Int = 100
    public init() {}
}

/// A parsed request head. Reuse one instance per connection: `headers` keeps its capacity.
public struct RequestHead: Sendable {
    public var method: HTTPMethod = .get
    public var methodRange: ByteRange = .empty
    public var target: ByteRange = .empty
    /// The path-and-query to forward upstream: the whole target for origin-form and `*`;
    /// for absolute-form the part after the authority, which may be empty (write `/`) or,
    /// for `http://host?q`, start with `?` (write `/` before it); for CONNECT the authority-form target.
    public var path: ByteRange = .empty
    /// `path` without its query: what `PathCanonicalizer` read.
    public var pathOnly: ByteRange = .empty
    /// The canonical path when the bytes at `pathOnly` are not canonical (`%61dmin`, `//x`,
    /// `/a/../b`, or empty for `http://host`); empty when they are — the common case, which
    /// copies nothing. Either way, this is the path every phase sees and the one forwarded.
    public var canonicalPath: [UInt8] = []
    /// What the canonical path holds that servers read differently (see `PathReadings`).
    public var pathTraits: PathTraits = []
    /// The `host[:port]` of an absolute-form target; nil for every other form.
    public var authority: ByteRange? = nil
    public var version: HTTPVersion = .http11
    public var headers: [HeaderField] = []
    public var framing: BodyFraming = .none
    /// Whether the connection may carry another request after this one (version default + `Connection`).
    public var keepAlive: Bool = true
    /// `Expect: 100-continue` was sent (any other expectation is refused with 417 by the parser).
    public var expectContinue: Bool = false
    /// `Connection: upgrade` together with an `Upgrade` field.
    public var upgrade: Bool = false
    /// Index into `headers` of the single `Host` field, if any.
    public var hostIndex: Int? = nil
    /// Tokens listed in `Connection` fields (other than close/keep-alive/upgrade): hop-by-hop names to drop.
    public var connectionTokens: [ByteRange] = []
    public init() {}
}

/// A parsed response head.
public struct ResponseHead: Sendable {
    public var version: HTTPVersion = .http11
    public var status: Int = 0
    /// The reason phrase (may be empty).
    public var reason: ByteRange = .empty
    public var headers: [HeaderField] = []
    public var framing: BodyFraming = .none
    public var keepAlive: Bool = true
    public var connectionTokens: [ByteRange] = []
    public init() {}
}

/// One step of chunked-body decoding.
public enum ChunkedEvent: Sendable, Equatable {
    /// Body bytes at this range of the input.
    case data(ByteRange)
    /// The input ran out in the middle of framing; call again with more bytes.
    case needMore
    /// The last chunk and its trailer section have been consumed.
    case end
    case error(HTTPParseError)
}
