import Foundation
import Testing
@testable import ProxyCore

/// The phases seam through a real exchange with no client socket (`EmbeddedExchange`):
/// decisions now and later, answers, what reaches the app, timers.
@Suite struct EmbeddedExchangeTests {
    /// Answers `/now` at once, `/later` from another thread, lets everything else through
    /// with a header added; `/collect` reads the body first.
    struct Phases: HTTPPhases {
        func requestFilter(_ request: borrowing RequestView) -> RequestDecision {
            switch request.path {
            case "/now": return .respond(Response(status: 403, text: "no\n"))
            case "/later":
                return .deferred { sink in
                    Thread.detachNewThread { sink.respond(Response(status: 202, text: "later\n")) }
                }
            case "/later-proceed":
                return .deferred { sink in
                    Thread.detachNewThread {
                        var rewrite = UpstreamRewrite()
                        rewrite.edits.add = [("X-Decided", "later")]
                        sink.proceed(rewrite)
                    }
                }
            case "/never": return .deferred { _ in }
            case "/collect":
                return .collectBody(limit: 16) { body, sink in
                    sink.respond(Response(status: 200, text: "got \(body.count)\n"))
                }
            default:
                var rewrite = UpstreamRewrite()
                rewrite.edits.add = [("X-Checked", "yes")]
                return .proceed(rewrite)
            }
        }
    }

    @Test func anAnswerNowReachesTheClientAndTheConnectionStaysOpen() throws {
        let x = try EmbeddedExchange(phases: Phases())
        x.send("GET /now HTTP/1.1\r\nHost: a\r\n\r\n")
        let response = x.receive()
        #expect(response.hasPrefix("HTTP/1.1 403 "))
        #expect(response.hasSuffix("\r\n\r\nno\n"))
        #expect(!x.closed)
        #expect(x.timer == "keepAlive")
    }

    @Test func aDeferredAnswerFromAnotherThreadIsTakenOnTheLoop() throws {
        let x = try EmbeddedExchange(phases: Phases())
        x.send("GET /later HTTP/1.1\r\nHost: a\r\n\r\n")
        #expect(x.deciding)
        #expect(x.timer == "none")
        #expect(x.run(until: { !x.deciding }))
        #expect(x.receive().hasPrefix("HTTP/1.1 202 "))
    }

    @Test func aDeferredProceedReachesTheAppWithItsEdits() throws {
        let x = try EmbeddedExchange(phases: Phases())
        x.send("GET /later-proceed?q=1 HTTP/1.1\r\nHost: a\r\n\r\n")
        #expect(x.run(until: { x.proxied }))
        let request = try #require(x.upstreamRequest())
        #expect(request.hasPrefix("GET /later-proceed?q=1 HTTP/1.1\r\n"))
        #expect(request.contains("\r\nX-Decided: later\r\n"))
    }

    @Test func aRequestLetThroughReachesTheAppOnItsCanonicalPath() throws {
        let x = try EmbeddedExchange(phases: Phases())
        x.send("GET /a/./b/../c HTTP/1.1\r\nHost: a\r\n\r\n")
        #expect(x.proxied)
        let request = try #require(x.upstreamRequest())
        #expect(request.hasPrefix("GET /a/c HTTP/1.1\r\n"))
        #expect(request.contains("\r\nX-Checked: yes\r\n"))
        #expect(request.contains("\r\nX-Forwarded-For: 192.0.2.10\r\n"))
    }

    @Test func aCollectedBodyIsHandedToThePhaseAndOneTooLargeRefused() throws {
        let x = try EmbeddedExchange(phases: Phases())
        x.send("POST /collect HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhel")
        #expect(x.timer == "body")
        x.send("lo")
        // The body is in; the phase's answer hops through the loop, as every deferred one does.
        #expect(x.deciding && x.timer == "none")
        #expect(x.run(until: { !x.deciding }))
        #expect(x.receive().hasSuffix("got 5\n"))
        let y = try EmbeddedExchange(phases: Phases())
        y.send("POST /collect HTTP/1.1\r\nHost: a\r\nContent-Length: 17\r\n\r\n")
        #expect(y.receive().hasPrefix("HTTP/1.1 413 "))
        #expect(y.closed)
    }

    @Test func aStalledBodyIsAnswered408AndClosed() throws {
        let x = try EmbeddedExchange(phases: Phases())
        x.send("POST /collect HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhe")
        x.timerPasses()
        #expect(x.receive().hasPrefix("HTTP/1.1 408 "))
        #expect(x.closed)
    }

    @Test func aSlowHeadIsAnswered408() throws {
        let x = try EmbeddedExchange(phases: Phases())
        x.send("GET /now HTTP/1.1\r\nHo")
        #expect(x.timer == "header")
        x.timerPasses()
        #expect(x.receive().hasPrefix("HTTP/1.1 408 "))
        #expect(x.closed)
    }

    @Test func aDecisionThatNeverComesHoldsNoTimerAndTheClientMayLeave() throws {
        let x = try EmbeddedExchange(phases: Phases())
        x.send("GET /never HTTP/1.1\r\nHost: a\r\n\r\n")
        #expect(x.deciding && x.timer == "none")
        #expect(!x.run(until: { !x.deciding }, seconds: 0.05))
    }
}
