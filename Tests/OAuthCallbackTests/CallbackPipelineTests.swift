import Dispatch
import ProxyCore
import Synchronization
import Testing
@testable import OAuthCallback

@Suite struct CallbackPipelineTests {
    typealias F = CallbackFixtures
    let loop = TestLoop.shared
    let clock = ManualClock()

    /// A pipeline over a recording memory store, with a counting provider for every
    /// configured provider name except `apple` (configured but deliberately not wired).
    struct Rig {
        let pipeline: CallbackPipeline
        let store: RecordingStore
        let provider: CountingProvider
    }

    func rig(store: (any Store)? = nil, answer: Result<VerifiedIdentity, CallbackFailure>? = nil) -> Rig {
        let recording = RecordingStore(inner: store ?? MemoryStore(clock: clock.read))
        let provider = CountingProvider(answer: answer)
        let providers: [String: any IdentityProvider] = [
            "google": provider, "facebook": provider, "corp": provider, "corp-confidential": provider,
        ]
        return Rig(pipeline: CallbackPipeline(settings: F.settings, store: recording, providers: providers),
                   store: recording, provider: provider)
    }

    struct Handled: Sendable {
        var outcome: CallbackOutcome
        /// Whether `handle` had already returned when the completion ran.
        var handleHadReturned: Bool
    }

    /// Runs the pipeline on the test loop; nil (and a recorded issue) unless the completion ran
    /// exactly once, on the loop's thread.
    func handle(_ rig: Rig, _ query: String, nonce: String? = nil) -> CallbackOutcome? {
        let answer = loop.call { (loop, done: @escaping @Sendable (Handled) -> Void) in
            let returned = Atomic<Bool>(false)
            rig.pipeline.handle(query: query, expectedNonce: nonce, on: loop) { outcome in
                done(Handled(outcome: outcome, handleHadReturned: returned.load(ordering: .sequentiallyConsistent)))
            }
            returned.store(true, ordering: .sequentiallyConsistent)
        }
        guard let answer else { return nil }
        #expect(answer.onLoopThread, "the completion ran off the loop thread")
        #expect(answer.calls == 1, "the completion ran \(answer.calls) times")
        #expect(answer.value.handleHadReturned, "the completion ran inside handle")
        return answer.value.outcome
    }

    func refusal(of outcome: CallbackOutcome?) -> (CallbackFailure, CallbackParameters?)? {
        if case .failed(let failure, let parameters)? = outcome { return (failure, parameters) }
        return nil
    }

    /// Asserts a refusal decided before the store and the provider were touched.
    func expectRefusedUpFront(_ rig: Rig, _ query: String, code: String, sourceLocation: SourceLocation = #_sourceLocation) {
        let refused = refusal(of: handle(rig, query))
        #expect(refused?.0.code == code, sourceLocation: sourceLocation)
        #expect(rig.store.calls == 0, "the store was touched", sourceLocation: sourceLocation)
        #expect(rig.provider.count == 0, "the provider was called", sourceLocation: sourceLocation)
    }

    // MARK: Verified

    @Test func aValidCallbackIsRedeemedWithTheConfiguredClient() throws {
        let rig = rig()
        let outcome = handle(rig, F.googleAndroidQuery)
        guard case .verified(let identity, let parameters)? = outcome else {
            Issue.record("not verified: \(String(describing: outcome))")
            return
        }
        #expect(identity.subject == "110169484474386276334")
        #expect(parameters.state == F.state)
        #expect(parameters.provider == "google")
        let request = try #require(rig.provider.requests.first)
        #expect(rig.provider.count == 1)
        #expect(request.client == F.settings.providers["google"]!.native["android"]!)
        #expect(request.provider.name == "google")
        #expect(request.platform == "android")
        #expect(request.code == F.code)
        #expect(request.codeVerifier == F.verifier)
        #expect(request.expectedNonce == nil)
        #expect(rig.store.writes.map(\.key) == [ReplayGuard.key(provider: "google", code: F.code)])
    }

    @Test func theCallersNonceReachesTheProvider() throws {
        let rig = rig()
        _ = handle(rig, F.googleAndroidQuery, nonce: "n-0S6_WzA2Mj")
        #expect(try #require(rig.provider.requests.first).expectedNonce == "n-0S6_WzA2Mj")
    }

    @Test func googleIOSWithTheDerivedRedirectIsRedeemed() throws {
        let rig = rig()
        let query = F.join([("provider", "google"), ("platform", "ios"), ("client_id", F.googleIOSID),
                            ("redirect_uri", "com.googleusercontent.apps.123-ios%3A%2Foauth2redirect"),
                            ("code", "4%2Fios-code"), ("state", "st"), ("code_verifier", F.verifier)])
        guard case .verified? = handle(rig, query) else {
            Issue.record("not verified")
            return
        }
        #expect(try #require(rig.provider.requests.first).client.redirectURI == F.googleIOSRedirect)
    }

    @Test func aProviderRefusalIsPassedOnWithTheParameters() throws {
        let refusedByIdP = CallbackFailure(.idp, code: "exchange_failed", userMessage: "u", logDetail: "invalid_grant")
        let rig = rig(answer: .failure(refusedByIdP))
        let (failure, parameters) = try #require(refusal(of: handle(rig, F.googleAndroidQuery)))
        #expect(failure == refusedByIdP)
        #expect(parameters?.state == F.state)
        #expect(rig.provider.count == 1)
    }

    // MARK: Failed sign-in reported by the app

    @Test func accessDeniedFailsWithoutCallingTheProviderOrTheStore() throws {
        let rig = rig()
        let (failure, parameters) = try #require(refusal(of: handle(rig, F.googleAndroidError("access_denied"))))
        #expect(failure.code == "access_denied")
        #expect(failure.source == .client)
        #expect(parameters?.state == F.state)
        #expect(parameters?.provider == "google")
        #expect(rig.provider.count == 0)
        #expect(rig.store.calls == 0)
    }

    @Test func aFailureCallbackForAnUnknownProviderIsRefusedAsSuch() {
        let query = F.googleAndroidError("access_denied").replacingOccurrences(of: "provider=google", with: "provider=github")
        expectRefusedUpFront(rig(), query, code: "unknown_client")
    }

    // MARK: Refused before the store and the provider

    @Test func aMalformedQueryFailsWithoutParameters() throws {
        let rig = rig()
        let (failure, parameters) = try #require(refusal(of: handle(rig, F.googleAndroidQuery + "&code=again")))
        #expect(failure.code == "invalid_request")
        #expect(parameters == nil)
        #expect(rig.store.calls == 0)
        #expect(rig.provider.count == 0)
    }

    @Test func anUnknownProviderIsRefusedUpFront() {
        expectRefusedUpFront(rig(), F.googleAndroid("provider", "github"), code: "unknown_client")
    }

    @Test func anUnknownPlatformIsRefusedUpFront() {
        expectRefusedUpFront(rig(), F.googleAndroid("platform", "windows"), code: "unknown_client")
    }

    @Test func aForeignClientIDIsRefusedUpFront() {
        expectRefusedUpFront(rig(), F.googleAndroid("client_id", "999-web.apps.googleusercontent.com"), code: "client_mismatch")
    }

    @Test func aForeignRedirectURIIsRefusedUpFront() {
        expectRefusedUpFront(rig(), F.googleAndroid("redirect_uri", "com.attacker%3A%2Fcb"), code: "client_mismatch")
    }

    @Test func aMissingVerifierForAPublicClientIsRefusedUpFront() {
        expectRefusedUpFront(rig(), F.googleAndroid("code_verifier", nil), code: "invalid_request")
    }

    @Test func aConfiguredProviderWithoutImplementationIsRefusedUpFront() throws {
        let rig = rig()
        let query = F.join([("provider", "apple"), ("platform", "ios"), ("client_id", "com.example.app"),
                            ("redirect_uri", "com.example.app:/apple"), ("code", "c"), ("state", "s")])
        expectRefusedUpFront(rig, query, code: "server_error")
        #expect(try #require(refusal(of: handle(rig, query))).0.source == .internal)
    }

    // MARK: Replay and store

    @Test func aReplayedCodeIsRefusedWithoutCallingTheProviderAgain() throws {
        let rig = rig()
        guard case .verified? = handle(rig, F.googleAndroidQuery) else {
            Issue.record("the first arrival was not verified")
            return
        }
        let (failure, parameters) = try #require(refusal(of: handle(rig, F.googleAndroidQuery)))
        #expect(failure.code == "replayed_code")
        #expect(parameters?.state == F.state)
        #expect(rig.provider.count == 1)
    }

    @Test func aCodeWhoseExchangeFailedStaysSpent() throws {
        let unavailable = CallbackFailure(.idp, code: "idp_unavailable", userMessage: "u", logDetail: "timeout", retryable: true)
        let rig = rig(answer: .failure(unavailable))
        #expect(refusal(of: handle(rig, F.googleAndroidQuery))?.0.code == "idp_unavailable")
        #expect(try #require(refusal(of: handle(rig, F.googleAndroidQuery))).0.code == "replayed_code")
        #expect(rig.provider.count == 1)
    }

    @Test func aStoreFailureFailsClosedWithoutCallingTheProvider() throws {
        let rig = rig(store: FailingStore(.unavailable))
        let (failure, parameters) = try #require(refusal(of: handle(rig, F.googleAndroidQuery)))
        #expect(failure.code == "store_unavailable")
        #expect(failure.source == .internal)
        #expect(failure.retryable)
        #expect(failure.status == 503)
        #expect(parameters?.state == F.state)
        #expect(rig.store.calls == 1)
        #expect(rig.provider.count == 0)
    }

    @Test func theSameCodeArrivingOnTwoLoopsAtOnceIsRedeemedOnce() throws {
        let rig = rig()
        let other = try TestLoop()
        defer { other.stop() }
        let verified = Atomic<Int>(0)
        let replayed = Atomic<Int>(0)
        let done = DispatchSemaphore(value: 0)
        let attempts = 20
        for i in 0..<attempts {
            let target = i % 2 == 0 ? loop.loop : other.loop
            target.execute {
                rig.pipeline.handle(query: F.googleAndroidQuery, on: target) { outcome in
                    switch outcome {
                    case .verified: verified.add(1, ordering: .relaxed)
                    case .failed(let failure, _) where failure.code == "replayed_code": replayed.add(1, ordering: .relaxed)
                    case .failed: break
                    }
                    done.signal()
                }
            }
        }
        for _ in 0..<attempts {
            guard done.wait(timeout: .now() + .seconds(5)) == .success else {
                Issue.record("a completion never ran")
                return
            }
        }
        #expect(verified.load(ordering: .relaxed) == 1)
        #expect(replayed.load(ordering: .relaxed) == attempts - 1)
        #expect(rig.provider.count == 1)
    }
}

extension String {
    fileprivate func replacingOccurrences(of target: String, with replacement: String) -> String {
        var parts = split(separator: "&", omittingEmptySubsequences: false).map(String.init)
        for i in parts.indices where parts[i] == target { parts[i] = replacement }
        return parts.joined(separator: "&")
    }
}

/// A provider that records every request and answers with a fixed result, on the loop and
/// after returning (as a real one, waiting for the IdP, would).
final class CountingProvider: IdentityProvider {
    static let identity = VerifiedIdentity(provider: "google", subject: "110169484474386276334",
                                           email: "jane@example.com", tokens: TokenResponse(accessToken: "ya29.token"))

    let answer: Result<VerifiedIdentity, CallbackFailure>
    private let recorded = Mutex<[ExchangeRequest]>([])

    init(answer: Result<VerifiedIdentity, CallbackFailure>? = nil) {
        self.answer = answer ?? .success(Self.identity)
    }

    var requests: [ExchangeRequest] { recorded.withLock { $0 } }
    var count: Int { recorded.withLock { $0.count } }

    func redeem(_ request: ExchangeRequest, on loop: EventLoop,
                _ completion: @escaping (Result<VerifiedIdentity, CallbackFailure>) -> Void) {
        recorded.withLock { $0.append(request) }
        nonisolated(unsafe) let completion = completion
        let answer = self.answer
        loop.execute { completion(answer) }
    }
}
