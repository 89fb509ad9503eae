import CNghttp3
import FuzzTargets

/// Field sections as a real QPACK encoder writes them (nghttp3's, the library the HTTP/3
/// listener runs on), decoded by nghttp3's decoder: the names and values a connection's
/// `recv_header` would see, bytes as sent — uppercase names and bad values included, which
/// QPACK's literal representations carry as they are.
enum QPACKFixture {
    /// The request field section (prefix and representations) for `fields`, with no dynamic
    /// table (as a server that advertises capacity 0 receives).
    static func encode(_ fields: [(String, String)]) -> [UInt8] {
        let mem = nghttp3_mem_default()
        var encoder: OpaquePointer?
        precondition(nghttp3_qpack_encoder_new(&encoder, 0, mem) == 0)
        defer { nghttp3_qpack_encoder_del(encoder) }
        var prefix = nghttp3_buf(), body = nghttp3_buf(), stream = nghttp3_buf()
        nghttp3_buf_init(&prefix)
        nghttp3_buf_init(&body)
        nghttp3_buf_init(&stream)
        defer {
            nghttp3_buf_free(&prefix, mem)
            nghttp3_buf_free(&body, mem)
            nghttp3_buf_free(&stream, mem)
        }
        let names = fields.map { Array($0.0.utf8) }, values = fields.map { Array($0.1.utf8) }
        var nva: [nghttp3_nv] = []
        for i in fields.indices {
            names[i].withUnsafeBufferPointer { n in
                values[i].withUnsafeBufferPointer { v in
                    nva.append(nghttp3_nv(name: UnsafeMutablePointer(mutating: n.baseAddress), value: UnsafeMutablePointer(mutating: v.baseAddress),
                                          namelen: n.count, valuelen: v.count, flags: UInt8(NGHTTP3_NV_FLAG_NONE)))
                }
            }
        }
        // The pointers stay valid: `names` and `values` outlive the call.
        let rv = withExtendedLifetime((names, values)) {
            nghttp3_qpack_encoder_encode(encoder, &prefix, &body, &stream, 0, nva, nva.count)
        }
        precondition(rv == 0)
        return bytes(prefix) + bytes(body)
    }

    /// Decodes a request field section, calling `each` per field; false when the section is not
    /// valid QPACK (the fuzz target's decoder: one way to drive nghttp3's).
    @discardableResult
    static func decode(_ section: [UInt8], _ each: (UnsafeBufferPointer<UInt8>, UnsafeBufferPointer<UInt8>) -> Void) -> Bool {
        section.withUnsafeBytes { HTTP3Targets.decode($0, each) }
    }

    private static func bytes(_ b: nghttp3_buf) -> [UInt8] {
        guard let pos = b.pos, let last = b.last else { return [] }
        return Array(UnsafeBufferPointer(start: pos, count: last - pos))
    }
}
