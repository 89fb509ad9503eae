import CNghttp2

extension StreamHeadWriter {
    /// The head as nghttp2's name-value pairs, valid while `body` runs (nghttp2 copies them).
    func withNameValues<R>(_ body: (UnsafeMutablePointer<nghttp2_nv>, Int) -> R) -> R {
        withFields { base, spans in
            var nva = spans.map { s in
                nghttp2_nv(name: base + s.name, value: base + s.value,
                           namelen: s.nameLength, valuelen: s.valueLength, flags: UInt8(NGHTTP2_NV_FLAG_NONE.rawValue))
            }
            return nva.withUnsafeMutableBufferPointer { body($0.baseAddress!, $0.count) }
        }
    }
}

enum HTTP2Response {
    /// Submits the heads the stream has written (1xx ones, then its final one) as HEADERS.
    /// With the response complete and no body left, END_STREAM goes on the final HEADERS. False
    /// if nghttp2 refused one.
    static func submitHeads(_ h2: HTTP2Stream, _ c: HTTP2Connection) -> Bool {
        let stream = h2.exchange
        let heads = h2.heads
        h2.heads.removeAll()
        for head in heads {
            let rv: Int32 = head.withNameValues { nva, count in
                if !head.isFinal {
                    return nghttp2_submit_headers(c.session, UInt8(NGHTTP2_FLAG_NONE.rawValue), h2.id, nil, nva, count, nil)
                }
                if h2.responseDone && stream.output.isEmpty {
                    return nghttp2_submit_response(c.session, h2.id, nva, count, nil)
                }
                var provider = nghttp2_data_provider(source: nghttp2_data_source(ptr: nil), read_callback: HTTP2Callbacks.readBody)
                return nghttp2_submit_response(c.session, h2.id, nva, count, &provider)
            }
            guard rv == 0 else { return false }
            if head.isFinal {
                h2.responseSubmitted = true
                if h2.responseDone && stream.output.isEmpty && !stream.requestBodyDone { c.endedEarly.append(h2.id) }
            }
        }
        return true
    }
}
