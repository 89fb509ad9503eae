/// Response compression (`compression:` in the configuration): which codings, how hard, and
/// which responses. Off unless the section is there.
///
/// What is compressed: responses to GET (and other non-HEAD) requests over HTTP/1.1 or HTTP/2
/// whose client accepts a coding we offer (`Accept-Encoding`, q-values honoured), with a body
/// of at least `minLength` bytes (or of unknown length) and a `Content-Type` in `types`. Never:
/// a response that already has a `Content-Encoding`, says `Cache-Control: no-transform`, is a
/// 206, 204, 304 or 101, answers a HEAD, or lies under one of `excludePaths`; nor any HTTP/1.0
/// exchange (its body could only end with the connection, as nginx's `gzip_http_version 1.1`).
///
/// BREACH (a secret in a compressed body that also reflects attacker-chosen input leaks
/// through the body's length) is the application's to mitigate, as Rails and Django do by
/// masking their CSRF tokens per response; only text types are compressed by default, and
/// `excludePaths` keeps a route out entirely.
public struct CompressionSettings: Sendable, Equatable {
    /// The codings offered, in our order of preference when the client likes several equally.
    /// Empty: compression is off.
    public var codings: [ContentCoding] = []
    /// zlib's level for gzip (1 fastest … 9 smallest). 5, as Caddy: most of 9's gain for a
    /// third of its CPU on HTML.
    public var gzipLevel: Int32 = 5
    /// Brotli's quality (0 … 11). 4: about gzip 6's speed with smaller output; the higher
    /// qualities are for precompressed static files, not for responses made per request.
    public var brotliQuality: UInt32 = 4
    /// Bodies shorter than this (by their Content-Length) are sent as they are: their
    /// compressed form would save too little to pay for the coding.
    public var minLength: UInt64 = 512
    /// Media types compressed (`type/subtype`, or `type/*`), compared without parameters and
    /// ignoring case. Formats that are compressed already (images, video, archives) do not
    /// belong here.
    public var types: [String] = CompressionSettings.defaultTypes
    /// Paths never compressed (e.g. a page that reflects input next to a secret).
    public var excludePaths: [PathPrefix] = []
    /// The encoders' state all compressing responses may hold at once, for the process
    /// (`BodyEncoder.memory(for:sizeHint:)`: about 270 KiB for gzip, up to 2.5 MiB for Brotli).
    public var maxMemory = 256 << 20

    public static let defaultTypes = [
        "text/html", "text/css", "text/plain", "text/xml", "text/javascript", "text/markdown", "text/csv",
        "application/javascript", "application/json", "application/xml", "application/xhtml+xml",
        "application/rss+xml", "application/atom+xml", "application/ld+json", "application/manifest+json",
        "application/wasm", "image/svg+xml",
    ]

    public init() {}

    public var isEnabled: Bool { !codings.isEmpty }
}

/// A content coding the proxy can apply to a response body (RFC 9110 §8.4.1).
public enum ContentCoding: String, Sendable, Equatable, CaseIterable {
    /// Brotli (RFC 7932): `br`.
    case brotli = "br"
    /// gzip (RFC 1952): `gzip` (`x-gzip` in Accept-Encoding means the same).
    case gzip = "gzip"

    public var token: String { rawValue }
}
