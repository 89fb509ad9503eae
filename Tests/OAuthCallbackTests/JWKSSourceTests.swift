import Testing
import ProxyCore
@testable import OAuthCallback

@Suite struct JWKSSourceTests {
    static let url = "https://keys.example.com/jwks"

    let clock = TestClock()
    let idp: FakeIdP
    let source: JWKSSource
    let verifier = JWTVerifier(allowedAlgorithms: [.rs256, .es256], issuers: [Mint.issuer], audience: Mint.clientID)

    init() {
        idp = FakeIdP(clock: clock)
        idp.publishKeys(Self.url, [Mint.jwk(TestKeys.rsaA, kid: "rsa-a")], cacheControl: "max-age=600")
        source = JWKSSource(url: Self.url, label: "test", http: idp, clock: clock.function)
    }

    var fetches: Int { idp.requests(to: Self.url).count }

    func verify(_ token: String = Mint.rs256(), on thread: TestLoopThread = .main) async -> Result<VerifiedClaims, CallbackFailure> {
        let delivered = await onLoop(thread) { [source, verifier] loop, done in
            source.verify(token, with: verifier, expectedNonce: nil, on: loop, done)
        }
        #expect(delivered.onLoop, "completion ran off its event loop")
        return delivered.result
    }

    func publishRotatedKeys() {
        idp.publishKeys(Self.url, [Mint.jwk(TestKeys.rsaA, kid: "rsa-a"), Mint.jwk(TestKeys.rsaB, kid: "rsa-new")],
                        cacheControl: "max-age=600")
    }

    var rotatedToken: String { Mint.rs256(Mint.claims(["iat": .number(clock.now)]), kid: "rsa-new", key: TestKeys.rsaB) }

    // MARK: Caching

    @Test func fetchesOnFirstUseAndThenServesFromTheCache() async {
        #expect(await verify().refusal == nil)
        #expect(await verify().refusal == nil)
        #expect(fetches == 1)
        #expect(idp.requests(to: Self.url)[0].method == "GET")
    }

    @Test func refetchesWhenTheCacheControlLifetimeIsOver() async {
        #expect(await verify().refusal == nil)
        clock.advance(599)
        #expect(await verify().refusal == nil)
        #expect(fetches == 1)
        clock.advance(1)
        #expect(await verify().refusal == nil)
        #expect(fetches == 2)
    }

    @Test func concurrentCallersShareOneFetch() async {
        idp.hold(Self.url)
        async let results = withTaskGroup(of: Bool.self) { group in
            for _ in 0..<5 { group.addTask { await verify().refusal == nil } }
            return await group.reduce(into: [Bool]()) { $0.append($1) }
        }
        await until { source.waitingCount == 5 }
        #expect(idp.parkedCount(Self.url) == 1)
        idp.release(Self.url)
        #expect(await results == [true, true, true, true, true])
        #expect(fetches == 1)
    }

    @Test func aCallerOnAnotherLoopWaitsForTheSameFetchAndIsResumedOnItsOwnLoop() async {
        idp.hold(Self.url)
        async let first = verify(on: .main)
        async let second = verify(on: .second)   // checks that it completes on `.second`
        await until { source.waitingCount == 2 }
        idp.release(Self.url)
        #expect(await first.refusal == nil)
        #expect(await second.refusal == nil)
        #expect(fetches == 1)
    }

    // MARK: Unknown kid

    @Test func anUnknownKidRefetchesOnceAndVerifiesWhenTheKeyAppeared() async {
        #expect(await verify().refusal == nil)
        clock.advance(60)
        publishRotatedKeys()
        #expect(await verify(rotatedToken).refusal == nil)
        #expect(fetches == 2)
    }

    @Test func anUnknownKidFailsAfterOneRefetchWhenTheKeyIsStillMissing() async {
        #expect(await verify().refusal == nil)
        clock.advance(60)
        let failure = await verify(rotatedToken).refusal
        #expect(failure?.code == "invalid_id_token")
        #expect(failure?.logDetail == "test id_token refused: kid is not in the key set")
        #expect(failure?.retryable == false)
        #expect(fetches == 2)
        // Another made-up kid right after: refused without calling the IdP again.
        #expect(await verify(Mint.rs256(kid: "made-up")).refusal?.code == "invalid_id_token")
        #expect(fetches == 2)
    }

    @Test func anUnknownKidRightAfterAFetchIsRefusedWithoutRefetching() async {
        #expect(await verify().refusal == nil)
        clock.advance(9)
        publishRotatedKeys()
        #expect(await verify(rotatedToken).refusal?.code == "invalid_id_token")
        #expect(fetches == 1)
    }

    @Test func anUnknownKidOnFirstUseIsNotFetchedTwice() async {
        // The first fetch already is the freshest key set there is.
        #expect(await verify(rotatedToken).refusal?.code == "invalid_id_token")
        #expect(fetches == 1)
    }

    @Test func concurrentUnknownKidsShareOneRefetch() async {
        #expect(await verify().refusal == nil)
        clock.advance(60)
        publishRotatedKeys()
        idp.hold(Self.url)
        let token = rotatedToken
        async let results = withTaskGroup(of: Bool.self) { group in
            for _ in 0..<3 { group.addTask { await verify(token).refusal == nil } }
            return await group.reduce(into: [Bool]()) { $0.append($1) }
        }
        await until { source.waitingCount == 3 }
        idp.release(Self.url)
        #expect(await results == [true, true, true])
        #expect(fetches == 2)
    }

    // MARK: Failures

    @Test func aFailedFirstFetchIsRetryableAndBacksOff() async {
        idp.override(Self.url, .error(OutboundError(.timeout, "timed out after 10 s")))
        let failure = await verify().refusal
        #expect(failure?.code == "idp_unavailable")
        #expect(failure?.retryable == true)
        #expect(failure?.logDetail == "test JWKS unavailable: \(Self.url) fetch failed: timeout")
        idp.override(Self.url, nil)
        clock.advance(29)
        #expect(await verify().refusal?.code == "idp_unavailable")
        #expect(fetches == 1)
        clock.advance(1)
        #expect(await verify().refusal == nil)
        #expect(fetches == 2)
    }

    @Test func staleKeysKeepServingWhileTheIdPFails() async {
        #expect(await verify().refusal == nil)
        clock.advance(600)
        idp.override(Self.url, .response(OutboundResponse(status: 500)))
        #expect(await verify().refusal == nil)
        #expect(fetches == 2)
    }

    @Test func aDocumentThatIsNotAKeySetIsAnUnavailableFailure() async {
        idp.publishKeys(Self.url, body: Array(#"{"keys": "none"}"#.utf8), cacheControl: nil)
        let failure = await verify().refusal
        #expect(failure?.code == "idp_unavailable")
        #expect(failure?.logDetail == "test JWKS unavailable: \(Self.url) refused: JWKS has no keys array")
    }

    @Test func aRefusedTokenIsNotARetryableFailure() async {
        let failure = await verify(Mint.rs256(Mint.claims(["aud": .string("other")]))).refusal
        #expect(failure?.source == .idp)
        #expect(failure?.code == "invalid_id_token")
        #expect(failure?.retryable == false)
    }

    @Test func currentKeysReturnsTheFetchedSet() async {
        let delivered = await onLoop { [source] loop, done in source.currentKeys(on: loop, done) }
        #expect(delivered.onLoop)
        #expect((try? delivered.result.get())?.keys.map(\.keyID) == ["rsa-a"])
    }
}
