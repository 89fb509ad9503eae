import Testing
@testable import ProxyCore

/// `http3.enabled` as the TCP side sees it: the `Alt-Svc` a listener advertises, and a reload
/// that would turn QUIC on or off (its UDP sockets are bound at start) refused.
@Suite struct HTTP3SwitchTests {
    static func on(maxAge: Int = 86_400) -> HTTP3Settings {
        var h = HTTP3Settings()
        h.enabled = true
        h.altSvcMaxAge = maxAge
        return h
    }

    @Test func aTLSListenerAdvertisesItsOwnPortWhileHTTP3IsOn() {
        #expect(ListenerContext.altSvc(tls: true, address: .ipv4(host: "0.0.0.0", port: 8443), Self.on())
                == "h3=\":8443\"; ma=86400")
        #expect(ListenerContext.altSvc(tls: true, address: .ipv6(host: "::", port: 443), Self.on(maxAge: 3_600))
                == "h3=\":443\"; ma=3600")
    }

    @Test func nothingIsAdvertisedOffOnAPlainListenerOrOnAPortTheKernelChooses() {
        #expect(ListenerContext.altSvc(tls: true, address: .ipv4(host: "0.0.0.0", port: 8443), HTTP3Settings()) == nil)
        #expect(ListenerContext.altSvc(tls: false, address: .ipv4(host: "0.0.0.0", port: 8080), Self.on()) == nil)
        #expect(ListenerContext.altSvc(tls: true, address: .ipv4(host: "127.0.0.1", port: 0), Self.on()) == nil)
        #expect(ListenerContext.altSvc(tls: true, address: .unix(path: "/run/p.sock"), Self.on()) == nil)
    }

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
