import Testing
@testable import ProxyCore

/// Which `tls.sni` entry serves a server name: the table TCP (OpenSSL) and QUIC (GnuTLS) share.
@Suite struct SNINamesTests {
    let names = SNINames([
        SNICertificate(names: ["a.test"], certFile: "a.pem", keyFile: "a.key"),
        SNICertificate(names: ["B.test", "also-b.test"], certFile: "b.pem", keyFile: "b.key"),
        SNICertificate(names: ["*.wild.test"], certFile: "w.pem", keyFile: "w.key"),
        SNICertificate(names: ["a.test"], certFile: "a2.pem", keyFile: "a2.key"),
    ])

    @Test(arguments: [
        ("A.TEST", 3),           // a later entry naming the same name wins; case does not matter
        ("b.test", 1), ("also-b.test", 1),
        ("x.wild.test", 2), ("X.Wild.Test", 2),
    ] as [(String, Int)])
    func aNameFindsItsEntry(_ name: String, _ index: Int) {
        #expect(names.index(for: name) == index)
    }

    @Test(arguments: ["wild.test", "a.b.wild.test", "unknown.test", "test", ""])
    func otherNamesGetTheDefault(_ name: String) {
        #expect(names.index(for: name) == nil)
    }
}
