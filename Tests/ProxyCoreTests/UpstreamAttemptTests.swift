import Testing
@testable import ProxyCore

/// Where a failed upstream attempt goes next, without sockets: one test per rule of
/// docs/reference.md's "Moving a request", driven through the events the shell reports.
@Suite struct UpstreamAttemptTests {
    typealias Facts = UpstreamAttempt.Facts

    /// An attempt on server 0 with `connections` connections begun.
    private func attempt(connections: Int = 1) -> UpstreamAttempt {
        var a = UpstreamAttempt()
        a.serverChosen(0)
        for _ in 0..<connections { a.connecting() }
        return a
    }

    private static let get = Facts(idempotent: true)
    private static let post = Facts(idempotent: false)

    // MARK: A connection that never opened: nothing reached the app

    @Test(arguments: [EngineError.upstreamUnreachable("refused"), .upstreamConnectTimeout])
    func aRefusedConnectionMovesAnyRequestToAnotherServer(error: EngineError) {
        var a = attempt()
        var facts = Self.post
        facts.bodyBytes = 1000  // read, and waiting unsent behind the head
        let (next, count) = a.failed(error, facts)
        #expect(next == .nextServer(elseFail: error))
        #expect(count == .connect)
    }

    @Test func aNamesNextAddressIsTriedBeforeAnotherServer() {
        var a = attempt()
        var facts = Self.get
        facts.addresses = 3
        #expect(a.failed(.upstreamUnreachable("refused"), facts) == (.nextAddress, nil))
        a.connecting()
        #expect(a.failed(.upstreamConnectTimeout, facts) == (.nextAddress, nil))
        a.connecting()
        // All three tried: the server is counted as failed, and another takes the request.
        #expect(a.failed(.upstreamUnreachable("refused"), facts) == (.nextServer(elseFail: .upstreamUnreachable("refused")), .connect))
    }

    @Test func noMoreThanEightAddressesOfANameAreTried() {
        var a = attempt(connections: 8)
        var facts = Self.get
        facts.addresses = 20
        #expect(a.failed(.upstreamUnreachable("refused"), facts).next == .nextServer(elseFail: .upstreamUnreachable("refused")))
    }

    @Test func aServerWithNoAddressGoesStraightToAnotherServer() {
        var a = attempt(connections: 0)
        var facts = Self.get
        facts.addresses = 3
        facts.addressTried = false
        let (next, count) = a.failed(.upstreamUnreachable("no address"), facts)
        #expect(next == .nextServer(elseFail: .upstreamUnreachable("no address")))
        #expect(count == .connect)
    }

    @Test func aBodyThatCannotBeTakenBackIsNotSentAgain() {
        var a = attempt()
        var facts = Self.post
        facts.bodyBytes = 10
        facts.bodyUnsent = false
        let (next, count) = a.failed(.upstreamUnreachable("refused"), facts)
        #expect(next == .fail(.upstreamUnreachable("refused")))
        #expect(count == .connect)
    }

    // MARK: A connection that opened and closed without an answer

    @Test(arguments: [EngineError.upstreamClosedEarly, .upstreamFailed("reset")])
    func anIdempotentRequestWithoutBodyMovesWhenItsServerClosedWithoutAnswering(error: EngineError) {
        var a = attempt()
        let (next, count) = a.failed(error, Self.get)
        #expect(next == .nextServer(elseFail: error))
        #expect(count == .closed)
    }

    @Test func aPostNeverMovesWhenItsServerClosed() {
        var a = attempt()
        let (next, count) = a.failed(.upstreamClosedEarly, Self.post)
        #expect(next == .fail(.upstreamClosedEarly))
        #expect(next != .freshConnection)
        #expect(count == .closed)
        guard case .fail(let e) = next else { return }
        #expect(e.status == 502)
    }

    @Test func aRequestWithABodyOrAPartAnswerDoesNotMove() {
        var a = attempt()
        var withBody = Self.get
        withBody.bodyBytes = 5
        #expect(a.failed(.upstreamClosedEarly, withBody).next == .fail(.upstreamClosedEarly))
        var answered = Self.get
        answered.receivedAny = true
        #expect(a.failed(.upstreamFailed("reset"), answered).next == .fail(.upstreamFailed("reset")))
    }

    // MARK: A pooled connection the server had closed (the keep-alive race)

    @Test func aStalePooledConnectionIsRetriedOnceOnAFreshOneWithoutCountingTheServer() {
        var a = attempt()
        var facts = Self.get
        facts.reused = true
        #expect(a.failed(.upstreamClosedEarly, facts) == (.freshConnection, nil))
        #expect(a.retriedStale)
        // The fresh connection was pooled too (another request's): not again.
        #expect(a.failed(.upstreamClosedEarly, facts) == (.nextServer(elseFail: .upstreamClosedEarly), .closed))
    }

    @Test func aStalePooledConnectionDoesNotRetryAPost() {
        var a = attempt()
        var facts = Self.post
        facts.reused = true
        #expect(a.failed(.upstreamClosedEarly, facts) == (.fail(.upstreamClosedEarly), .closed))
        #expect(!a.retriedStale)
    }

    // MARK: The app has the request, or nothing can take it

    @Test func aResponseTimeoutIsAnsweredAndCountedNeverMoved() {
        var a = attempt()
        let (next, count) = a.failed(.upstreamResponseTimeout, Self.get)
        #expect(next == .fail(.upstreamResponseTimeout))
        #expect(count == .timeout)
        guard case .fail(let e) = next else { return }
        #expect(e.status == 504)
    }

    @Test func everyServerOutIsA503() {
        var a = UpstreamAttempt()
        let (next, count) = a.failed(.noUpstreamAvailable, Self.get)
        #expect(next == .fail(.noUpstreamAvailable) && count == nil)
        guard case .fail(let e) = next else { return }
        #expect(e.status == 503)
    }

    // MARK: Servers

    @Test func aServerOnceTriedIsMarkedAndItsConnectionsStartOver() {
        var a = attempt(connections: 2)
        a.serverChosen(3)
        #expect(a.server == 3)
        #expect(a.triedServers == 0b1001)
        #expect(a.connections == 0)
    }

    /// The decision comes from the error (`EngineError.resend`): errors that are the app's
    /// answer, or a refusal, never send the request again.
    @Test(arguments: [EngineError.upstreamInvalidResponse("bad"), .upstreamUnexpectedSwitch, .bodyTooLarge(limit: 1)])
    func anErrorThatIsNotAboutReachingTheAppIsAnswered(error: EngineError) {
        var a = attempt()
        #expect(a.failed(error, Self.get).next == .fail(error))
    }

    // MARK: An answer in retry_statuses

    @Test func anAnswerInRetryStatusesMovesAnIdempotentRequestWithoutABody() {
        let a = attempt()
        #expect(a.movesOnAnswer(502, retryStatuses: [502, 503, 504], Self.get))
        #expect(!a.movesOnAnswer(500, retryStatuses: [502, 503, 504], Self.get))
        #expect(!a.movesOnAnswer(502, retryStatuses: [], Self.get))
        // POST is not repeated (nginx's non_idempotent is off by default), nor a PUT that sent a body.
        #expect(!a.movesOnAnswer(502, retryStatuses: [502], Self.post))
        var put = Self.get
        put.bodyBytes = 10
        #expect(!a.movesOnAnswer(502, retryStatuses: [502], put))
        // No server chosen: nothing to move from.
        #expect(!UpstreamAttempt().movesOnAnswer(502, retryStatuses: [502], Self.get))
    }

    @Test func theStaleRetryIsOncePerServerNotPerRequest() {
        var a = attempt()
        var reused = Self.get
        reused.reused = true
        #expect(a.failed(.upstreamClosedEarly, reused).next == .freshConnection)
        #expect(a.failed(.upstreamClosedEarly, reused).next == .nextServer(elseFail: .upstreamClosedEarly))
        // Moved on: the next server's pooled connection may be stale too, and is not its fault.
        a.serverChosen(1)
        a.connecting()
        #expect(a.failed(.upstreamClosedEarly, reused) == (.freshConnection, nil))
    }
}
