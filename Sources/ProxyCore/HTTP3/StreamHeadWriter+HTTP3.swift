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
