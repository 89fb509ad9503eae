import Testing
@testable import ProxyCore

/// The PROXY protocol header reader, fed the way the connection feeds it: never more than
/// `nextRead` bytes at a time (v1 also stops at its LF), in chunks of every size.
@Suite struct ProxyProtocolTests {
    enum Result: Equatable { case incomplete, done(String?), invalid }

    /// Feeds `bytes` in chunks of at most `chunk`, as the connection would.
    func read(_ bytes: [UInt8], chunk: Int = .max) -> (Result, consumed: Int) {
        var reader = ProxyHeaderReader()
        var offset = 0
        while offset < bytes.count {
            var n = min(chunk, reader.nextRead, bytes.count - offset)
            if reader.isV1 || reader.bytes.isEmpty, bytes[offset] == UInt8(ascii: "P") || !reader.bytes.isEmpty,
               let lf = bytes[offset..<(offset + n)].firstIndex(of: 0x0A) {
                n = lf - offset + 1
            }
            let outcome = bytes[offset..<(offset + n)].withUnsafeBytes { reader.add($0) }
            offset += n
            switch outcome {
            case .incomplete: continue
            case .invalid: return (.invalid, offset)
            case .done(let source): return (.done(source?.text), offset)
            }
        }
        return (.incomplete, offset)
    }

    static let request = Array("GET / HTTP/1.1\r\nHost: a\r\n\r\n".utf8)

    @Test(arguments: [1, 2, 7, 200])
    func v1HeadersGiveTheSourceAndLeaveTheRequestUnread(chunk: Int) {
        let header = Array("PROXY TCP4 203.0.113.9 10.0.0.1 51234 443\r\n".utf8)
        #expect(read(header + Self.request, chunk: chunk) == (.done("203.0.113.9"), header.count))
        let v6 = Array("PROXY TCP6 2001:db8::7 2001:db8::1 51234 443\r\n".utf8)
        #expect(read(v6 + Self.request, chunk: chunk) == (.done("2001:db8::7"), v6.count))
        let unknown = Array("PROXY UNKNOWN ffff::1 ffff::2 1 2\r\n".utf8)
        #expect(read(unknown + Self.request, chunk: chunk) == (.done(nil), unknown.count))
    }

    @Test(arguments: [
        "GET / HTTP/1.1\r\n",                                     // no header at all
        "PROXY TCP4 203.0.113.9 10.0.0.1 51234 443\n",            // bare LF
        "PROXY TCP4 203.0.113.9 10.0.0.1 51234\r\n",              // a field missing
        "PROXY TCP4 203.0.113.9  10.0.0.1 51234 443\r\n",         // two spaces
        "PROXY TCP4 2001:db8::7 10.0.0.1 51234 443\r\n",          // family mismatch
        "PROXY TCP6 203.0.113.9 10.0.0.1 51234 443\r\n",
        "PROXY TCP4 203.0.113.9 10.0.0.1 65536 443\r\n",          // port out of range
        "PROXY TCP4 203.0.113.9 10.0.0.1 0443 443\r\n",           // leading zero
        "PROXY TCP4 203.0.113.999 10.0.0.1 1 2\r\n",              // not an address
        "PROXY UDP4 203.0.113.9 10.0.0.1 1 2\r\n",
        "proxy TCP4 203.0.113.9 10.0.0.1 1 2\r\n",
        "PROXY TCP4 1.2.3.4\u{0}junk 5.6.7.8 1 2\r\n",            // a NUL inside an address (it read as 1.2.3.4)
        "PROXY TCP4 1.2.3.4 5.6.7.8\u{0} 1 2\r\n",
        "PROXY TCP4 203.0.113.9\t10.0.0.1 1 2\r\n",             // not printable ASCII
        "PROXY UNKNOWN \u{7F}\r\n",
    ])
    func malformedV1HeadersAreInvalid(text: String) {
        #expect(read(Array(text.utf8)).0 == .invalid)
    }

    @Test func aV1LineWithoutItsEndWithin107BytesIsInvalid() {
        let endless = Array(("PROXY TCP4 " + String(repeating: "1", count: 200)).utf8)
        let (result, consumed) = read(endless, chunk: 13)
        #expect(result == .invalid)
        #expect(consumed <= ProxyHeaderReader.v1Max, "never reads past where a header could end")
        #expect(read(Array("PROXY TCP4 203.0.113.9".utf8)).0 == .incomplete)
    }

    func v2(command: UInt8 = 0x21, family: UInt8, payload: [UInt8]) -> [UInt8] {
        ProxyHeaderReader.v2Signature + [command, family, UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)] + payload
    }

    @Test(arguments: [1, 5, 16, 300])
    func v2HeadersGiveTheSourceAndLeaveTheRestUnread(chunk: Int) {
        let tcp4 = v2(family: 0x11, payload: [203, 0, 113, 9, 10, 0, 0, 1, 0xC8, 0x22, 0x01, 0xBB])
        #expect(read(tcp4 + Self.request, chunk: chunk) == (.done("203.0.113.9"), tcp4.count))
        var addresses: [UInt8] = [0x20, 0x01, 0x0d, 0xb8] + Array(repeating: 0, count: 11) + [7]
        addresses += [0x20, 0x01, 0x0d, 0xb8] + Array(repeating: 0, count: 11) + [1] + [0xC8, 0x22, 0x01, 0xBB]
        // With a TLV after the addresses (AWS puts the VPC endpoint id there): skipped.
        let tcp6 = v2(family: 0x21, payload: addresses + [0xEA, 0x00, 0x03, 0x01, 0x02, 0x03])
        #expect(read(tcp6 + Self.request, chunk: chunk) == (.done("2001:db8::7"), tcp6.count))
        // LOCAL: the balancer's own health check; its address stays.
        let local = v2(command: 0x20, family: 0x00, payload: [])
        #expect(read(local + Self.request, chunk: chunk) == (.done(nil), local.count))
    }

    @Test func malformedV2HeadersAreInvalid() {
        var badSignature = v2(family: 0x11, payload: Array(repeating: 1, count: 12))
        badSignature[5] = 0x0A
        #expect(read(badSignature).0 == .invalid)
        #expect(read(v2(command: 0x11, family: 0x11, payload: Array(repeating: 1, count: 12))).0 == .invalid, "version 1 in a v2 header")
        #expect(read(v2(command: 0x22, family: 0x11, payload: Array(repeating: 1, count: 12))).0 == .invalid, "unknown command")
        #expect(read(v2(family: 0x11, payload: Array(repeating: 1, count: 8))).0 == .invalid, "addresses cut short")
        #expect(read(v2(family: 0x41, payload: Array(repeating: 1, count: 12))).0 == .invalid, "unknown family")
        let huge = ProxyHeaderReader.v2Signature + [0x21, 0x11, 0x10, 0x00]
        #expect(read(huge).0 == .invalid, "4 KiB of TLVs")
    }
}
