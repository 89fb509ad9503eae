import ProxyCore

/// What an outbound call is for: the `call` label of `callback_proxy_idp_request_seconds`.
public enum OutboundCall: String, Sendable {
    case token, jwks, userinfo, discovery
    case debugToken = "debug_token"
    /// A token request of the app's passed through the relay endpoint to the provider.
    case relayForward = "relay_forward"
    case other
}

/// An outbound HTTP request to an identity provider (token, JWKS, discovery, Graph API).
public struct OutboundRequest: Sendable {
    public var method: String
    public var url: String
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]
    /// Whole-call timeout in nanoseconds.
    public var timeout: UInt64
    /// Whether the request may be sent again after it was (possibly) delivered. Token requests
    /// are not: an authorization code is single-use, so only failures to *connect* are retried.
    public var idempotent: Bool
    public var call: OutboundCall

    public init(method: String = "GET", url: String, headers: [(name: String, value: String)] = [],
                body: [UInt8] = [], timeout: UInt64 = 10_000_000_000, idempotent: Bool = true, call: OutboundCall = .other) {
        self.call = call
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.timeout = timeout
        self.idempotent = idempotent
    }

    /// A form POST (`application/x-www-form-urlencoded`), never retried once sent.
    public static func form(url: String, fields: [(String, String)], headers: [(name: String, value: String)] = [],
                            timeout: UInt64 = 10_000_000_000, call: OutboundCall = .token) -> OutboundRequest {
        OutboundRequest(method: "POST", url: url,
                        headers: [("Content-Type", "application/x-www-form-urlencoded"), ("Accept", "application/json")] + headers,
                        body: Array(FormEncoding.encode(fields).utf8), timeout: timeout, idempotent: false, call: call)
    }
}

public struct OutboundResponse: Sendable {
    public var status: Int
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]

    public init(status: Int, headers: [(name: String, value: String)] = [], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// The first value of a header (name case-insensitive).
    public func header(_ name: String) -> String? {
        let lower = name.lowercased()
        return headers.first { $0.name.lowercased() == lower }?.value
    }
}

public struct OutboundError: Error, Sendable, CustomStringConvertible {
    public enum Kind: String, Sendable {
        /// Could not connect (DNS, refused, unreachable): nothing was sent.
        case connect
        /// The TLS handshake failed (reset, no common cipher, …).
        case tls
        /// The IdP's certificate did not verify against the configured trust, or the CA file
        /// could not be used: it stays so until a setting (or the IdP's certificate) changes.
        case certificate
        case timeout
        /// The peer answered something that is not HTTP, or the body was too large.
        case protocolError
        case internalError
    }
    public var kind: Kind
    /// Log-safe detail (no URLs with query strings, no bodies).
    public var detail: String

    public init(_ kind: Kind, _ detail: String) {
        self.kind = kind
        self.detail = detail
    }

    public var description: String { "\(kind.rawValue): \(detail)" }
}

/// Something that performs outbound calls without blocking the loop it is called on.
/// `completion` runs on `loop`'s thread exactly once, and never inside the call itself.
public protocol HTTPFetching: Sendable {
    func fetch(_ request: OutboundRequest, on loop: EventLoop,
               _ completion: @escaping (Result<OutboundResponse, OutboundError>) -> Void)
}

/// `application/x-www-form-urlencoded` (WHATWG URL §5.2): what token endpoints expect.
public enum FormEncoding {
    public static func encode(_ fields: [(String, String)]) -> String {
        fields.map { "\(escape($0.0))=\(escape($0.1))" }.joined(separator: "&")
    }

    static func escape(_ s: String) -> String {
        // Built as bytes: appending Characters one by one to a String cost ~90k instructions
        // per token request (bench/callbacks profile).
        let hex: StaticString = "0123456789ABCDEF"
        var out: [UInt8] = []
        out.reserveCapacity(s.utf8.count * 3)
        for b in s.utf8 {
            switch b {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."),
                 UInt8(ascii: "_"), UInt8(ascii: "*"):
                out.append(b)
            case UInt8(ascii: " "):
                out.append(UInt8(ascii: "+"))
            default:
                out.append(UInt8(ascii: "%"))
                out.append(hex.utf8Start[Int(b >> 4)])
                out.append(hex.utf8Start[Int(b & 0xF)])
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}
