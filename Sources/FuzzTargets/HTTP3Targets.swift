import CNghttp3
// HTTP3RequestHead is the engine's own (internal); the fuzz and test builds enable testing.
@testable import ProxyCore

/// HTTP/3 requests: a QPACK field section as a client sends it (no dynamic table, as the
/// listener advertises none), decoded by nghttp3, checked by `HTTP3FieldRules` and rewritten
/// for the engine's parser. Whatever the bytes: a request is malformed, refused, or delivered
/// as a head the parser reads whole with a final verdict — never one it waits on, and never
/// bytes after it (no smuggled second request).
public enum HTTP3Targets {
    static func requestHead(_ data: UnsafeRawBufferPointer) {
        guard let flags = data.first else { return }
        var request = HTTP3RequestHead()
        guard decode(UnsafeRawBufferPointer(rebasing: data.dropFirst()), {
            request.field(name: $0, value: $1, limit: 65_536)
        }) else { return }
        var input = ByteBuffer()
        defer { input.free() }
        request.deliverHead(into: &input, endStream: flags & 1 != 0)
        if request.malformed != nil || request.refusal != nil {
            FuzzTargets.require(input.isEmpty, "a refused request delivered a head")
            return
        }
        HTTP2Targets.requireWholeHead(input)
    }

    /// nghttp3's decoder over one request field section (no dynamic table), calling `each` per
    /// field as a connection's `recv_header` would see it; false when it is not valid QPACK.
    /// (`HTTP3RequestHeadTests` decodes with it too.)
    public static func decode(_ section: UnsafeRawBufferPointer,
                              _ each: (UnsafeBufferPointer<UInt8>, UnsafeBufferPointer<UInt8>) -> Void) -> Bool {
        let mem = nghttp3_mem_default()
        var decoder: OpaquePointer?
        var context: OpaquePointer?
        guard nghttp3_qpack_decoder_new(&decoder, 0, 0, mem) == 0 else { return false }
        defer { nghttp3_qpack_decoder_del(decoder) }
        guard nghttp3_qpack_stream_context_new(&context, 0, mem) == 0 else { return false }
        defer { nghttp3_qpack_stream_context_del(context) }
        guard let base = section.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return false }
        var at = 0
        while true {
            var nv = nghttp3_qpack_nv()
            var flags: UInt8 = 0
            let n = nghttp3_qpack_decoder_read_request(decoder, context, &nv, &flags, base + at, section.count - at, 1)
            if n < 0 { return false }
            at += Int(n)
            if flags & UInt8(NGHTTP3_QPACK_DECODE_FLAG_EMIT) != 0 {
                let name = nghttp3_rcbuf_get_buf(nv.name), value = nghttp3_rcbuf_get_buf(nv.value)
                each(UnsafeBufferPointer(start: name.base, count: name.len), UnsafeBufferPointer(start: value.base, count: value.len))
                nghttp3_rcbuf_decref(nv.name)
                nghttp3_rcbuf_decref(nv.value)
            }
            if flags & UInt8(NGHTTP3_QPACK_DECODE_FLAG_FINAL) != 0 { return true }
            if flags & UInt8(NGHTTP3_QPACK_DECODE_FLAG_BLOCKED) != 0 || (n == 0 && at >= section.count) { return false }
        }
    }
}
