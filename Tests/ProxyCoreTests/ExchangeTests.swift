import Testing
@testable import ProxyCore

/// The request lifecycle without sockets: each test drives an `Exchange` through the events a
/// connection would report and checks what it is told to do.
@Suite struct ExchangeTests {
    // MARK: Driving helpers

    /// A connection with a request proxied upstream.
    private func proxied(keepAlive: Bool = true, bodyDone: Bool = true, expectContinue: Bool = false,
                         stream: Bool = false) -> Exchange {
        var x = Exchange()
        x.isStream = stream
        _ = x.headParsed(keepAlive: keepAlive, bodyDone: bodyDone, expectContinue: expectContinue, draining: false)
        _ = x.proxy()
        return x
    }

    /// A connection in each state a client can leave in, by name.
    private func connection(in state: String) -> Exchange {
        var x = Exchange()
        switch state {
        case "idle": break
        case "dispatching": _ = x.headParsed(keepAlive: true, bodyDone: true, expectContinue: false, draining: false)
        case "deciding":
            _ = x.headParsed(keepAlive: true, bodyDone: true, expectContinue: false, draining: false)
            _ = x.awaitDecision().token
        case "collecting":
            _ = x.headParsed(keepAlive: true, bodyDone: false, expectContinue: false, draining: false)
            _ = x.collectBody()
        case "proxying": x = proxied(bodyDone: false)
        case "responding":
            x = proxied()
            _ = x.responseHead(switching: false, bodyEndsWithClose: false, bodyLeft: 0, draining: false)
        case "answered early":  // the upstream answered while the request body still arrives
            x = proxied(bodyDone: false)
            _ = x.responseHead(switching: false, bodyEndsWithClose: false, bodyLeft: 10, draining: false)
        case "tunnel":
            x = proxied()
            _ = x.responseHead(switching: true, bodyEndsWithClose: false, bodyLeft: 0, draining: false)
            _ = x.switchedProtocols()
        case "discarding":
            x = proxied(bodyDone: false)
            _ = x.responseHead(switching: false, bodyEndsWithClose: false, bodyLeft: 10, draining: false)
            _ = x.responseFinished(bodyRead: 5, inputEmpty: true).next
        case "lingering":
            x = proxied(keepAlive: false)
            _ = x.responseHead(switching: false, bodyEndsWithClose: false, bodyLeft: 0, draining: false)
            _ = x.responseFinished(bodyRead: 0, inputEmpty: false).next
        default: Issue.record("no such state \(state)")
        }
        return x
    }

    static let allStates = ["idle", "dispatching", "deciding", "collecting", "proxying", "responding", "tunnel",
                            "discarding", "lingering"]

    // MARK: Keep-alive and pipelining

    @Test func aKeepAliveRequestReturnsToIdleForTheNext() {
        var x = proxied()
        let field = x.responseHead(switching: false, bodyEndsWithClose: false, bodyLeft: 0, draining: false)
        #expect(field == .keepAlive)
        let next = x.responseFinished(bodyRead: 0, inputEmpty: true).next
        #expect(next == .readNext)
        #expect(x.state == .idle)
        #expect(x.servedAny)
        // And the next request runs the same way on the same connection.
        _ = x.headParsed(keepAlive: true, bodyDone: true, expectContinue: false, draining: false)
        _ = x.proxy()
        let field2 = x.responseHead(switching: false, bodyEndsWithClose: false, bodyLeft: 0, draining: false)
        #expect(field2 == .keepAlive)
        let next2 = x.responseFinished(bodyRead: 0, inputEmpty: true).next
        #expect(next2 == .readNext)
    }

    @Test func aPipelinedRequestWaitsInTheInputUntilItsLimit() {
        var x = proxied()
        // The request is all in: further input is a pipelined request, buffered up to the limit.
        #expect(x.wantsInput(buffered: 100, upstreamBuffered: 0))
        #expect(!x.wantsInput(buffered: Exchange.pipelineLimit, upstreamBuffered: 0))
        _ = x.responseHead(switching: false, bodyEndsWithClose: false, bodyLeft: 0, draining: false)
        // The buffered request is taken next (the shell parses it at once).
        let next = x.responseFinished(bodyRead: 0, inputEmpty: false).next
        #expect(next == .readNext)
        #expect(x.isIdle(inputEmpty: false) == false)
        #expect(x.isIdle)
    }

    @Test func aRequestBodyStopsBeingReadWhileTheUpstreamIsBehind() {
        let x = proxied(bodyDone: false)
        #expect(x.wantsInput(buffered: 1 << 20, upstreamBuffered: 0))
        #expect(!x.wantsInput(buffered: 0, upstreamBuffered: Exchange.highWater))
    }

    @Test func aClientThatAsksForTheCloseIsClosedWithoutLingeringWhenNothingIsLeft() {
        var x = proxied(keepAlive: false)
        let field = x.responseHead(switching: false, bodyEndsWithClose: false, bodyLeft: 0, draining: false)
        #expect(field == .close)
        let next = x.responseFinished(bodyRead: 0, inputEmpty: true).next
        #expect(next == .close)
        #expect(x.outputWritten() == .close)
    }

    @Test func aClientThatAsksForTheCloseButSentMoreGetsTheLingeringClose() {
        var x = proxied(keepAlive: false)
        _ = x.responseHead(switching: false, bodyEndsWithClose: false, bodyLeft: 0, draining: false)
        let next = x.responseFinished(bodyRead: 0, inputEmpty: false).next
        #expect(next == .close)
        #expect(x.outputWritten() == .linger)
    }

    @Test func aBodyThatEndsWithTheConnectionClosesIt() {
        var x = proxied()
        let field = x.responseHead(switching: false, bodyEndsWithClose: true, bodyLeft: 0, draining: false)
        #expect(field == .close)
        let next = x.responseFinished(bodyRead: 0, inputEmpty: true).next
        #expect(next == .close)
        // The proxy decided this close: it lingers.
        #expect(x.outputWritten() == .linger)
    }

    @Test func nothingHappensOnAWrittenOutputOutsideTheClose() {
        let x = proxied()
        #expect(x.outputWritten() == .none)
    }

    // MARK: Early upstream answers, discarding the body

    @Test func anEarlyAnswerWithASmallBodyLeftKeepsTheConnectionAndDropsTheRest() {
        var x = proxied(bodyDone: false)
        let field = x.responseHead(switching: false, bodyEndsWithClose: false, bodyLeft: 1000, draining: false)
        #expect(field == .keepAlive)
        let next = x.responseFinished(bodyRead: 200, inputEmpty: true).next
        #expect(next == .discardBody)
        #expect(x.state == .discarding(from: 200))
        #expect(x.wantsInput(buffered: 0, upstreamBuffered: 0))
        let discarded = x.bodyDiscarded(.more, total: 700).next
        #expect(discarded == nil)
        let discarded2 = x.bodyDiscarded(.done, total: 1200).next
        #expect(discarded2 == .readNext)
        #expect(x.state == .idle)
    }

    @Test func anEarlyAnswerWithTooMuchBodyLeftClosesTheConnection() {
        var x = proxied(bodyDone: false)
        let field = x.responseHead(switching: false, bodyEndsWithClose: false, bodyLeft: Exchange.discardLimit + 1, draining: false)
        #expect(field == .close)
        let next = x.responseFinished(bodyRead: 0, inputEmpty: true).next
        #expect(next == .close)
        // The body was not read: the close lingers so that it does not reset the response.
        #expect(x.state == .lingering(.init(skip: false, unlogged: false, bodyDone: false)))
        #expect(x.outputWritten() == .linger)
    }

    @Test func aChunkedBodyIsDroppedOnlyUpToTheLimit() {
        var x = proxied(bodyDone: false)
        let field = x.responseHead(switching: false, bodyEndsWithClose: false, bodyLeft: nil, draining: false)
        #expect(field == .keepAlive)
        let next = x.responseFinished(bodyRead: 10, inputEmpty: true).next
        #expect(next == .discardBody)
        let discarded = x.bodyDiscarded(.more, total: 10 + Exchange.discardLimit).next
        #expect(discarded == nil)
        let discarded2 = x.bodyDiscarded(.more, total: 11 + Exchange.discardLimit).next
        #expect(discarded2 == .close)
        #expect(x.outputWritten() == .linger)
    }

    @Test func aMalformedBodyBeingDroppedEndsTheConnection() {
        var x = connection(in: "discarding")
        let discarded = x.bodyDiscarded(.error(HTTPParseError(status: 400, reason: "bad chunk")), total: 6).next
        #expect(discarded == .close)
        #expect(!x.requestBodyDone)
    }

    @Test func anEarlyAnswerThatEndsTheBodyInTimeNeedsNoDiscarding() {
        var x = proxied(bodyDone: false)
        _ = x.responseHead(switching: false, bodyEndsWithClose: false, bodyLeft: 10, draining: false)
        _ = x.requestBodyEnded()
        let next = x.responseFinished(bodyRead: 10, inputEmpty: true).next
        #expect(next == .readNext)
    }

    // MARK: Expect: 100-continue

    @Test func aClientStillWaitingForContinueCannotHaveItsBodyDropped() {
        var x = proxied(bodyDone: false, expectContinue: true)
        // A final answer without a 100 first: the client may never send the body, and its next
        // request would be taken for body bytes.
        let field = x.responseHead(switching: false, bodyEndsWithClose: false, bodyLeft: 10, draining: false)
        #expect(field == .close)
        let next = x.responseFinished(bodyRead: 0, inputEmpty: true).next
        #expect(next == .close)
    }

    @Test func aClientToldToContinueHasItsBodyDropped() {
        var x = proxied(bodyDone: false, expectContinue: true)
        x.continueSent()
        let field = x.responseHead(switching: false, bodyEndsWithClose: false, bodyLeft: 10, draining: false)
        #expect(field == .keepAlive)
        let next = x.responseFinished(bodyRead: 0, inputEmpty: true).next
        #expect(next == .discardBody)
    }

    @Test func expectWithoutABodyChangesNothing() {
        var x = proxied(bodyDone: true, expectContinue: true)
        let field = x.responseHead(switching: false, bodyEndsWithClose: false, bodyLeft: 0, draining: false)
        #expect(field == .keepAlive)
        let next = x.responseFinished(bodyRead: 0, inputEmpty: true).next
        #expect(next == .readNext)
    }

    // MARK: Upgrade

    @Test func aSwitchIsATunnelUntilTheUpstreamCloses() {
        var x = proxied()
        let field = x.responseHead(switching: true, bodyEndsWithClose: false, bodyLeft: 0, draining: false)
        #expect(field == .upgrade)
        _ = x.switchedProtocols()
        #expect(x.isTunnel)
        #expect(x.requestBodyDone && x.closeAfterResponse)
        #expect(x.wantsInput(buffered: 1 << 20, upstreamBuffered: 0))
        #expect(!x.wantsInput(buffered: 0, upstreamBuffered: Exchange.highWater))
        // The client's end of stream is passed on; bytes still flow the other way.
        #expect(x.clientEnded(inputEmpty: true) == .halfCloseTunnel)
        x.tunnelEnded()
        #expect(x.outputWritten() == .linger)
        // The tunnel's access-log line is written at the close, whichever way it comes.
        var y = x
        #expect(x.clientHungUp() == .close)
        let lineOwed = x.closed()
        #expect(lineOwed)
        let lineOwed2 = y.closed()
        #expect(lineOwed2)
    }

    // MARK: Deferred decisions

    @Test func aDeferredAnswerIsTakenOnce() {
        var x = connection(in: "dispatching")
        let token = x.awaitDecision().token
        #expect(x.takesDecision(token: token))
        #expect(!x.takesDecision(token: token &+ 1))
        _ = x.proxy()
        #expect(!x.takesDecision(token: token))
    }

    @Test func aDeferredAnswerArrivingAfterTheClientLeftIsDropped() {
        var x = connection(in: "deciding")
        guard case .deciding(_, let token) = x.state else { Issue.record("not deciding"); return }
        #expect(x.clientEnded(inputEmpty: true) == .abort(.clientClosed))
        let lineOwed = x.closed()
        #expect(lineOwed)
        #expect(!x.takesDecision(token: token))
    }

    @Test func anAnswerForAnEarlierRequestCannotDecideTheNextOne() {
        var x = connection(in: "dispatching")
        let first = x.awaitDecision().token
        #expect(x.takesDecision(token: first))
        let answer = x.respondLocally(refusal: false, draining: false)
        #expect(answer == .send(.keepAlive))
        let next = x.responseFinished(bodyRead: 0, inputEmpty: true).next
        #expect(next == .readNext)
        _ = x.headParsed(keepAlive: true, bodyDone: true, expectContinue: false, draining: false)
        let second = x.awaitDecision().token
        // A sink of the first request completed a second time (or late) must not answer this one.
        #expect(!x.takesDecision(token: first))
        #expect(x.takesDecision(token: second))
    }

    @Test func aDecisionCutShortByATimeoutTakesNoLateAnswer() {
        var x = connection(in: "collecting")
        let action = x.timedOut()
        #expect(action == .failRequest(.bodyStalled))
        let answer = x.respondLocally(refusal: true, draining: false)
        #expect(answer == .send(.close))
        let next = x.responseFinished(bodyRead: 0, inputEmpty: true).next
        #expect(next == .close)
        #expect(!x.takesDecision(token: 1))
    }

    @Test func aCollectedBodyIsDecidedOnOnceItIsIn() {
        var x = connection(in: "collecting")
        #expect(!x.requestBodyDone)
        #expect(x.wantsInput(buffered: 1 << 20, upstreamBuffered: 0))
        _ = x.requestBodyEnded()
        let token = x.awaitDecision().token
        #expect(x.state == .deciding(.init(bodyDone: true, closeAfter: false, clientAskedClose: false, awaitingContinue: false), token: token))
        let answer = x.respondLocally(refusal: false, draining: false)
        #expect(answer == .send(.keepAlive))
        let next = x.responseFinished(bodyRead: 3, inputEmpty: true).next
        #expect(next == .readNext)
    }

    @Test func aDeferredProceedGoesUpstream() {
        var x = connection(in: "deciding")
        _ = x.proxy()
        #expect(x.isProxying)
    }

    // MARK: Local answers

    @Test func aLocalAnswerWithTheBodyUnreadClosesTheConnection() {
        var x = Exchange()
        _ = x.headParsed(keepAlive: true, bodyDone: false, expectContinue: false, draining: false)
        let answer = x.respondLocally(refusal: false, draining: false)
        #expect(answer == .send(.close))
        let next = x.responseFinished(bodyRead: 0, inputEmpty: true).next
        #expect(next == .close)
        #expect(x.outputWritten() == .linger)
    }

    @Test func aRefusalClosesTheConnection() {
        var x = connection(in: "dispatching")
        let answer = x.respondLocally(refusal: true, draining: false)
        #expect(answer == .send(.close))
        let next = x.responseFinished(bodyRead: 0, inputEmpty: true).next
        #expect(next == .close)
    }

    @Test func anUnreadableHeadIsRefusedAndLingers() {
        var x = Exchange()
        _ = x.headRefused()
        let answer = x.respondLocally(refusal: true, draining: false)
        #expect(answer == .send(.close))
        let next = x.responseFinished(bodyRead: 0, inputEmpty: true).next
        #expect(next == .close)
        #expect(x.outputWritten() == .linger)
    }

    @Test func anAnswerAfterTheResponseBeganCutsTheConnection() {
        var x = connection(in: "responding")
        #expect(x.responseStarted)
        let answer = x.respondLocally(refusal: true, draining: false)
        #expect(answer == .abort(.answerAfterResponseStarted))
        var idle = Exchange()
        let answer2 = idle.respondLocally(refusal: true, draining: false)
        #expect(answer2 == .abort(.answerAfterResponseStarted))
        // A local answer is a response too: a second one (a deferred answer racing an error) cuts.
        var answered = connection(in: "dispatching")
        #expect(!answered.responseStarted)
        #expect(answered.respondLocally(refusal: false, draining: false) == .send(.keepAlive))
        #expect(answered.responseStarted)
        #expect(answered.respondLocally(refusal: true, draining: false) == .abort(.answerAfterResponseStarted))
    }

    // MARK: Client aborts, in every state

    @Test(arguments: [
        ("idle", Exchange.ClientEnd.close, false),
        ("dispatching", .abort(.clientClosed), true),
        ("deciding", .abort(.clientClosed), true),
        ("collecting", .abort(.clientClosed), true),
        ("proxying", .abort(.clientClosed), true),
        ("responding", .abort(.clientClosed), true),
        ("tunnel", .halfCloseTunnel, true),
        ("discarding", .abort(.clientClosed), false),
        ("lingering", .close, false),
    ])
    func theClientsEndMeans(state: String, expected: Exchange.ClientEnd, logOwed: Bool) {
        var x = connection(in: state)
        #expect(x.clientEnded(inputEmpty: true) == expected)
        // Whether the request's access-log line is still to be written when the connection goes.
        let lineOwed = x.closed()
        #expect(lineOwed == logOwed)
        #expect(x.isClosed)
        #expect(!x.wantsInput(buffered: 0, upstreamBuffered: 0))
    }

    @Test func aClientThatLeavesWithHalfAHeadIsCutNotAnswered() {
        let x = Exchange()
        #expect(x.clientEnded(inputEmpty: false) == .abort(.clientClosed))
    }

    @Test(arguments: allStates)
    func aHangupWhileNotReadingAbortsAnythingButTheClose(state: String) {
        let x = connection(in: state)
        #expect(x.clientHungUp() == (state == "lingering" ? .close : .abort(.clientClosed)))
    }

    // MARK: Timeouts

    @Test(arguments: [
        // (state, deadline, what follows)
        ("idle", Exchange.Deadline.keepAlive, Exchange.TimeoutAction.close),
        ("idle", .header, .refuse(.headTimeout)),
        ("collecting", .body, .failRequest(.bodyStalled)),
        ("proxying", .body, .failRequest(.bodyStalled)),
        ("answered early", .body, .abort(.clientBodyTimeout)),
        ("discarding", .body, .close),
        ("responding", .send, .abort(.clientSendTimeout)),
        ("tunnel", .send, .abort(.clientSendTimeout)),
        ("lingering", .linger, .close),
        ("lingering", .send, .close),
        ("deciding", .none, .none),
    ])
    func aPassedDeadlineMeans(state: String, kind: Exchange.Deadline, expected: Exchange.TimeoutAction) {
        var x = connection(in: state)
        // The timer comes from the events that start it, never from the test.
        switch kind {
        case .keepAlive: _ = x.opened()
        case .header: _ = x.headArriving()
        case .send: _ = x.outputWaiting()
        case .linger: _ = x.lingerStarted(now: 0)
        case .body, .none: break
        }
        #expect(x.timer == kind)
        let action = x.timedOut()
        #expect(action == expected)
        #expect(x.timer == .none)
    }

    @Test func aHeadThatTimesOutIsAnsweredThenClosedWithoutLingering() {
        var x = Exchange()
        _ = x.headArriving()
        let action = x.timedOut()
        #expect(action == .refuse(.headTimeout))
        let answer = x.respondLocally(refusal: true, draining: false)
        #expect(answer == .send(.close))
        let next = x.responseFinished(bodyRead: 0, inputEmpty: false).next
        #expect(next == .close)
        #expect(x.outputWritten() == .close)
    }

    @Test func aStalledBodyIsAnsweredWith408AndTheConnectionCloses() {
        var x = proxied(bodyDone: false)
        guard case .failRequest(let error) = x.timedOut() else {
            Issue.record("not a failure"); return
        }
        #expect(error.status == 408 && error.source == .client && error.retryable)
        let answer = x.respondLocally(refusal: true, draining: false)
        #expect(answer == .send(.close))
        let next = x.responseFinished(bodyRead: 0, inputEmpty: true).next
        #expect(next == .close)
        #expect(x.outputWritten() == .linger)
    }

    // MARK: Draining and reloads

    @Test func anIdleConnectionClosesAtOnceOnADrain() {
        var x = Exchange()
        #expect(x.isIdle(inputEmpty: true))
        let closesNow = x.drain(inputEmpty: true)
        #expect(closesNow)
    }

    @Test func aHalfReadHeadIsServedThenClosedOnADrain() {
        var x = Exchange()
        let closesNow = x.drain(inputEmpty: false)
        #expect(!closesNow)
        _ = x.headParsed(keepAlive: true, bodyDone: true, expectContinue: false, draining: false)
        _ = x.proxy()
        let field = x.responseHead(switching: false, bodyEndsWithClose: false, bodyLeft: 0, draining: false)
        #expect(field == .close)
        let next = x.responseFinished(bodyRead: 0, inputEmpty: true).next
        #expect(next == .close)
        // The proxy decided this close: it lingers.
        #expect(x.outputWritten() == .linger)
    }

    @Test(arguments: ["dispatching", "deciding", "collecting", "proxying"])
    func aRequestInFlightFinishesThenClosesOnADrain(state: String) {
        var x = connection(in: state)
        let closesNow = x.drain(inputEmpty: true)
        #expect(!closesNow)
        #expect(x.closeAfterResponse)
        if x.isProxying {
            let field = x.responseHead(switching: false, bodyEndsWithClose: false, bodyLeft: 0, draining: false)
            #expect(field == .close)
        } else {
            let answer = x.respondLocally(refusal: false, draining: false)
            #expect(answer == .send(.close))
        }
    }

    @Test func aBodyBeingDroppedIsFinishedThenTheConnectionClosesOnADrain() {
        var x = connection(in: "discarding")
        let closesNow = x.drain(inputEmpty: true)
        #expect(!closesNow)
        let discarded = x.bodyDiscarded(.done, total: 10).next
        #expect(discarded == .close)
    }

    @Test func aDrainNoticedAtTheResponseHeadClosesAndLastsForTheConnection() {
        var x = proxied()
        let field = x.responseHead(switching: false, bodyEndsWithClose: false, bodyLeft: 0, draining: true)
        #expect(field == .close)
        #expect(x.closeAfterResponse)
    }

    @Test func aRequestParsedWhileTheListenerDrainsCloses() {
        var x = Exchange()
        _ = x.headParsed(keepAlive: true, bodyDone: true, expectContinue: false, draining: true)
        #expect(x.closeAfterResponse)
        let answer = x.respondLocally(refusal: false, draining: false)
        #expect(answer == .send(.close))
    }

    @Test(arguments: allStates)
    func onlyAnIdleConnectionFollowsAReloadAtOnce(state: String) {
        let x = connection(in: state)
        #expect(x.isIdle(inputEmpty: true) == (state == "idle"))
        #expect(!x.isIdle(inputEmpty: false))
    }

    // MARK: HTTP/2 streams

    @Test func aStreamEndsAfterItsResponseInsteadOfTakingAnother() {
        var x = proxied(stream: true)
        let field = x.responseHead(switching: false, bodyEndsWithClose: false, bodyLeft: 0, draining: false)
        #expect(field == .keepAlive)
        let next = x.responseFinished(bodyRead: 0, inputEmpty: true).next
        #expect(next == .endStream)
        #expect(x.isLingering && x.requestBodyDone)
        let lineOwed = x.closed()
        #expect(!lineOwed)
    }

    @Test func aStreamWithItsBodyUnreadEndsEarlyRatherThanDroppingIt() {
        var x = proxied(bodyDone: false, stream: true)
        #expect(!x.canDiscardRequestBody(bodyLeft: 1))
        _ = x.responseHead(switching: false, bodyEndsWithClose: false, bodyLeft: 1, draining: false)
        let next = x.responseFinished(bodyRead: 0, inputEmpty: true).next
        #expect(next == .endStream)
        // (RST_STREAM NO_ERROR after the response, in HTTP2Callbacks.readBody.)
        #expect(!x.requestBodyDone)
    }

    // MARK: Errors

    @Test(arguments: [
        (EngineError.headTimeout, EngineError.Source.client, 408, true),
        (.bodyTooLarge(limit: 10), .client, 413, false),
        (.invalidHead(HTTPParseError(status: 431, reason: "too many fields")), .client, 431, false),
        (.upstreamUnreachable("connection refused"), .upstream, 502, true),
        (.upstreamResponseTimeout, .upstream, 504, true),
        (.upstreamClosedMidResponse, .upstream, 0, false),
        (.clientClosed, .client, 0, false),
        (.answerAfterResponseStarted, .proxy, 0, false),
    ])
    func errorsSayWhoseSideAndWhetherARetryMayHelp(error: EngineError, source: EngineError.Source, status: Int,
                                                   retryable: Bool) {
        #expect(error.source == source)
        #expect(error.status == status)
        #expect(error.retryable == retryable)
    }

    @Test func errorNamesAreStableSnakeCase() {
        #expect("\(EngineError.upstreamConnectTimeout.name)" == "upstream_connect_timeout")
        #expect("\(EngineError.bodyTooLarge(limit: 1).name)" == "body_too_large")
        #expect(EngineError.bodyTooLarge(limit: 1024).reason == "request body larger than 1024 bytes")
    }
}
