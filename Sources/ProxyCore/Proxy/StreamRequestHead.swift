#if canImport(Glibc)
import Glibc
#endif

/// A request of a multiplexed protocol, field by field as its decoder gives them — HTTP/2's
/// (nghttp2 has checked every name and value, RFC 9113 §8.2) and HTTP/3's (checked by
/// `HTTP3FieldRules`, RFC 9114 §4.2–4.3) — turned into the HTTP/1.1 bytes it stands for: the
/// head (request line, `Host` from `:authority`, `cookie` crumbs joined), then the body,
/// re-framed as chunked when no `content-length` says how long it is. Those bytes go through the
/// engine's `RequestParser` like any HTTP/1.1 request's: one set of rules for every protocol.
struct StreamRequestHead {
    private var method: [UInt8] = []
    private var path: [UInt8] = []
    private var authority: [UInt8] = []
    private var host: [UInt8]? = nil
    /// Regular fields as HTTP/1.1 lines, `name: value\r\n`.
    private var fields: [UInt8] = []
    /// `cookie` crumbs, joined with `; ` into one field (RFC 9113 §8.2.3).
    private var cookies: [UInt8] = []
    private var hasContentLength = false
    /// RFC 9113 §6.5.2's header list size so far (name + value + 32 per field).
    private var listBytes = 0
    /// Set while decoding: the request is answered with this instead of being run.
    private(set) var refusal: (status: Int, reason: String)? = nil
    /// DATA is re-framed as chunked: the request has a body but no `content-length`.
    private(set) var chunked = false
    /// The request's END_STREAM arrived.
    private(set) var bodyEnded = false

    /// One decoded request field. Decoding goes on after a refusal (HPACK's state must stay in
    /// step with the peer's), but nothing more is kept.
    mutating func field(name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>, limit: Int) {
        listBytes += name.count + value.count + 32
        guard refusal == nil else { return }
        if listBytes > limit {
            refusal = (431, "request header list larger than \(limit) bytes")
            fields = []
            cookies = []
            return
        }
        if name.first == 0x3A {  // ':'
            switch String(decoding: name, as: UTF8.self) {
            case ":method": method = Array(value)
            case ":path": path = Array(value)
            case ":authority": authority = Array(value)
            default: break  // :scheme (X-Forwarded-Proto is the listener's), :protocol (never enabled)
            }
            return
        }
        if equals(name, "host") {
            host = Array(value)
            return
        }
        if equals(name, "cookie") {
            if !cookies.isEmpty { cookies.append(contentsOf: [0x3B, 0x20]) }
            cookies.append(contentsOf: value)
            return
        }
        if equals(name, "content-length") { hasContentLength = true }
        fields.append(contentsOf: name)
        fields.append(contentsOf: [0x3A, 0x20])
        fields.append(contentsOf: value)
        fields.append(contentsOf: [0x0D, 0x0A])
    }

    /// The request's HEADERS are complete: writes the HTTP/1.1 head they stand for into the
    /// exchange's input. `endStream`: no body follows.
    mutating func deliverHead(into input: inout ByteBuffer, endStream: Bool) {
        if endStream { bodyEnded = true }
        guard refusal == nil else { return }
        if let host, !authority.isEmpty, !sameHost(host, authority) {
            refusal = (400, "host differs from :authority")
            return
        }
        input.append(method)
        input.append(byte: 0x20)
        // CONNECT has no :path; its target is the authority (the exchange refuses it: 501).
        input.append(path.isEmpty ? authority : path)
        input.append(" HTTP/1.1\r\n")
        if let value = authority.isEmpty ? host : authority {
            input.append("Host: ")
            input.append(value)
            input.append("\r\n")
        }
        input.append(fields)
        if !cookies.isEmpty {
            input.append("Cookie: ")
            input.append(cookies)
            input.append("\r\n")
        }
        chunked = !endStream && !hasContentLength
        if chunked { input.append("Transfer-Encoding: chunked\r\n") }
        input.append("\r\n")
        fields = []
        cookies = []
    }

    /// Request DATA for the exchange.
    func deliverData(_ data: UnsafeRawBufferPointer, into input: inout ByteBuffer) {
        guard !data.isEmpty else { return }
        if chunked {
            input.append(hex: UInt64(data.count))
            input.append("\r\n")
            input.append(data)
            input.append("\r\n")
        } else {
            input.append(data)
        }
    }

    /// The request's END_STREAM (after DATA, or after trailers, which are not forwarded).
    mutating func deliverEnd(into input: inout ByteBuffer) {
        guard !bodyEnded else { return }
        bodyEnded = true
        if chunked { input.append("0\r\n\r\n") }
    }

    private func equals(_ name: UnsafeBufferPointer<UInt8>, _ literal: StaticString) -> Bool {
        name.count == literal.utf8CodeUnitCount && memcmp(name.baseAddress!, literal.utf8Start, name.count) == 0
    }

    private func sameHost(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        a.count == b.count && zip(a, b).allSatisfy { asciiLower($0) == asciiLower($1) }
    }
}

private extension ByteBuffer {
    mutating func append(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { append($0) }
    }
}
