/// `callback_proxy_compressed_responses_total{coding}` and
/// `callback_proxy_compression_bytes_total{coding, side}`: how often responses are compressed
/// and what it saves (`side="in"`: body bytes from the upstream; `"out"`: compressed bytes sent).
struct CompressionMetrics: Sendable {
    private let responses: [Counter]
    private let bytesIn: [Counter]
    private let bytesOut: [Counter]
    private let declined: [Counter]

    init(registry: MetricsRegistry) {
        let r = registry.counter("callback_proxy_compressed_responses_total", "Responses compressed, by coding.",
                                 labels: ["coding"])
        let b = registry.counter("callback_proxy_compression_bytes_total",
                                 "Bytes of compressed responses: in = body bytes from the upstream, out = compressed bytes sent.",
                                 labels: ["coding", "side"])
        let d = registry.counter("callback_proxy_compression_over_memory_total",
                                 "Responses not compressed with the coding chosen because compression.max_memory was taken (Brotli then falls back to gzip where the client takes it).",
                                 labels: ["coding"])
        declined = ContentCoding.allCases.map { d.labels($0.token) }
        responses = ContentCoding.allCases.map { r.labels($0.token) }
        bytesIn = ContentCoding.allCases.map { b.labels($0.token, "in") }
        bytesOut = ContentCoding.allCases.map { b.labels($0.token, "out") }
    }

    /// The coding's place in `ContentCoding.allCases` (a switch: `allCases` builds an array each
    /// time it is read, and this runs once per upstream read of a compressed body).
    private static func index(_ coding: ContentCoding) -> Int {
        switch coding {
        case .brotli: return 0
        case .gzip: return 1
        }
    }

    func started(_ coding: ContentCoding) { responses[Self.index(coding)].increment() }

    func overMemory(_ coding: ContentCoding) { declined[Self.index(coding)].increment() }

    func encoded(_ coding: ContentCoding, in bytesIn: Int, out bytesOut: Int) {
        let i = Self.index(coding)
        if bytesIn > 0 { self.bytesIn[i].increment(by: bytesIn) }
        if bytesOut > 0 { self.bytesOut[i].increment(by: bytesOut) }
    }
}
