import Testing
@testable import ProxyCore

/// Requests read from early data (0-RTT), through a real exchange: safe methods go on, the
/// rest — and whatever the phases keep for after the handshake — get 425 Too Early, and none of
/// them reaches the app.
@Suite struct EarlyDataTests {
    /// Keeps `/account` for after the handshake.
    struct Phases: HTTPPhases {
        func acceptsEarlyData(_ request: borrowing RequestView) -> Bool { request.path != "/account" }
    }

    static func status(_ response: String) -> Int {
        Int(response.split(separator: " ", maxSplits: 2).dropFirst().first ?? "") ?? 0
    }

    @Test(arguments: ["GET", "HEAD", "OPTIONS"])
    func aSafeMethodInEarlyDataReachesTheApp(method: String) throws {
        let x = try EmbeddedExchange(phases: Phases())
        x.earlyData = true
        x.send("\(method) /page HTTP/1.1\r\nHost: a\r\n\r\n")
        #expect(x.proxied)
        #expect(x.upstreamRequest()?.hasPrefix("\(method) /page HTTP/1.1\r\n") == true)
    }

    @Test(arguments: ["POST", "PUT", "DELETE", "PATCH"])
    func anUnsafeMethodInEarlyDataIsTooEarly(method: String) throws {
        let x = try EmbeddedExchange(phases: Phases())
        x.earlyData = true
        x.send("\(method) /page HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nx=1")
        #expect(Self.status(x.receive()) == 425)
        #expect(!x.proxied)
        #expect(x.upstreamRequest(seconds: 0.2) == nil)
    }

    @Test func aPathThePhasesKeepForAfterTheHandshakeIsTooEarlyEvenForGET() throws {
        let x = try EmbeddedExchange(phases: Phases())
        x.earlyData = true
        x.send("GET /account HTTP/1.1\r\nHost: a\r\n\r\n")
        #expect(Self.status(x.receive()) == 425)
        #expect(x.upstreamRequest(seconds: 0.2) == nil)
    }

    @Test func theSameRequestsAfterTheHandshakeGoOn() throws {
        let x = try EmbeddedExchange(phases: Phases())
        x.send("POST /account HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nx=1")
        #expect(x.proxied)
    }
}
