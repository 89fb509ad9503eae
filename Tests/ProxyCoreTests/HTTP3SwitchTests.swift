import Testing
@testable import ProxyCore

/// `http3.enabled` as the TCP side sees it: a reload that would turn QUIC on or off (its UDP
/// sockets are bound at start) refused.
@Suite struct HTTP3SwitchTests {
    struct PassThrough: HTTPPhases {}

    static func spec(http3: Bool, port: UInt16 = 18_443) -> ListenerSpec {
        var config = ProxyConfig()
        config.http3.enabled = http3
        return ListenerSpec(name: "public", address: .ipv4(host: "127.0.0.1", port: port), config: config, phases: PassThrough())
    }

    /// The server is never started: a refused reload touches no loop.
    @Test(arguments: [false, true])
    func aReloadThatTurnsHTTP3OnOrOffIsRefused(_ before: Bool) throws {
        let server = try ProxyServer(listeners: [Self.spec(http3: before)], loopCount: 1, log: Logger(level: .error), accessLog: nil)
        do {
            try server.reload([Self.spec(http3: !before)])
            Issue.record("a reload that changes http3.enabled was accepted")
        } catch {
            #expect(error.message == "http3.enabled changed: restart to apply")
        }
        // A changed address is named as before.
        do {
            try server.reload([Self.spec(http3: !before, port: 18_444)])
            Issue.record("a changed address was accepted")
        } catch {
            #expect(error.message == "the listeners changed (names or addresses): restart to apply")
        }
    }
}
