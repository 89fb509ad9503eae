import CNghttp2
// StreamRequestHead is the engine's own (internal); the fuzz and test builds enable testing.
@testable import ProxyCore

/// HTTP/2 requests: the fields nghttp2 lets through become an HTTP/1.1 head for the engine's
/// parser. Whatever the fields, that head is whole — the parser never waits for more of it — and
/// the parser's verdict is final (complete or an error with a status), so no HTTP/2 request can
/// leave a stream hanging or smuggle a second request into the bytes after its head.
enum HTTP2Targets {
    static func requestHead(_ data: UnsafeRawBufferPointer) {
        // Fields as `name \0 value \0`, a first byte choosing END_STREAM; only those nghttp2's
        // own checks accept (what reaches `field` in the proxy).
        guard let flags = data.first else { return }
        var request = StreamRequestHead()
        let bytes = Array(data.dropFirst())
        let parts = bytes.split(separator: 0, omittingEmptySubsequences: false).map(Array.init)
        var i = 0
        while i + 1 < parts.count {
            let name = parts[i], value = parts[i + 1]
            i += 2
            let nameOK = name.first == 0x3A
                ? [":method", ":path", ":authority", ":scheme"].contains(String(decoding: name, as: UTF8.self))
                : name.withUnsafeBufferPointer { nghttp2_check_header_name($0.baseAddress, $0.count) } != 0
            let valueOK = value.withUnsafeBufferPointer { nghttp2_check_header_value_rfc9113($0.baseAddress, $0.count) } != 0
            guard nameOK && valueOK && !name.isEmpty else { continue }
            name.withUnsafeBufferPointer { n in value.withUnsafeBufferPointer { v in request.field(name: n, value: v, limit: 65_536) } }
        }
        var input = ByteBuffer()
        defer { input.free() }
        request.deliverHead(into: &input, endStream: flags & 1 != 0)
        guard !input.isEmpty else { return }  // refused before delivery
        requireWholeHead(input)
    }

    /// The invariant of every multiplexed protocol's request head: the parser reads the head
    /// delivered for it whole, with a final verdict — never waits on it, never finds bytes after it.
    static func requireWholeHead(_ input: ByteBuffer) {
        var head = RequestHead()
        switch RequestParser().parseHead(input.readableBytes, into: &head) {
        case .incomplete:
            FuzzTargets.require(false, "a delivered head the parser waits on: \(String(decoding: input.readableBytes, as: UTF8.self))")
        case .complete(let length):
            FuzzTargets.require(length == input.readable, "bytes after the delivered head (\(input.readable - length))")
        case .error:
            break
        }
    }
}
