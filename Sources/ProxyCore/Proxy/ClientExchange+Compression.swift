/// Response compression in the exchange (`CompressionSettings`): the decision when the
/// upstream's head arrives, the head's edits, and the body through a `BodyEncoder` into the
/// output — chunked for an HTTP/1.1 client, DATA for an HTTP/2 stream. Back-pressure is the
/// body path's own: the encoder writes into `output`, and the upstream stops being read while
/// that is full, so a slow reader holds at most one read's worth of uncompressed bytes.
extension ClientExchange {
    /// Whether and how to compress the response whose head has just been parsed (its fields
    /// in `buffer`).
    func compressionDecision(_ buffer: UnsafeRawBufferPointer) -> CompressionDecision {
        let settings = config.compression
        let r = response.head
        let bytes = buffer.baseAddress!
        var f = CompressionDecision.Facts()
        f.isHead = head.method == .head
        f.http10 = head.version == .http10
        f.status = r.status
        switch r.framing {
        case .none: f.hasBody = false
        case .contentLength(let n): f.length = n; f.hasBody = n > 0
        case .chunked, .untilClose: break
        }
        for field in r.headers {
            let name = field.name
            if nameMatches("Content-Type", bytes, name) {
                f.contentType = UnsafeRawBufferPointer(start: bytes + field.value.start, count: field.value.count)
            } else if nameMatches("Content-Encoding", bytes, name) {
                f.hasContentEncoding = true
            } else if nameMatches("Cache-Control", bytes, name) {
                if WeightedList.contains(UnsafeRawBufferPointer(start: bytes + field.value.start, count: field.value.count), "no-transform") {
                    f.noTransform = true
                }
            }
        }
        if !settings.excludePaths.isEmpty {
            f.pathExcluded = RequestView(self).withPath { path in settings.excludePaths.contains { $0.matches(path) } }
        }
        return withRequestField("accept-encoding") { accept in
            f.acceptEncoding = accept
            return CompressionDecision.decide(settings, f)
        }
    }

    /// The encoder for this response, its state reserved from `compression.max_memory`; past
    /// it, Brotli (ten times gzip's state) falls back to gzip for a client that takes it, and
    /// anything else goes uncompressed (nil). Counted either way.
    func makeEncoder(_ coding: ContentCoding, sizeHint: UInt64?) -> BodyEncoder? {
        guard let budget = listener.compressionMemory else {
            return BodyEncoder(coding, settings: config.compression, sizeHint: sizeHint)
        }
        var coding = coding
        var bytes = BodyEncoder.memory(for: coding, sizeHint: sizeHint)
        if !budget.reserve(bytes) {
            listener.engineMetrics.compression.overMemory(coding)
            guard coding == .brotli, config.compression.codings.contains(.gzip),
                  withRequestField("accept-encoding", { $0.map { AcceptEncoding.weight(of: .gzip, in: $0) > 0 } ?? false }) else {
                return nil
            }
            coding = .gzip
            bytes = BodyEncoder.memory(for: coding, sizeHint: sizeHint)
            guard budget.reserve(bytes) else {
                listener.engineMetrics.compression.overMemory(coding)
                return nil
            }
        }
        return BodyEncoder(coding, settings: config.compression, sizeHint: sizeHint, reserved: (budget, bytes))
    }

    /// A response field under compression (`encoding`: the body is being compressed, not only
    /// varied on): a strong ETag goes out weak (the compressed bytes are
    /// not the ones it names; nginx does the same), and a Vary that already names
    /// Accept-Encoding (or is `*`) is noted so that no second one is added. True if the field
    /// was written here.
    static func compressionEdits<W: ResponseHeadWriter>(_ field: HeaderField, _ bytes: UnsafeRawPointer, encoding: Bool,
                                                        varyNamed: inout Bool, into w: inout W) -> Bool {
        let value = UnsafeRawBufferPointer(start: bytes + field.value.start, count: field.value.count)
        if nameMatches("Vary", bytes, field.name) {
            if WeightedList.contains(value, "accept-encoding") || WeightedList.contains(value, "*") { varyNamed = true }
            return false
        }
        if encoding && nameMatches("ETag", bytes, field.name) && value.first == UInt8(ascii: "\"") {
            var weak = Array("W/".utf8)
            weak.append(contentsOf: value)
            weak.withUnsafeBytes { w.field(UnsafeRawBufferPointer(start: bytes + field.name.start, count: field.name.count), $0) }
            return true
        }
        return false
    }

    /// Moves the body bytes available in `up.input` through the encoder into `output`; nil if
    /// the encoder failed.
    func encodeBody(from up: UpstreamConnection) -> BodyReader.Step? {
        var raw = loop.buffers.take()
        defer { loop.buffers.recycle(&raw) }
        let step = response.body.transfer(from: &up.input, to: &raw, chunkedOut: false)
        switch step {
        case .done:
            if !appendEncoded(raw.readableBytes, .finish) { return nil }
            if response.chunkedToClient { output.append("0\r\n\r\n") }
        case .more:
            // A flush point after every read: what the upstream has sent, the client can read,
            // however slowly the rest follows (a few bytes per read on a large body).
            if !raw.isEmpty && !appendEncoded(raw.readableBytes, .flush) { return nil }
        case .error:
            break
        }
        return step
    }

    /// Ends the compressed stream of a body that ended with the upstream's close.
    func finishEncoding() -> Bool {
        appendEncoded(UnsafeRawBufferPointer(start: nil, count: 0), .finish)
    }

    private func appendEncoded(_ bytes: UnsafeRawBufferPointer, _ operation: BodyEncoder.Operation) -> Bool {
        var packed = loop.buffers.take()
        defer { loop.buffers.recycle(&packed) }
        let encoder = response.encoder!
        guard encoder.encode(bytes, into: &packed, operation) else { return false }
        listener.engineMetrics.compression.encoded(encoder.coding, in: bytes.count, out: packed.readable)
        guard !packed.isEmpty else { return true }
        if response.chunkedToClient {
            output.append(hex: UInt64(packed.readable))
            output.append("\r\n")
            output.append(packed.readableBytes)
            output.append("\r\n")
        } else {
            output.append(packed.readableBytes)
        }
        return true
    }
}
