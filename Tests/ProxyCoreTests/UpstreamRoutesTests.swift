import Testing
@testable import ProxyCore

@Suite struct UpstreamRoutesTests {
    static func prefix(_ p: String) -> PathPrefix { try! PathPrefix.parse(p).get() }

    static let routes = UpstreamRoutes([
        UpstreamRoute(paths: [prefix("/cable")], group: 1),
        UpstreamRoute(hosts: ["api.example.com"], group: 2),
        UpstreamRoute(hosts: ["*.shop.example"], paths: [prefix("/admin")], group: 3),
        UpstreamRoute(hosts: ["shop.example"], paths: [prefix("/admin"), prefix("/api/v2")], group: 1),
    ])!

    static func group(_ host: String?, _ path: String) -> Int {
        let p = Array(path.utf8)
        return p.withUnsafeBytes { path in
            guard let host else { return routes.group(host: nil, path: path) }
            return Array(host.utf8).withUnsafeBytes { routes.group(host: $0, path: path) }
        }
    }

    @Test(arguments: [
        ("www.example.com", "/cable", 1), ("www.example.com", "/cable/x", 1), ("www.example.com", "/cables", 0),
        ("www.example.com", "/", 0), (nil, "/cable", 1), (nil, "/x", 0),
        // The first route that matches wins: /cable on the API host is still the cable group.
        ("api.example.com", "/cable", 1), ("api.example.com", "/v1/users", 2),
        ("API.Example.COM:8443", "/v1", 2), ("api.example.com.", "/v1", 2), ("api.example.com:443", "/", 2),
        ("xapi.example.com", "/v1", 0), ("api.example.co", "/v1", 0),
        ("eu.shop.example", "/admin/users", 3), ("a.b.shop.example", "/admin", 3), ("shop.example", "/admin", 1),
        ("eu.shop.example", "/api/v2", 0), ("shop.example", "/api/v2/x", 1), ("shop.example", "/api/v3", 0),
        ("[::1]:8080", "/v1", 0),
    ] as [(String?, String, Int)])
    func requestsGoToTheFirstMatchingRoutesGroup(_ host: String?, _ path: String, _ expected: Int) {
        #expect(Self.group(host, path) == expected)
    }

    @Test func noRoutesAskNothing() {
        #expect(UpstreamRoutes([]) == nil)
    }

    @Test(arguments: [("Example.COM:80", "example.com"), ("[::1]:80", "[::1]"), ("a.", "a"), ("x", "x"), ("[fe80::1]", "[fe80::1]")])
    func hostNames(_ value: String, _ expected: String) {
        let name = Array(value.utf8).withUnsafeBytes { UpstreamRoutes.hostName($0) }
        #expect(String(decoding: name, as: UTF8.self) == expected)
    }

    @Test(arguments: [("example.com", true), ("*.example.com", true), ("*", false), ("a*.b", false), ("exa mple", false), ("", false)])
    func hostPatterns(_ text: String, _ ok: Bool) {
        #expect(UpstreamRoute.isHostPattern(text) == ok)
    }
}
