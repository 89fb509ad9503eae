import Testing
@testable import ProxyCore

/// Which timer the machine runs in each state, and for how long: driven by the events a
/// connection reports, checked on what each transition tells the shell to arm.
@Suite struct ExchangeTimerTests {
    typealias Change = Exchange.TimerChange
    static let s = Timeouts.second

    /// A machine with a distinct duration for each kind, so that a wrong kind shows.
    private func machine(stream: Bool = false) -> Exchange {
        var x = Exchange()
        x.isStream = stream
        x.timeouts.clientHeader = 1 * Self.s
        x.timeouts.clientBody = 2 * Self.s
        x.timeouts.keepAlive = 3 * Self.s
        x.timeouts.clientSend = 4 * Self.s
        return x
    }

    private func parsed(_ x: inout Exchange, keepAlive: Bool = true, bodyDone: Bool = true) -> Change {
        x.headParsed(keepAlive: keepAlive, bodyDone: bodyDone, expectContinue: false, draining: false)
    }

    @Test func aNewConnectionWaitsForItsFirstHeadForTheHeadsTime() {
        var x = machine()
        #expect(x.opened() == .arm(.keepAlive, after: 1 * Self.s))
        #expect(x.timer == .keepAlive)
    }

    @Test func theHeadTimerStartsWithTheFirstBytesAndIsNotPushedOnByMore() {
        var x = machine()
        _ = x.opened()
        #expect(x.headArriving() == .arm(.header, after: 1 * Self.s))
        // A slowloris client trickles its head: later bytes do not buy it time.
        #expect(x.headArriving() == .keep)
        #expect(x.timer == .header)
        #expect(parsed(&x) == .disarm)
        #expect(x.timer == .none)
    }

    @Test func aRequestBodyRunsTheBodyTimerFromEachReadUntilItEnds() {
        var x = machine()
        _ = parsed(&x, bodyDone: false)
        #expect(x.proxy() == .arm(.body, after: 2 * Self.s))
        #expect(x.requestBodyArrived() == .arm(.body, after: 2 * Self.s))
        #expect(x.timer == .body)
        #expect(x.requestBodyEnded() == .disarm)
        #expect(x.timer == .none)
        // Bytes after the body (pipelined) do not start it again.
        #expect(x.requestBodyArrived() == .keep)
    }

    @Test func aRequestWithoutBodyRunsNoTimerWhileTheUpstreamAnswers() {
        var x = machine()
        _ = parsed(&x)
        #expect(x.proxy() == .keep)
        #expect(x.timer == .none)
    }

    @Test func theSendTimerRunsWhileTheClientDoesNotReadAndStopsWhenItHas() {
        var x = machine()
        _ = parsed(&x)
        _ = x.proxy()
        _ = x.responseHead(switching: false, bodyEndsWithClose: false, bodyLeft: 0, draining: false)
        #expect(x.outputWaiting() == .arm(.send, after: 4 * Self.s))
        // Some of it went out, the rest still waits: the client gets the time again.
        #expect(x.outputWaiting() == .arm(.send, after: 4 * Self.s))
        #expect(x.timer == .send)
        #expect(x.outputSent() == .disarm)
        #expect(x.outputSent() == .keep)
    }

    @Test func aClientThatStopsReadingWhileItSendsItsBodyIsTimedByTheBodyTimer() {
        var x = machine()
        _ = parsed(&x, bodyDone: false)
        _ = x.proxy()
        _ = x.responseHead(switching: false, bodyEndsWithClose: false, bodyLeft: 10, draining: false)
        #expect(x.outputWaiting() == .keep)
        #expect(x.timer == .body)
        #expect(x.timedOut() == .abort(.clientBodyTimeout))
    }

    @Test func aCollectedBodyRunsTheBodyTimerAndTheDecisionNone() {
        var x = machine()
        _ = parsed(&x, bodyDone: false)
        #expect(x.collectBody() == .arm(.body, after: 2 * Self.s))
        #expect(x.requestBodyEnded() == .disarm)
        #expect(x.awaitDecision().timer == .keep)
        #expect(x.timer == .none)
        #expect(x.timedOut() == .none)
    }

    @Test func aKeepAliveResponseRunsTheKeepAliveTimerForItsOwnTime() {
        var x = machine()
        _ = x.opened()
        _ = parsed(&x)
        _ = x.proxy()
        _ = x.responseHead(switching: false, bodyEndsWithClose: false, bodyLeft: 0, draining: false)
        let finished = x.responseFinished(bodyRead: 0, inputEmpty: true)
        #expect(finished.next == .readNext)
        #expect(finished.timer == .arm(.keepAlive, after: 3 * Self.s))
        #expect(x.timedOut() == .close)
    }

    @Test func aBodyLeftAfterAKeepAliveResponseIsDroppedUnderTheBodyTimer() {
        var x = machine()
        _ = parsed(&x, bodyDone: false)
        _ = x.proxy()
        _ = x.responseHead(switching: false, bodyEndsWithClose: false, bodyLeft: 10, draining: false)
        let finished = x.responseFinished(bodyRead: 5, inputEmpty: true)
        #expect(finished.next == .discardBody)
        #expect(finished.timer == .arm(.body, after: 2 * Self.s))
        let more = x.bodyDiscarded(.more, total: 8)
        #expect(more.next == nil && more.timer == .arm(.body, after: 2 * Self.s))
        let done = x.bodyDiscarded(.done, total: 15)
        #expect(done.next == .readNext && done.timer == .arm(.keepAlive, after: 3 * Self.s))
    }

    @Test func aClosingResponseStopsTheTimerThenTheSendTimerThenTheLinger() {
        var x = machine()
        _ = parsed(&x, keepAlive: false)
        _ = x.proxy()
        _ = x.responseHead(switching: false, bodyEndsWithClose: false, bodyLeft: 0, draining: false)
        _ = x.outputWaiting()
        let finished = x.responseFinished(bodyRead: 0, inputEmpty: false)
        #expect(finished.next == .close && finished.timer == .disarm)
        // The last bytes wait for the client.
        #expect(x.outputWaiting() == .arm(.send, after: 4 * Self.s))
        #expect(x.outputWritten() == .linger)
        #expect(x.lingerStarted(now: 100) == .arm(.linger, after: LingeringClose.quiet))
        #expect(x.timer == .linger)
        // Bytes the client still sends push the linger on, never past its limit.
        #expect(x.lingerInputDropped(now: 100 + 5 * Self.s) == .arm(.linger, after: LingeringClose.quiet))
        #expect(x.lingerInputDropped(now: 100 + LingeringClose.most - Self.s / 2) == .arm(.linger, after: Self.s / 2))
        #expect(x.lingerInputDropped(now: 100 + LingeringClose.most + Self.s) == .arm(.linger, after: 0))
        #expect(x.timedOut() == .close)
    }

    @Test func aFinishedStreamKeepsTheSendTimerUntilItCloses() {
        var x = machine(stream: true)
        _ = parsed(&x)
        _ = x.proxy()
        _ = x.responseHead(switching: false, bodyEndsWithClose: false, bodyLeft: 0, draining: false)
        let finished = x.responseFinished(bodyRead: 0, inputEmpty: true)
        #expect(finished.next == .endStream && finished.timer == .arm(.send, after: 4 * Self.s))
        // Its output went to nghttp2; END_STREAM may still wait for the peer's window.
        #expect(x.outputSent() == .keep)
        #expect(x.timer == .send)
        _ = x.closed()
        #expect(x.timer == .none)
    }

    @Test func aTunnelRunsNoClientTimerButTheSendOne() {
        var x = machine()
        _ = parsed(&x)
        _ = x.proxy()
        _ = x.responseHead(switching: true, bodyEndsWithClose: false, bodyLeft: 0, draining: false)
        _ = x.outputWaiting()
        #expect(x.switchedProtocols() == .disarm)
        #expect(x.outputWaiting() == .arm(.send, after: 4 * Self.s))
        #expect(x.timedOut() == .abort(.clientSendTimeout))
    }

    @Test func aRefusedHeadStopsTheHeadTimer() {
        var x = machine()
        _ = x.headArriving()
        #expect(x.headRefused() == .disarm)
        #expect(x.timer == .none)
    }

    /// Every state a connection can be in has the timer the table in Exchange+Timer.swift says.
    @Test(arguments: [
        ("idle", Exchange.Deadline.keepAlive), ("dispatching", .none), ("deciding", .none),
        ("collecting", .body), ("proxying", .body), ("responding", .none), ("tunnel", .none),
        ("discarding", .body), ("lingering", .none),
    ])
    func eachStateRunsItsTimer(state: String, kind: Exchange.Deadline) {
        var x = machine()
        _ = x.opened()
        switch state {
        case "idle": break
        case "dispatching": _ = parsed(&x)
        case "deciding": _ = parsed(&x); _ = x.awaitDecision()
        case "collecting": _ = parsed(&x, bodyDone: false); _ = x.collectBody()
        case "proxying": _ = parsed(&x, bodyDone: false); _ = x.proxy()
        case "responding", "tunnel", "lingering":
            _ = parsed(&x, keepAlive: state != "lingering")
            _ = x.proxy()
            _ = x.responseHead(switching: state == "tunnel", bodyEndsWithClose: false, bodyLeft: 0, draining: false)
            if state == "tunnel" { _ = x.switchedProtocols() }
            if state == "lingering" { _ = x.responseFinished(bodyRead: 0, inputEmpty: false) }
        case "discarding":
            _ = parsed(&x, bodyDone: false)
            _ = x.proxy()
            _ = x.responseHead(switching: false, bodyEndsWithClose: false, bodyLeft: 10, draining: false)
            _ = x.responseFinished(bodyRead: 5, inputEmpty: true)
        default: Issue.record("no such state \(state)")
        }
        #expect(x.timer == kind, "\(state)")
    }
}
