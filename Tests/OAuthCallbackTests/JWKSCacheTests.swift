import Testing
@testable import OAuthCallback

@Suite struct JWKSCacheTests {
    let keys = Mint.standardKeys
    let t0: Int64 = 1_700_000_000

    func isUseCached(_ d: JWKSCache.Decision) -> Bool { if case .useCached = d { return true } else { return false } }
    func isFetch(_ d: JWKSCache.Decision) -> Bool { if case .fetch = d { return true } else { return false } }
    func isUnavailable(_ d: JWKSCache.Decision) -> Bool { if case .unavailable = d { return true } else { return false } }

    @Test(arguments: [
        (String?.none, Int64(3_600)),
        ("", 3_600),
        ("private", 3_600),
        ("max-age=120", 120),
        ("public, max-age=19800, must-revalidate, no-transform", 19_800), // Google's JWKS
        ("MAX-AGE=300", 300),
        (#"max-age="300""#, 300),
        ("  max-age = 300 ", 300),
        ("max-age=5", 60),
        ("max-age=0", 60),
        ("max-age=999999", 86_400),
        ("max-age=99999999999999999999999", 86_400),
        ("no-store", 60),
        ("no-cache, max-age=600", 60),
        ("max-age=600, No-Cache", 60),
        ("max-age=abc", 60),
        ("max-age=", 60),
        ("max-age=-1", 60),
        ("max-age=10, max-age=20", 60),
        ("s-maxage=600", 3_600),
    ])
    func lifetimeFollowsCacheControlWithinTheClamp(header: String?, seconds: Int64) {
        #expect(JWKSCache.lifetime(cacheControl: header) == seconds)
    }

    @Test func anEmptyCacheMustFetch() {
        #expect(isFetch(JWKSCache().decision(now: t0)))
    }

    @Test func fetchedKeysAreUsedUntilTheyExpire() {
        var cache = JWKSCache()
        cache.recordFetch(keys, cacheControl: "max-age=600", now: t0)
        #expect(isUseCached(cache.decision(now: t0)))
        #expect(isUseCached(cache.decision(now: t0 + 599)))
        #expect(isFetch(cache.decision(now: t0 + 600)))
    }

    /// Asks the cache about an unknown kid at each of `seconds` after `start`, in order.
    func refetchAnswers(_ cache: inout JWKSCache, from start: Int64, at seconds: [Int64]) -> [Bool] {
        seconds.map { cache.shouldRefetchForUnknownKeyID(now: start + $0) }
    }

    @Test func anUnknownKidRefetchesAtMostOncePerInterval() {
        var cache = JWKSCache()
        cache.recordFetch(keys, cacheControl: nil, now: t0)
        // Keys fetched moments ago: a kid missing from them is not worth another fetch.
        #expect(refetchAnswers(&cache, from: t0, at: [1, 9, 10]) == [false, false, true])
        // A flood of made-up kids right after: no more fetches until the interval has passed.
        let flood = refetchAnswers(&cache, from: t0, at: Array(10..<20))
        #expect(!flood.contains(true))
        #expect(refetchAnswers(&cache, from: t0, at: [20]) == [true])
    }

    @Test func theUnknownKidIntervalIsConfigurable() {
        var policy = JWKSCache.Policy()
        policy.unknownKeyRefetchInterval = 45
        var cache = JWKSCache(policy: policy)
        cache.recordFetch(keys, cacheControl: nil, now: t0)
        #expect(refetchAnswers(&cache, from: t0, at: [44, 45]) == [false, true])
    }

    @Test func aFailedRefreshServesStaleKeysAndBacksOff() {
        var cache = JWKSCache()
        cache.recordFetch(keys, cacheControl: "max-age=600", now: t0)
        let expiry = t0 + 600
        #expect(isFetch(cache.decision(now: expiry)))
        cache.recordFetchFailure(now: expiry)
        #expect(isUseCached(cache.decision(now: expiry + 1)))
        #expect(isUseCached(cache.decision(now: expiry + 29)))
        #expect(isFetch(cache.decision(now: expiry + 30)))
        // No unknown-kid refetch while backing off either.
        #expect(refetchAnswers(&cache, from: expiry, at: [29]) == [false])
    }

    @Test func staleKeysStopServingAfterTheStaleLimit() {
        var cache = JWKSCache()
        cache.recordFetch(keys, cacheControl: "max-age=600", now: t0)
        let late = t0 + 600 + 3_600
        cache.recordFetchFailure(now: late)
        #expect(isUnavailable(cache.decision(now: late + 1)))
    }

    @Test func withoutKeysAFailedFetchFailsFastUntilTheBackoffEnds() {
        var cache = JWKSCache()
        cache.recordFetchFailure(now: t0)
        #expect(isUnavailable(cache.decision(now: t0 + 1)))
        #expect(isFetch(cache.decision(now: t0 + 30)))
    }

    @Test func aSuccessfulFetchClearsTheBackoff() {
        var cache = JWKSCache()
        cache.recordFetchFailure(now: t0)
        cache.recordFetch(keys, cacheControl: "no-store", now: t0 + 5)
        #expect(isUseCached(cache.decision(now: t0 + 6)))
        #expect(cache.expiresAt == t0 + 65)
    }
}
