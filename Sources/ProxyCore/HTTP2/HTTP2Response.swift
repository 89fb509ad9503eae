import CNghttp2

/// The exchange's HTTP/1.1 response head (as it wrote it into its output: status line, the
/// fields it decided on, framing) turned into HTTP/2 HEADERS. Parsed with the engine's own
/// `ResponseParser`, so what reaches an HTTP/2 client is field for field what an HTTP/1.1
/// client gets, less the connection-specific fields (RFC 9113 §8.2.2) and the reason phrase.
enum HTTP2Response {
    enum Outcome { case submitted, incomplete, failed }

    /// Submits the head waiting at the front of `stream.output` (after any 1xx heads before it)
    /// and consumes its bytes. With the response complete and no body left: END_STREAM on it.
    static func submitHead(_ stream: ClientConnection, _ c: HTTP2Connection) -> Outcome {
        let h2 = stream.h2!
        while true {
            let parsed = c.listener.responseParser.parseHead(stream.output.readableBytes, requestMethod: stream.head.method,
                                                              into: &c.responseHead)
            guard case .complete(let length) = parsed else {
                if case .incomplete = parsed { return .incomplete }
                return .failed
            }
            let status = c.responseHead.status
            let final = status >= 200
            let bytes = stream.output.readableBytes
            var block: [UInt8] = []
            var spans: [(Int, Int, Int, Int)] = []  // name offset, name length, value offset, value length
            block.reserveCapacity(length)
            func add(_ name: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer, lowercase: Bool) {
                let nameAt = block.count
                if lowercase { block.append(contentsOf: name.lazy.map(asciiLower)) } else { block.append(contentsOf: name) }
                let valueAt = block.count
                block.append(contentsOf: value)
                spans.append((nameAt, name.count, valueAt, value.count))
            }
            var statusText = ByteBuffer()
            statusText.append(decimal: UInt64(status))
            add(UnsafeRawBufferPointer(start: (":status" as StaticString).utf8Start, count: 7), statusText.readableBytes, lowercase: false)
            statusText.free()
            for field in c.responseHead.headers {
                let name = UnsafeRawBufferPointer(rebasing: bytes[field.name.start..<field.name.end])
                switch HeaderKind.of(bytes, field.name) {
                case .hopByHop, .transferEncoding, .upgrade: continue
                default: break
                }
                add(name, UnsafeRawBufferPointer(rebasing: bytes[field.value.start..<field.value.end]), lowercase: true)
            }
            stream.output.moveReader(length)
            stream.bytesOut += UInt64(length)
            let rv: Int32 = block.withUnsafeMutableBufferPointer { raw in
                var nva = spans.map { s in
                    nghttp2_nv(name: raw.baseAddress! + s.0, value: raw.baseAddress! + s.2, namelen: s.1, valuelen: s.3,
                               flags: UInt8(NGHTTP2_NV_FLAG_NONE.rawValue))
                }
                if !final {
                    return nghttp2_submit_headers(c.session, UInt8(NGHTTP2_FLAG_NONE.rawValue), h2.id, nil, &nva, nva.count, nil)
                }
                if h2.responseDone && stream.output.isEmpty {
                    return nghttp2_submit_response(c.session, h2.id, &nva, nva.count, nil)
                }
                var provider = nghttp2_data_provider(source: nghttp2_data_source(ptr: nil), read_callback: HTTP2Callbacks.readBody)
                return nghttp2_submit_response(c.session, h2.id, &nva, nva.count, &provider)
            }
            guard rv == 0 else { return .failed }
            if final {
                h2.responseSubmitted = true
                if h2.responseDone && stream.output.isEmpty && !stream.exchange.requestBodyDone { c.endedEarly.append(h2.id) }
                return .submitted
            }
        }
    }
}
