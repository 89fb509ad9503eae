import Testing
@testable import OAuthCallback

@Suite struct CallbackRateLimiterTests {
    static let second: UInt64 = 1_000_000_000

    @Test(arguments: [("30/m", 30, 60), ("5/s", 5, 1), ("600/h", 600, 3_600), ("1/m", 1, 60)])
    func ratesParse(text: String, count: Int, period: Int) {
        #expect(RateLimit.parse(text) == RateLimit(count: count, periodSeconds: period))
    }

    @Test(arguments: ["", "30", "30/", "/m", "0/m", "-1/m", "30/d", "30/min", "30 /m", "1000001/s", "x/m"])
    func otherRatesAreRefused(text: String) {
        #expect(RateLimit.parse(text) == nil)
    }

    @Test func aBurstOfTheLimitPassesThenTheNextWaitsForOneToken() {
        let limiter = CallbackRateLimiter(limit: RateLimit(count: 3, periodSeconds: 60))
        let t0: UInt64 = 1_000 * Self.second
        for _ in 0..<3 { #expect(limiter.admit("203.0.113.7", now: t0) == .allowed) }
        // One token per 20 s: the fourth waits 20 s, and only the first refusal is to be logged.
        #expect(limiter.admit("203.0.113.7", now: t0) == .refused(retryAfterSeconds: 20, firstRefusal: true))
        #expect(limiter.admit("203.0.113.7", now: t0 + 5 * Self.second) == .refused(retryAfterSeconds: 15, firstRefusal: false))
        #expect(limiter.admit("203.0.113.7", now: t0 + 20 * Self.second) == .allowed)
        #expect(limiter.admit("203.0.113.7", now: t0 + 20 * Self.second) == .refused(retryAfterSeconds: 20, firstRefusal: true))
        // Other addresses have buckets of their own.
        #expect(limiter.admit("198.51.100.1", now: t0) == .allowed)
    }

    @Test func aBucketRefillsToTheLimitAndNoFurther() {
        let limiter = CallbackRateLimiter(limit: RateLimit(count: 2, periodSeconds: 1))
        let t0: UInt64 = 50 * Self.second
        #expect(limiter.admit("a", now: t0) == .allowed)
        #expect(limiter.admit("a", now: t0) == .allowed)
        // An hour idle refills 2 tokens, not 7,200.
        let later = t0 + 3_600 * Self.second
        #expect(limiter.admit("a", now: later) == .allowed)
        #expect(limiter.admit("a", now: later) == .allowed)
        #expect(limiter.admit("a", now: later) == .refused(retryAfterSeconds: 1, firstRefusal: true))
    }

    @Test func aLoopWhoseClockLagsDoesNotBreakTheBucket() {
        let limiter = CallbackRateLimiter(limit: RateLimit(count: 1, periodSeconds: 60))
        let t0: UInt64 = 100 * Self.second
        #expect(limiter.admit("a", now: t0) == .allowed)
        #expect(limiter.admit("a", now: t0 - 1_000) == .refused(retryAfterSeconds: 60, firstRefusal: true))
    }

    @Test func trackedAddressesAreBoundedAndIdleOnesMakeRoom() {
        let limiter = CallbackRateLimiter(limit: RateLimit(count: 1, periodSeconds: 60), maxClients: 3)
        let t0: UInt64 = 100 * Self.second
        for c in ["a", "b", "c"] { #expect(limiter.admit(c, now: t0) == .allowed) }
        #expect(limiter.trackedClients == 3)
        // Full, none idle: a new address passes untracked, the limited ones stay limited.
        #expect(limiter.admit("d", now: t0) == .allowed)
        #expect(limiter.trackedClients == 3)
        #expect(limiter.admit("a", now: t0) == .refused(retryAfterSeconds: 60, firstRefusal: true))
        // A minute on, every bucket is full again: they are dropped to make room.
        #expect(limiter.admit("e", now: t0 + 61 * Self.second) == .allowed)
        #expect(limiter.trackedClients == 1)
    }
}
