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
        let request = x.upstreamRequest() ?? ""
        #expect(request.hasPrefix("\(method) /page HTTP/1.1\r\n"))
        // RFC 8470 §5.1: the app is told, and may answer 425 itself.
        #expect(request.contains("\r\nEarly-Data: 1\r\n"))
    }

    @Test func theMarkEndsWithItsRequest() throws {
        let x = try EmbeddedExchange(phases: Phases())
        x.earlyData = true
        x.send("GET /page HTTP/1.1\r\nHost: a\r\n\r\n")
        #expect(x.upstreamRequest()?.contains("Early-Data: 1") == true)
        x.upstreamResponds("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", seconds: 1)
        #expect(x.receive().hasPrefix("HTTP/1.1 200 "))
        #expect(!x.earlyData)
        x.send("GET /two HTTP/1.1\r\nHost: a\r\n\r\n")
        #expect(x.proxied)
        let second = x.upstreamRequest() ?? ""
        #expect(second.hasPrefix("GET /two ") && !second.contains("Early-Data"), "\(second)")
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
        // (A head with a body: the bytes end with it, not with the blank line the reader waits for.)
        let request = x.upstreamRequest(seconds: 0.5) ?? ""
        #expect(request.hasPrefix("POST /account ") && !request.contains("Early-Data"))
    }
}
