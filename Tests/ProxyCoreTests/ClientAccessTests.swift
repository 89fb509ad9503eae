import Testing
@testable import ProxyCore

/// `client_access`: which client addresses reach which paths — the rule alone, then through a
/// real exchange (`EmbeddedExchange`) with its client address, readings and answer.
@Suite struct ClientAccessTests {
    static func rule(paths: [String] = [], allow: [String] = [], deny: [String] = []) throws -> ClientAccessRule {
        var r = ClientAccessRule(name: "test")
        r.paths = try paths.map { try PathPrefix.parse($0).get() }
        r.allow = allow.map { CIDR.parse($0)! }
        r.deny = deny.map { CIDR.parse($0)! }
        return r
    }

    static func address(_ text: String) -> PeerAddress { PeerAddress(text: text)! }

    @Test func anAllowListRefusesEveryoneElse() throws {
        let r = try Self.rule(allow: ["10.0.0.0/8", "2001:db8::/32"])
        #expect(!r.refuses(Self.address("10.1.2.3")))
        #expect(!r.refuses(Self.address("2001:db8::7")))
        #expect(r.refuses(Self.address("192.0.2.1")))
        #expect(r.refuses(Self.address("2001:db9::1")))
        // A client without an address is not on the list.
        #expect(r.refuses(nil))
    }

    @Test func denyWinsWhateverTheOrder() throws {
        let r = try Self.rule(allow: ["10.0.0.0/8"], deny: ["10.9.0.0/16"])
        #expect(r.refuses(Self.address("10.9.1.1")))
        #expect(!r.refuses(Self.address("10.8.1.1")))
        let denyOnly = try Self.rule(deny: ["203.0.113.0/24"])
        #expect(denyOnly.refuses(Self.address("203.0.113.9")))
        #expect(!denyOnly.refuses(Self.address("198.51.100.1")))
        #expect(!denyOnly.refuses(nil))
    }

    // MARK: Through an exchange

    static func config(trusting proxy: String? = nil) throws -> ProxyConfig {
        var c = ProxyConfig()
        c.clientAccess = [try rule(paths: ["/admin"], allow: ["10.0.0.0/8"])]
        if let proxy { c.trustedProxies = [CIDR.parse(proxy)!] }
        return c
    }

    struct PassThrough: HTTPPhases {}

    @Test(arguments: ["/admin", "/ADMIN/users", "/admin.json", "/admin%09", "/x/../admin"])
    func aClientNotAllowedIsRefusedOnEverySpellingOfThePath(path: String) throws {
        let x = try EmbeddedExchange(phases: PassThrough(), config: Self.config(), peer: "192.0.2.1")
        x.send("GET \(path) HTTP/1.1\r\nHost: a\r\nAccept: application/json\r\n\r\n")
        let response = x.receive()
        #expect(!x.proxied)
        #expect(response.hasPrefix("HTTP/1.1 403 "), "\(path)")
        #expect(response.contains("\"status\":403") && response.contains("\"message\":\"Client address not allowed here.\""))
        #expect(!response.contains("test"), "the rule's name is the operator's")
    }

    @Test func anAllowedClientAndOtherPathsGoThrough() throws {
        let inside = try EmbeddedExchange(phases: PassThrough(), config: Self.config(), peer: "10.1.2.3")
        inside.send("GET /admin HTTP/1.1\r\nHost: a\r\n\r\n")
        #expect(inside.proxied)
        let elsewhere = try EmbeddedExchange(phases: PassThrough(), config: Self.config(), peer: "192.0.2.1")
        elsewhere.send("GET /administrator HTTP/1.1\r\nHost: a\r\n\r\n")
        #expect(elsewhere.proxied)
    }

    @Test(arguments: [
        ("10.1.2.3", true),
        ("198.51.100.7", false),
        // A client cannot put an allowed address in front of its own: the right-most
        // untrusted entry is the client.
        ("10.1.2.3, 198.51.100.7", false),
        ("not-an-address", false),
    ])
    func behindATrustedProxyTheForwardedClientDecides(forwarded: String, allowed: Bool) throws {
        let x = try EmbeddedExchange(phases: PassThrough(), config: Self.config(trusting: "127.0.0.1/32"), peer: "127.0.0.1")
        x.send("GET /admin HTTP/1.1\r\nHost: a\r\nX-Forwarded-For: \(forwarded)\r\n\r\n")
        #expect(x.proxied == allowed, "\(forwarded)")
    }
}
