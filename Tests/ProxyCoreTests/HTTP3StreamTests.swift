import CNghttp3
import Foundation
import Testing
@testable import ProxyCore

/// The HTTP/3 downstream driven through the real exchange with no QUIC and no socket
/// (`HTTP3StreamHarness` plays nghttp3; `EmbeddedUpstream` plays the app): the request head
/// rewrite into the upstream request, the response head and body as nghttp3 is given them,
/// request-body credit, the unacknowledged-bytes limit and its back-pressure on the upstream,
/// early data, resets both ways, and streams that wait for or are refused a budget unit.
@Suite struct HTTP3StreamTests {
    /// Answers `/now` at once, never answers `/never`; lets everything else through.
    struct Phases: HTTPPhases {
        func requestFilter(_ request: borrowing RequestView) -> RequestDecision {
            switch request.path {
            case "/now": return .respond(Response(status: 403, text: "no\n"))
            case "/gone": return .respond(Response(status: 410))
            case "/never": return .deferred { _ in }
            default: return .proceed(UpstreamRewrite())
            }
        }
    }

    static func request(method: String = "GET", _ path: String, authority: String = "app.example",
                        _ extra: [(String, String)] = []) -> [(String, String)] {
        [(":method", method), (":scheme", "https"), (":authority", authority), (":path", path)] + extra
    }

    static let noError = UInt64(NGHTTP3_H3_NO_ERROR)

    /// The whole response body as a client reading at its own pace receives it: pulled as
    /// nghttp3 would, each pull acknowledged.
    static func body(of s: HTTP3Stream, on h: HTTP3StreamHarness, seconds: Double = 10) -> [UInt8]? {
        var body: [UInt8] = []
        let ended = h.run(until: {
            let pulled = h.pull(s)
            body += pulled.bytes
            if !pulled.bytes.isEmpty { h.acknowledge(s, pulled.bytes.count) }
            return pulled.end
        }, seconds: seconds)
        return ended ? body : nil
    }

    @Test func aGetReachesTheAppRewrittenAndItsResponseComesBackAsHeadAndBody() throws {
        let h = try HTTP3StreamHarness(phases: Phases())
        let s = h.open(0, Self.request("/a/./b/../c?q=1", [("user-agent", "t/1")]))
        let request = try #require(h.upstreamRequest())
        #expect(request.hasPrefix("GET /a/c?q=1 HTTP/1.1\r\n"))
        #expect(request.contains("\r\nHost: app.example\r\n"))
        #expect(request.contains("\r\nuser-agent: t/1\r\n") || request.contains("\r\nUser-Agent: t/1\r\n"))
        #expect(request.contains("\r\nX-Forwarded-For: 192.0.2.10\r\n"))

        h.upstream.respond(Array("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: keep-alive\r\nX-App: yes\r\n\r\nhello".utf8))
        #expect(h.run(until: { h.responses[0] != nil }))
        let response = try #require(h.responses[0])
        #expect(response.head.status == 200)
        #expect(response.head.fields["content-length"] == "5")
        #expect(response.head.fields["x-app"] == "yes")
        #expect(response.head.fields["connection"] == nil && response.head.fields["keep-alive"] == nil)
        #expect(response.withBody)
        #expect(Self.body(of: s, on: h) == Array("hello".utf8))
        #expect(h.submissions == 1)

        h.close(s)
        #expect(s.exchange.isClosed)
        #expect(h.closedStreams == [0])
        #expect(h.resets.isEmpty)
        #expect(h.listener.engineMetrics.http3.resetsReceived.current == 0)
    }

    @Test func aBodilessResponseGoesWithFINOnItsHeaders() throws {
        let h = try HTTP3StreamHarness(phases: Phases())
        let s = h.open(0, Self.request(method: "HEAD", "/page"))
        _ = try #require(h.upstreamRequest())
        h.upstream.respond(Array("HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\n".utf8))
        #expect(h.run(until: { h.responses[0] != nil }))
        #expect(h.responses[0]?.head.fields["content-length"] == "1234")
        #expect(h.responses[0]?.withBody == false)
        #expect(h.stoppedReading.isEmpty)  // the request had ended with its head
        h.close(s)
        #expect(h.resets.isEmpty)
    }

    @Test(arguments: [("Upper-Case", "x"), ("connection", "close"), ("transfer-encoding", "chunked"), (":protocol", "websocket")])
    func aMalformedRequestIsResetWithMessageErrorAndNeverReachesTheApp(_ field: (String, String)) throws {
        let h = try HTTP3StreamHarness(phases: Phases())
        let s = h.open(0, Self.request("/", [field]))
        #expect(h.resets[0] == UInt64(NGHTTP3_H3_MESSAGE_ERROR))
        #expect(s.exchange.isClosed)
        #expect(h.responses.isEmpty)
        h.run(until: { false }, seconds: 0.1)
        #expect(h.upstream.received.isEmpty)
    }

    @Test func aRequestWithoutItsPathIsMalformed() throws {
        let h = try HTTP3StreamHarness(phases: Phases())
        h.open(0, [(":method", "GET"), (":scheme", "https"), (":authority", "app.example")])
        #expect(h.resets[0] == UInt64(NGHTTP3_H3_MESSAGE_ERROR))
    }

    @Test func anAuthorityThatDiffersFromHostIsAnswered400AndNeverReachesTheApp() throws {
        let h = try HTTP3StreamHarness(phases: Phases())
        h.open(0, Self.request("/", [("host", "other.example")]))
        #expect(h.responses[0]?.head.status == 400)
        #expect(h.resets.isEmpty)
        h.run(until: { false }, seconds: 0.1)
        #expect(h.upstream.received.isEmpty)
    }

    @Test func connectIsRefusedAndNeverReachesTheApp() throws {
        let h = try HTTP3StreamHarness(phases: Phases())
        h.open(0, [(":method", "CONNECT"), (":authority", "internal.example:22")])
        #expect(h.responses[0]?.head.status == 501)
        h.run(until: { false }, seconds: 0.1)
        #expect(h.upstream.received.isEmpty)
    }

    @Test func aRequestBodyIsCreditedBackOnlyAsTheExchangePassesItOn() throws {
        let h = try HTTP3StreamHarness(phases: Phases())
        let s = h.open(0, Self.request(method: "POST", "/form", [("content-length", "5")]), endStream: false)
        _ = try #require(h.upstreamRequest())
        #expect(h.data(s, "hel"))
        let partial = try #require(h.upstreamRequest(bodyBytes: 3))
        #expect(partial.hasSuffix("\r\n\r\nhel"))
        #expect(h.credited[0] == 3)
        #expect(h.data(s, "lo", end: true))
        let whole = try #require(h.upstreamRequest(bodyBytes: 5))
        #expect(whole.hasPrefix("POST /form HTTP/1.1\r\n"))
        #expect(whole.hasSuffix("\r\n\r\nhello"))
        #expect(h.credited[0] == 5)
    }

    @Test func aStreamWhoseExchangeDoesNotReadKeepsTheClientToItsWindow() throws {
        let h = try HTTP3StreamHarness(phases: Phases())
        let s = h.open(0, Self.request(method: "POST", "/never", [("content-length", "3")]), endStream: false)
        #expect(s.exchange.isDeciding)
        #expect(h.data(s, "abc"))
        h.run(until: { false }, seconds: 0.1)
        #expect(h.credited[0] == nil)
        #expect(h.upstream.received.isEmpty)
    }

    @Test func aResponseBeforeTheRequestBodyEndsTellsTheClientToStopSending() throws {
        let h = try HTTP3StreamHarness(phases: Phases())
        let s = h.open(0, Self.request(method: "POST", "/now", [("content-length", "100000")]), endStream: false)
        #expect(h.responses[0]?.head.status == 403)
        #expect(Self.body(of: s, on: h) == Array("no\n".utf8))
        #expect(h.stoppedReading == [0])
        // DATA still in flight is dropped and its credit given back at once by the caller.
        h.close(s)
        #expect(!h.data(s, "late"))
    }

    @Test func aBodilessAnswerBeforeTheRequestBodyEndsTellsTheClientToStopSending() throws {
        let h = try HTTP3StreamHarness(phases: Phases())
        h.open(0, Self.request(method: "POST", "/gone", [("content-length", "100000")]), endStream: false)
        #expect(h.responses[0]?.head.status == 410)
        #expect(h.responses[0]?.withBody == false)
        #expect(h.stoppedReading == [0])
    }

    /// A slow client: nghttp3 holds at most `unackedLimit` bytes it has not had acknowledged, the
    /// exchange's output fills, and the upstream is no longer read — the app cannot write its
    /// whole body. Acknowledgements resume the stream and the body arrives whole.
    @Test func aClientThatDoesNotAcknowledgeHoldsTheUpstreamBack() throws {
        let h = try HTTP3StreamHarness(phases: Phases())
        let s = h.open(0, Self.request("/big"))
        _ = try #require(h.upstreamRequest())
        let size = 4 * 1024 * 1024
        let body = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 12) }
        h.upstream.respond(Array("HTTP/1.1 200 OK\r\nContent-Length: \(size)\r\n\r\n".utf8) + body)
        #expect(h.run(until: { h.responses[0] != nil }))

        var received: [UInt8] = []
        // Pulled with no acknowledgement: it stops at the limit, however long the loop turns.
        h.run(until: {
            received += h.pull(s).bytes
            return received.count >= HTTP3Stream.unackedLimit
        })
        // (It may have been resumed before: a pull that found the output empty waits for the
        // upstream's next bytes. At the limit, bytes coming do not resume it.)
        let resumedAtLimit = h.resumed[0, default: 0]
        h.run(until: { false }, seconds: 0.3)
        received += h.pull(s).bytes
        #expect(received.count == HTTP3Stream.unackedLimit)
        #expect(s.unacked == HTTP3Stream.unackedLimit)
        #expect(h.resumed[0, default: 0] == resumedAtLimit)
        // The output stopped near its high-water mark (a read may pass it by one chunk).
        #expect(s.exchange.output.readable < 2 * Exchange.highWater)
        #expect(!h.upstream.sentAll)

        // Half the limit acknowledged is not yet enough; all of it is.
        h.acknowledge(s, HTTP3Stream.unackedLimit / 2 - 1)
        #expect(h.resumed[0, default: 0] == resumedAtLimit)
        h.acknowledge(s, HTTP3Stream.unackedLimit / 2 + 1)
        #expect(h.resumed[0, default: 0] == resumedAtLimit + 1)
        received += try #require(Self.body(of: s, on: h))
        #expect(received.count == size)
        #expect(received == body)
        #expect(h.upstream.sentAll)
    }

    @Test func aClientResetMidResponseEndsTheExchangeAndItsUpstreamConnection() throws {
        let h = try HTTP3StreamHarness(phases: Phases())
        let s = h.open(0, Self.request("/slow"))
        _ = try #require(h.upstreamRequest())
        h.upstream.respond(Array("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789".utf8))
        #expect(h.run(until: { h.responses[0] != nil }))
        h.close(s, code: UInt64(NGHTTP3_H3_REQUEST_CANCELLED))
        #expect(s.exchange.isClosed)
        #expect(h.run(until: { h.upstream.closedByProxy }))
        #expect(h.resets.isEmpty)  // nghttp3 closed it already
        #expect(h.listener.engineMetrics.http3.resetsReceived.current == 1)
    }

    @Test func anUpstreamThatDiesMidResponseResetsTheStream() throws {
        let h = try HTTP3StreamHarness(phases: Phases())
        let s = h.open(0, Self.request("/cut"))
        _ = try #require(h.upstreamRequest())
        h.upstream.respond(Array("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789".utf8))
        #expect(h.run(until: { h.responses[0] != nil }))
        #expect(h.run(until: { h.upstream.sentAll }))
        h.upstream.hangUp()
        #expect(h.run(until: { s.exchange.isClosed }))
        #expect(h.resets[0] == UInt64(NGHTTP3_H3_INTERNAL_ERROR))
        // What was sent before is still pulled; then nothing more, and no end.
        let pulled = h.pull(s)
        #expect(!pulled.end)
    }

    @Test func aHeadNghttp3RefusesAbortsTheStream() throws {
        let h = try HTTP3StreamHarness(phases: Phases())
        h.refuseResponses = true
        let s = h.open(0, Self.request("/now"))
        #expect(s.exchange.isClosed)
        #expect(h.resets[0] == UInt64(NGHTTP3_H3_INTERNAL_ERROR))
    }

    @Test func anInformationalResponseGoesBeforeTheFinalOne() throws {
        let h = try HTTP3StreamHarness(phases: Phases())
        let s = h.open(0, Self.request("/hints"))
        _ = try #require(h.upstreamRequest())
        h.upstream.respond(Array("HTTP/1.1 103 Early Hints\r\nLink: </app.css>; rel=preload\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".utf8))
        #expect(h.run(until: { h.responses[0] != nil }))
        #expect(h.informational[0]?.map(\.status) == [103])
        #expect(h.informational[0]?.first?.fields["link"] == "</app.css>; rel=preload")
        #expect(Self.body(of: s, on: h) == Array("ok".utf8))
    }

    @Test func aSafeRequestFromEarlyDataReachesTheAppMarked() throws {
        let h = try HTTP3StreamHarness(phases: Phases())
        h.open(0, Self.request("/page"), early: true)
        let request = try #require(h.upstreamRequest())
        #expect(request.contains("\r\nEarly-Data: 1\r\n"))
    }

    @Test(arguments: ["POST", "DELETE", "PATCH"])
    func anUnsafeRequestFromEarlyDataIsAnswered425(_ method: String) throws {
        let h = try HTTP3StreamHarness(phases: Phases())
        h.open(0, Self.request(method: method, "/form", [("content-length", "0")]), early: true)
        #expect(h.responses[0]?.head.status == 425)
        h.run(until: { false }, seconds: 0.1)
        #expect(h.upstream.received.isEmpty)
    }

    /// Answered from early data before our QPACK streams are open: the response waits for them,
    /// and goes once when they open, however often the stream flushed meanwhile.
    @Test func aResponseBeforeOurStreamsOpenWaitsForThemAndGoesOnce() throws {
        let h = try HTTP3StreamHarness(phases: Phases())
        h.streamsBound = false
        let s = h.open(0, Self.request("/now"), early: true)
        s.flush()
        s.flush()
        #expect(h.responses[0] == nil)
        h.bindStreams()
        #expect(h.responses[0]?.head.status == 403)
        #expect(h.submissions == 1)
        #expect(Self.body(of: s, on: h) == Array("no\n".utf8))
    }

    @Test func aStreamWaitingForABudgetUnitRunsOnlyOnceAdmitted() throws {
        let h = try HTTP3StreamHarness(phases: Phases())
        let s = h.open(0, Self.request("/later"), waiting: true)
        h.run(until: { false }, seconds: 0.1)
        #expect(h.upstream.received.isEmpty)
        h.admit(s)
        let request = try #require(h.upstreamRequest())
        #expect(request.hasPrefix("GET /later HTTP/1.1\r\n"))
    }

    @Test func aStreamRefusedAUnitIsRejectedAndNeverReachesTheApp() throws {
        let h = try HTTP3StreamHarness(phases: Phases())
        let s = h.open(0, Self.request("/later"), waiting: true)
        h.refuse(s)
        #expect(h.resets[0] == UInt64(NGHTTP3_H3_REQUEST_REJECTED))
        #expect(s.exchange.isClosed)
        h.run(until: { false }, seconds: 0.1)
        #expect(h.upstream.received.isEmpty)
    }

    @Test func aRequestBodyThatStopsComingTimesOut() throws {
        let h = try HTTP3StreamHarness(phases: Phases())
        let s = h.open(0, Self.request(method: "POST", "/form", [("content-length", "10")]), endStream: false)
        _ = try #require(h.upstreamRequest())
        h.data(s, "abc")
        #expect(s.deadline != 0)
        h.timerPasses(s)
        #expect(h.responses[0]?.head.status == 408)
        #expect(Self.body(of: s, on: h) != nil)
        // The client is told to stop sending the rest; the app's half-sent request is dropped.
        #expect(h.stoppedReading == [0])
        #expect(h.run(until: { h.upstream.closedByProxy }))
        #expect(h.resets.isEmpty)
    }
}
