import CNghttp3

extension StreamHeadWriter {
    /// The head as nghttp3's name-value pairs, valid while `body` runs (nghttp3 copies them).
    func withHTTP3NameValues<R>(_ body: (UnsafeMutablePointer<nghttp3_nv>, Int) -> R) -> R {
        withFields { base, spans in
            var nva = spans.map { s in
                nghttp3_nv(name: base + s.name, value: base + s.value,
                           namelen: s.nameLength, valuelen: s.valueLength, flags: UInt8(NGHTTP3_NV_FLAG_NONE))
            }
            return nva.withUnsafeMutableBufferPointer { body($0.baseAddress!, $0.count) }
        }
    }
}

enum HTTP3Response {
    /// Submits the heads the stream has written (1xx ones, then its final one). With the
    /// response complete and no body left, the final one goes without a body (FIN on HEADERS).
    /// False if nghttp3 refused one.
    static func submitHeads(_ s: HTTP3Stream, _ c: HTTP3Connection) -> Bool {
        guard let h3 = c.h3 else { return false }
        let x = s.exchange
        let heads = s.heads
        s.heads.removeAll()
        for head in heads {
            let rv: Int32 = head.withHTTP3NameValues { nva, count in
                if !head.isFinal { return nghttp3_conn_submit_info(h3, s.id, nva, count) }
                if s.responseDone && x.output.isEmpty { return nghttp3_conn_submit_response(h3, s.id, nva, count, nil) }
                var reader = nghttp3_data_reader(read_data: HTTP3Callbacks.readBody)
                return nghttp3_conn_submit_response(h3, s.id, nva, count, &reader)
            }
            guard rv == 0 else { return false }
            if head.isFinal {
                s.responseSubmitted = true
                if s.responseDone && x.output.isEmpty && !x.requestBodyDone { c.stopReading(s.id) }
            }
        }
        return true
    }
}
