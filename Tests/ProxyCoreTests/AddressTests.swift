#if canImport(Glibc)
import Glibc
#endif
import Testing
@testable import ProxyCore

@Suite struct AddressTests {
    @Test(arguments: [
        ("127.0.0.1:8080", "127.0.0.1:8080"),
        ("localhost:80", "127.0.0.1:80"),
        (":9000", "0.0.0.0:9000"),
        ("[::1]:443", "[::1]:443"),
        ("unix:/run/app.sock", "unix:/run/app.sock"),
    ])
    func validAddressesParse(text: String, expected: String) {
        #expect(SocketAddress.parse(text)?.description == expected)
    }

    /// `check` warns about an internal listener that answers beyond this host.
    @Test(arguments: [
        ("127.0.0.1:8081", true), ("127.1.2.3:8081", true), ("[::1]:8081", true), ("[::ffff:127.0.0.1]:8081", true),
        ("unix:/run/internal.sock", true),
        ("0.0.0.0:8081", false), ("10.0.0.5:8081", false), ("[::]:8081", false), ("[::ffff:10.0.0.1]:8081", false),
        ("[fe80::1]:8081", false), ("128.0.0.1:8081", false),
    ])
    func loopbackAddressesAreTold(text: String, loopback: Bool) {
        #expect(SocketAddress.parse(text)?.isLoopback == loopback)
    }

    @Test(arguments: ["", "127.0.0.1", "127.0.0.1:0", "127.0.0.1:70000", "example.com:80", "[::1]", "[zz]:80", "unix:", "1.2.3:80"])
    func invalidAddressesAreRefused(text: String) {
        #expect(SocketAddress.parse(text) == nil)
    }

    @Test(arguments: [
        ("http://127.0.0.1:3000", "127.0.0.1:3000"),
        ("http://127.0.0.1", "127.0.0.1:80"),
        ("HTTP://127.0.0.1:3000/", "127.0.0.1:3000"),
        ("unix:/tmp/app.sock", "unix:/tmp/app.sock"),
        ("http://[::1]", "[::1]:80"),
    ])
    func upstreamTargetsParse(text: String, expected: String) {
        #expect(UpstreamTarget.parse(text)?.description == expected)
        #expect(UpstreamTarget.parse(text)?.tls == false)
    }

    @Test(arguments: [
        ("https://127.0.0.1:8443", "127.0.0.1:8443"),
        ("https://127.0.0.1", "127.0.0.1:443"),
        ("HTTPS://[::1]/", "[::1]:443"),
    ])
    func httpsUpstreamTargetsParseWithTLS(text: String, expected: String) {
        let target = UpstreamTarget.parse(text)
        #expect(target?.description == expected)
        #expect(target?.tls == true)
    }

    @Test(arguments: [
        ("http://app:3000", "app", 3000, false),
        ("http://App.Internal", "app.internal", 80, false),
        ("https://api.example.com/", "api.example.com", 443, true),
        ("https://web-1.default.svc.cluster.local:8443", "web-1.default.svc.cluster.local", 8443, true),
    ])
    func upstreamHostNamesParseAsNames(text: String, name: String, port: Int, tls: Bool) {
        let target = UpstreamTarget.parse(text)
        #expect(target?.endpoint == .name(name, port: UInt16(port)))
        #expect(target?.tls == tls)
        #expect(target?.address == nil)
        #expect(target?.host == name)
        #expect(target?.description == "\(name):\(port)")
    }

    @Test(arguments: [
        "ftp://x", "127.0.0.1:3000", "http://", "https://", "https://:443",
        // Not host names: userinfo, underscores, bad labels, ports, numeric-looking names.
        "http://user@app:3000", "http://my_app:3000", "http://-app:3000", "http://app-:3000", "http://app..x:3000",
        "http://app:0", "http://app:70000", "http://app:x", "http://app:3000/path", "http://1.2.3:80", "http://0x7f:80", "http://017.1:80", "http://[app]:80",
        "http://app%2e:80", "http://app\\x:80",
    ])
    func unsupportedUpstreamsAreRefused(text: String) {
        #expect(UpstreamTarget.parse(text) == nil)
    }

    @Test(arguments: [
        ("203.0.113.7", "203.0.113.7"), ("2001:db8::1", "2001:db8::1"), ("::ffff:192.0.2.1", "192.0.2.1"),
    ])
    func peerAddressesParseFromText(text: String, expected: String) {
        #expect(PeerAddress(text: text)?.text == expected)
    }

    @Test(arguments: ["", "unknown", "203.0.113.7:8080", "[2001:db8::1]", "1.2.3", " 1.2.3.4",
                      "1.2.3.4\u{0}junk", "1.2.3.4\u{0}", "::1\u{0}", "fe80::1%eth0", String(repeating: "1", count: 46)])
    func otherForwardedForEntriesAreNotAddresses(text: String) {
        #expect(PeerAddress(text: text) == nil)
    }

    private func peer(_ text: String) -> PeerAddress {
        var storage = sockaddr_storage()
        withUnsafeMutableBytes(of: &storage) { raw in
            if text.contains(":") {
                let sin6 = raw.baseAddress!.assumingMemoryBound(to: sockaddr_in6.self)
                sin6.pointee.sin6_family = sa_family_t(AF_INET6)
                _ = inet_pton(AF_INET6, text, &sin6.pointee.sin6_addr)
            } else {
                let sin = raw.baseAddress!.assumingMemoryBound(to: sockaddr_in.self)
                sin.pointee.sin_family = sa_family_t(AF_INET)
                _ = inet_pton(AF_INET, text, &sin.pointee.sin_addr)
            }
        }
        return withUnsafeBytes(of: &storage) { PeerAddress(storage: $0.baseAddress!) }
    }

    @Test(arguments: [
        ("10.0.0.0/8", "10.1.2.3", true),
        ("10.0.0.0/8", "11.0.0.1", false),
        ("192.168.1.0/25", "192.168.1.127", true),
        ("192.168.1.0/25", "192.168.1.128", false),
        ("127.0.0.1", "127.0.0.1", true),
        ("127.0.0.1", "127.0.0.2", false),
        ("0.0.0.0/0", "8.8.8.8", true),
        ("::1/128", "::1", true),
        ("fd00::/8", "fd12:3456::1", true),
        ("fd00::/8", "fe80::1", false),
        ("127.0.0.0/8", "::ffff:127.0.0.9", true),
        ("::1/128", "127.0.0.1", false),
    ])
    func trustedRangesMatchPeers(cidr: String, address: String, matches: Bool) throws {
        let range = try #require(CIDR.parse(cidr))
        #expect(range.contains(peer(address)) == matches)
    }

    @Test func peersPrintAsForwardedForValues() {
        #expect(peer("203.0.113.7").text == "203.0.113.7")
        #expect(peer("::ffff:10.0.0.1").text == "10.0.0.1")
        #expect(peer("2001:db8::1").text == "2001:db8::1")
    }

    @Test(arguments: ["10.0.0.0/33", "::/129", "nonsense", "10.0.0.0/x"])
    func invalidRangesAreRefused(text: String) {
        #expect(CIDR.parse(text) == nil)
    }
}
