import Testing
@testable import ProxyCore

@Suite struct HTTPSRedirectTests {
    @Test(arguments: [
        ("example.com", "/", 443, "https://example.com/"),
        ("example.com:80", "/a/b?c=1&d=%20", 443, "https://example.com/a/b?c=1&d=%20"),
        ("Example.COM:8080", "/x", 8443, "https://example.com:8443/x"),
        ("127.0.0.1:8080", "/x?y", 8443, "https://127.0.0.1:8443/x?y"),
        ("[::1]:8080", "/", 443, "https://[::1]/"),
        ("[2001:db8::1]", "/p", 443, "https://[2001:db8::1]/p"),
        ("a-b.c-d.example", "//evil.example/path", 443, "https://a-b.c-d.example//evil.example/path"),
        ("localhost", "/?next=https://evil.example", 443, "https://localhost/?next=https://evil.example"),
    ])
    func locationKeepsHostPathAndQueryOnTheHTTPSPort(host: String, target: String, port: Int, expected: String) {
        #expect(HTTPSRedirect.location(host: host, target: target, httpsPort: UInt16(port)) == expected)
    }

    /// Every one of these would let a crafted Host send the client somewhere else, or is not a
    /// host at all: the listener answers 400 instead of redirecting.
    @Test(arguments: [
        "", "evil.example@good.test", "good.test@evil.example", "user:pass@good.test",
        "good.test\\evil.example", "good.test\\@evil.example", "good.test/evil", "good.test?x", "good.test#x",
        "good.test%2f@evil.example", "%65vil.example", "good.test:", "good.test:0", "good.test:65536",
        "good.test:99999", "good.test:80:80", "good.test:8o", ":80", "-bad.test", "bad-.test", "good..test",
        ".good.test", "good.test.", "good test", "good.test\t", "good\u{0}.test", "gööd.test", "xn--.test:abc",
        String(repeating: "a", count: 64) + ".test", String(repeating: "a.", count: 127) + "test",
        "[::1", "::1", "[::1]x", "[::1]:", "[fe80::1%25eth0]", "[fe80::1%eth0]", "[v1.x]", "[]", "[127.0.0.1]",
        "*.example.com", "_dmarc.example.com",
    ])
    func hostileOrInvalidHostsAreRefused(host: String) {
        #expect(HTTPSRedirect.location(host: host, target: "/", httpsPort: 443) == nil)
    }

    @Test(arguments: ["*", "example.com:443", "http://x/", ""])
    func nonOriginTargetsAreRefused(target: String) {
        #expect(HTTPSRedirect.location(host: "example.com", target: target, httpsPort: 443) == nil)
    }

    @Test func aMaximalLegalNameIsAccepted() {
        let label = String(repeating: "a", count: 63)
        let name = [label, label, label, String(repeating: "b", count: 61)].joined(separator: ".")
        #expect(name.utf8.count == 253)
        #expect(HTTPSRedirect.location(host: name, target: "/", httpsPort: 443) == "https://\(name)/")
        #expect(HTTPSRedirect.location(host: name + "c", target: "/", httpsPort: 443) == nil)
    }
}

@Suite struct TLSSettingsTests {
    @Test(arguments: [("1.2", TLSVersion.tls12), ("1.3", .tls13), ("TLSv1.2", .tls12), ("tls1.3", .tls13)])
    func minimumVersionsParse(text: String, expected: TLSVersion) {
        #expect(TLSVersion(text) == expected)
    }

    @Test(arguments: ["1.0", "1.1", "1", "2", "", "ssl3", "1.2.0"])
    func olderOrUnknownVersionsAreRefused(text: String) {
        #expect(TLSVersion(text) == nil)
    }

    @Test(arguments: ["example.com", "A.Example.COM", "*.example.com", "localhost", "x-1.test"])
    func sniPatternsAccepted(name: String) {
        #expect(SNICertificate.isValidPattern(name))
    }

    @Test(arguments: ["", "*", "*.", "a.*.example.com", "**.example.com", "*example.com", "ex ample.com", "example.com.", "-a.test"])
    func sniPatternsRefused(name: String) {
        #expect(!SNICertificate.isValidPattern(name))
    }

    @Test(arguments: [("up.internal", true), ("10.0.0.5", true), ("::1", true), ("bad name", false), ("*.x.test", false), ("", false)])
    func upstreamServerNames(name: String, valid: Bool) {
        #expect(UpstreamTLSSettings.isValidServerName(name) == valid)
    }
}
