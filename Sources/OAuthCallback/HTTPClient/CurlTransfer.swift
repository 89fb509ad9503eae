import CCurl
import ProxyCore

/// What every transfer of one `CurlClient` shares.
struct CurlOptions: Sendable {
    var caFile: String?
    var maxResponseBytes: Int
    var userAgent: String

    /// Cap on the response head (status line plus header lines). IdP responses carry a few
    /// hundred bytes of headers; this only stops a hostile or broken peer.
    static let maxHeaderBytes = 64 * 1024
    /// Connect phase (TCP plus TLS handshake) never takes longer than this, whatever the
    /// whole-call timeout, so a black-holed address leaves time for the retry.
    static let maxConnectNanoseconds: UInt64 = 5_000_000_000
}

/// One outbound request on one loop's multi handle, across its attempts (at most two).
/// Owns the easy handle, the header list and the error buffer; all of it lives on the
/// loop's thread.
final class CurlTransfer {
    let request: OutboundRequest
    let easy: CurlEasy
    private let headerList: CurlHeaderList
    /// CURLOPT_ERRORBUFFER: libcurl writes a human-readable reason here (no URL query, no body).
    private let errorBuffer: UnsafeMutablePointer<CChar>
    private let options: CurlOptions
    private var completion: ((Result<OutboundResponse, OutboundError>) -> Void)?
    /// Monotonic nanoseconds by which the whole call (all attempts) must be over.
    private let deadline: UInt64
    private(set) var attempts = 1

    private var headers: [(name: String, value: String)] = []
    private var body: [UInt8] = []
    /// Response bytes seen in this attempt (head and body): zero means the peer answered nothing.
    private var receivedBytes = 0
    /// Bytes of the current response head, against `maxHeaderBytes`.
    private var headBytes = 0
    private var overflow: String?

    init(_ request: OutboundRequest, options: CurlOptions, now: UInt64,
         completion: @escaping (Result<OutboundResponse, OutboundError>) -> Void) throws(OutboundError) {
        self.request = request
        self.options = options
        self.completion = completion
        self.deadline = now &+ max(request.timeout, 1_000_000)
        easy = try CurlEasy()
        headerList = CurlHeaderList()
        errorBuffer = .allocate(capacity: Int(CURL_ERROR_SIZE))
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE))
        try configure()
    }

    deinit {
        // The easy handle may still point at the list and the buffer: it goes first.
        easy.close()
        headerList.close()
        errorBuffer.deallocate()
    }

    // MARK: Setup

    private func configure() throws(OutboundError) {
        try Self.validate(request)
        let me = Unmanaged.passUnretained(self).toOpaque()

        try easy.set(CURLOPT_URL, request.url, "CURLOPT_URL")
        try easy.set(CURLOPT_PROTOCOLS_STR, "https,http", "CURLOPT_PROTOCOLS_STR")
        try easy.set(CURLOPT_FOLLOWLOCATION, 0, "CURLOPT_FOLLOWLOCATION")
        // No signals: the default resolver timeout uses alarm(), which is not safe with threads.
        try easy.set(CURLOPT_NOSIGNAL, 1, "CURLOPT_NOSIGNAL")
        // Verification is fixed on; there is deliberately no way to turn it off.
        try easy.set(CURLOPT_SSL_VERIFYPEER, 1, "CURLOPT_SSL_VERIFYPEER")
        try easy.set(CURLOPT_SSL_VERIFYHOST, 2, "CURLOPT_SSL_VERIFYHOST")
        try easy.set(CURLOPT_SSLVERSION, CURL_SSLVERSION_TLSv1_2, "CURLOPT_SSLVERSION")
        if let caFile = options.caFile {
            // A configured CA file is the only trust anchor: the system directory is not added.
            try easy.set(CURLOPT_CAINFO, caFile, "CURLOPT_CAINFO")
            try easy.set(CURLOPT_CAPATH, nil, "CURLOPT_CAPATH")
        }
        // Proxy settings are left alone on purpose: libcurl reads http_proxy / https_proxy /
        // no_proxy from the environment for every transfer.
        try easy.set(CURLOPT_USERAGENT, options.userAgent, "CURLOPT_USERAGENT")
        try easy.set(CURLOPT_MAXFILESIZE_LARGE, offset: options.maxResponseBytes, "CURLOPT_MAXFILESIZE_LARGE")
        try easy.set(CURLOPT_ERRORBUFFER, pointer: UnsafeMutableRawPointer(errorBuffer), "CURLOPT_ERRORBUFFER")
        try easy.set(CURLOPT_WRITEFUNCTION, callback: { data, size, count, me in
            Unmanaged<CurlTransfer>.fromOpaque(me!).takeUnretainedValue()
                .receiveBody(UnsafeRawBufferPointer(start: data, count: size * count))
        }, "CURLOPT_WRITEFUNCTION")
        try easy.set(CURLOPT_WRITEDATA, pointer: me, "CURLOPT_WRITEDATA")
        try easy.set(CURLOPT_HEADERFUNCTION, callback: { data, size, count, me in
            Unmanaged<CurlTransfer>.fromOpaque(me!).takeUnretainedValue()
                .receiveHeader(UnsafeRawBufferPointer(start: data, count: size * count))
        }, "CURLOPT_HEADERFUNCTION")
        try easy.set(CURLOPT_HEADERDATA, pointer: me, "CURLOPT_HEADERDATA")

        try configureMethod()
        for header in request.headers {
            // "Name;" is curl's spelling for a header with an empty value ("Name:" deletes it).
            try headerList.append(header.value.isEmpty ? "\(header.name);" : "\(header.name): \(header.value)")
        }
        if !request.headers.contains(where: { $0.name.lowercased() == "expect" }) {
            // No `Expect: 100-continue` round trip for large bodies: IdPs answer directly.
            try headerList.append("Expect:")
        }
        try easy.set(CURLOPT_HTTPHEADER, list: headerList, "CURLOPT_HTTPHEADER")

        if !request.idempotent {
            // libcurl silently re-sends a request whose *reused* connection died before any
            // answer (CURLOPT_FORBID_RETRY_ON_REUSE only arrives in 8.16; Debian 12 has 7.88). A request that must not be delivered twice
            // therefore always opens its own connection, where libcurl never retries.
            try easy.set(CURLOPT_FRESH_CONNECT, 1, "CURLOPT_FRESH_CONNECT")
        }
        try applyTimeouts(now: EventLoop.monotonicNow())
    }

    private func configureMethod() throws(OutboundError) {
        let method = request.method
        if method == "POST" || !request.body.isEmpty {
            try easy.setBody(request.body)
            if method != "POST" { try easy.set(CURLOPT_CUSTOMREQUEST, method, "CURLOPT_CUSTOMREQUEST") }
        } else if method == "GET" {
            try easy.set(CURLOPT_HTTPGET, 1, "CURLOPT_HTTPGET")
        } else if method == "HEAD" {
            try easy.set(CURLOPT_NOBODY, 1, "CURLOPT_NOBODY")
        } else {
            try easy.set(CURLOPT_CUSTOMREQUEST, method, "CURLOPT_CUSTOMREQUEST")
        }
    }

    /// Whole-call timeout from what is left of the budget; connect timeout at most 5 s.
    private func applyTimeouts(now: UInt64) throws(OutboundError) {
        let remaining = deadline > now ? deadline - now : 0
        let totalMS = max(1, Int((remaining + 999_999) / 1_000_000))
        let connectMS = min(totalMS, Int(CurlOptions.maxConnectNanoseconds / 1_000_000))
        try easy.set(CURLOPT_TIMEOUT_MS, totalMS, "CURLOPT_TIMEOUT_MS")
        try easy.set(CURLOPT_CONNECTTIMEOUT_MS, connectMS, "CURLOPT_CONNECTTIMEOUT_MS")
    }

    /// Rejects what would let a caller smuggle bytes into the request head. These are bugs in
    /// our own callers, hence `.internalError`.
    static func validate(_ request: OutboundRequest) throws(OutboundError) {
        guard !request.method.isEmpty, request.method.utf8.allSatisfy(isTokenByte) else {
            throw OutboundError(.internalError, "invalid request method")
        }
        guard !request.url.isEmpty, request.url.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw OutboundError(.internalError, "request URL contains spaces or control characters")
        }
        for header in request.headers {
            guard !header.name.isEmpty, header.name.utf8.allSatisfy(isTokenByte) else {
                throw OutboundError(.internalError, "invalid request header name")
            }
            guard header.value.utf8.allSatisfy({ $0 == 0x09 || ($0 >= 0x20 && $0 != 0x7F) }) else {
                throw OutboundError(.internalError, "invalid value for request header \(header.name)")
            }
        }
    }

    /// RFC 9110 `tchar`.
    private static func isTokenByte(_ b: UInt8) -> Bool {
        switch b {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
             UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        default:
            return "!#$%&'*+-.^_`|~".utf8.contains(b)
        }
    }

    // MARK: Receiving (called by libcurl from inside curl_multi_socket_action)

    /// Returning anything but `chunk.count` makes libcurl abort the transfer (CURLE_WRITE_ERROR).
    private func receiveBody(_ chunk: UnsafeRawBufferPointer) -> Int {
        receivedBytes += chunk.count
        guard body.count + chunk.count <= options.maxResponseBytes else {
            overflow = "response body larger than \(options.maxResponseBytes) bytes"
            return 0
        }
        body.append(contentsOf: chunk)
        return chunk.count
    }

    /// One header line per call, with its CRLF, status line and final empty line included.
    private func receiveHeader(_ line: UnsafeRawBufferPointer) -> Int {
        receivedBytes += line.count
        headBytes += line.count
        guard headBytes <= CurlOptions.maxHeaderBytes else {
            overflow = "response headers larger than \(CurlOptions.maxHeaderBytes) bytes"
            return 0
        }
        var end = line.count
        while end > 0, line[end - 1] == UInt8(ascii: "\n") || line[end - 1] == UInt8(ascii: "\r") { end -= 1 }
        let text = UnsafeRawBufferPointer(rebasing: line[0..<end])
        if text.isEmpty { return line.count }
        if text.starts(with: "HTTP/".utf8) {
            // A new status line: anything before it was an interim (1xx) response.
            headers.removeAll()
            headBytes = line.count
            return line.count
        }
        if text[0] == UInt8(ascii: " ") || text[0] == UInt8(ascii: "\t") {
            // obs-fold continuation (RFC 9112 §5.2): joined to the previous value.
            if !headers.isEmpty {
                headers[headers.count - 1].value += " " + Self.trimmed(text)
            }
            return line.count
        }
        guard let colon = text.firstIndex(of: UInt8(ascii: ":")) else { return line.count }
        let name = String(decoding: UnsafeRawBufferPointer(rebasing: text[0..<colon]), as: UTF8.self)
        let value = Self.trimmed(UnsafeRawBufferPointer(rebasing: text[(colon + 1)...]))
        headers.append((name: name, value: value))
        return line.count
    }

    private static func trimmed(_ bytes: UnsafeRawBufferPointer) -> String {
        var start = 0, end = bytes.count
        while start < end, bytes[start] == 0x20 || bytes[start] == 0x09 { start += 1 }
        while end > start, bytes[end - 1] == 0x20 || bytes[end - 1] == 0x09 { end -= 1 }
        return String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<end]), as: UTF8.self)
    }

    // MARK: Outcome

    /// The result of the attempt that just ended with `code`.
    func result(_ code: CURLcode) -> Result<OutboundResponse, OutboundError> {
        if let overflow { return .failure(OutboundError(.protocolError, overflow)) }
        if code == CURLE_OK {
            return .success(OutboundResponse(status: easy.info(CURLINFO_RESPONSE_CODE), headers: headers, body: body))
        }
        let reason = errorBuffer[0] != 0 ? String(cString: errorBuffer) : CurlEasy.describe(code)
        var detail = "curl \(code.rawValue): \(CurlErrors.redactingQuery(of: request.url, in: reason))"
        if attempts > 1 { detail += " (after \(attempts - 1) retry)" }
        return .failure(OutboundError(CurlErrors.kind(of: code), detail))
    }

    /// Whether the attempt that failed with `error` may be made once more, on a new connection:
    /// when nothing was sent (`.connect`), or when the request is idempotent and the peer
    /// answered nothing at all. Never when the time budget is spent.
    func mayRetry(_ error: OutboundError, code: CURLcode, now: UInt64) -> Bool {
        guard attempts == 1, overflow == nil, now < deadline else { return false }
        if error.kind == .connect { return true }
        return request.idempotent && receivedBytes == 0 && CurlErrors.isTransient(code)
    }

    /// Resets the per-attempt state for the retry; the easy handle must be out of the multi.
    func prepareRetry(now: UInt64) throws(OutboundError) {
        attempts += 1
        headers.removeAll()
        headBytes = 0
        body.removeAll()
        receivedBytes = 0
        errorBuffer[0] = 0
        try easy.set(CURLOPT_FRESH_CONNECT, 1, "CURLOPT_FRESH_CONNECT")
        try applyTimeouts(now: now)
    }

    /// Delivers the outcome exactly once.
    func complete(_ result: Result<OutboundResponse, OutboundError>) {
        guard let completion else { return }
        self.completion = nil
        completion(result)
    }
}
