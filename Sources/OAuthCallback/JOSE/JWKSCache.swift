/// When to use cached JWKS keys and when to fetch them again, for one provider. Pure logic:
/// the caller passes the clock in and does the HTTP itself.
///
/// - Lifetime comes from the JWKS response's `Cache-Control` (`max-age`), clamped.
/// - A token whose `kid` is unknown may trigger a refetch (the IdP rotated keys), but at most
///   once per `unknownKeyRefetchInterval` since the last fetch, so a stream of tokens with
///   made-up `kid`s cannot turn the proxy into a JWKS-fetching amplifier.
/// - After a failed fetch, stale keys keep serving for a while (`staleIfErrorLimit`) and the
///   next attempt waits `failureBackoff`, so an IdP outage does not become a retry storm.
///
/// Concurrent fetches for one provider are the fetcher's to coalesce; this type only says
/// whether one is due.
public struct JWKSCache: Sendable {
    public struct Policy: Sendable, Equatable {
        /// Used when the response has no usable `max-age`. Default 1 h.
        public var defaultLifetime: Int64 = 3_600
        /// Floor for any lifetime, and the lifetime for `no-store`/`no-cache`. Default 60 s.
        public var minimumLifetime: Int64 = 60
        /// Ceiling for `max-age`. Default 24 h.
        public var maximumLifetime: Int64 = 86_400
        /// Minimum time between a fetch and an unknown-`kid` refetch. Default 10 s: short, so a
        /// key rotation costs at most seconds of failed sign-ins; it only has to stop a burst of
        /// unknown kids from turning into a burst of fetches (id_tokens come from the IdP's own
        /// token endpoint over TLS, so an outsider cannot choose the kid anyway).
        public var unknownKeyRefetchInterval: Int64 = 10
        /// Wait after a failed fetch before trying again. Default 30 s.
        public var failureBackoff: Int64 = 30
        /// How long past expiry stale keys may serve while fetches fail. Default 1 h.
        public var staleIfErrorLimit: Int64 = 3_600

        public init() {}
    }

    public enum Decision: Sendable {
        /// The keys are fresh (or stale but allowed while the IdP is failing): verify with them.
        case useCached(JWKSet)
        /// Fetch the JWKS, then call `recordFetch` or `recordFetchFailure`.
        case fetch
        /// No usable keys and a fetch failed moments ago: fail the login without calling the IdP.
        case unavailable
    }

    public let policy: Policy
    public private(set) var keys: JWKSet?
    /// When the cached keys stop being fresh.
    public private(set) var expiresAt: Int64 = .min
    private var lastFetchAt: Int64?
    private var retryNotBefore: Int64?

    public init(policy: Policy = Policy()) {
        self.policy = policy
    }

    public func decision(now: Int64) -> Decision {
        if let keys, now < expiresAt { return .useCached(keys) }
        if let retryNotBefore, now < retryNotBefore {
            if let keys, now < expiresAt.saturatingAdd(policy.staleIfErrorLimit) { return .useCached(keys) }
            return .unavailable
        }
        return .fetch
    }

    /// Stores freshly fetched keys. `cacheControl` is the response's `Cache-Control` value.
    public mutating func recordFetch(_ keys: JWKSet, cacheControl: String?, now: Int64) {
        self.keys = keys
        expiresAt = now.saturatingAdd(Self.lifetime(cacheControl: cacheControl, policy: policy))
        lastFetchAt = now
        retryNotBefore = nil
    }

    /// Notes a failed fetch (network error, bad status, invalid JWKS). Cached keys are kept.
    public mutating func recordFetchFailure(now: Int64) {
        lastFetchAt = now
        retryNotBefore = now.saturatingAdd(policy.failureBackoff)
    }

    /// Asked when a token's `kid` is not in the cached keys. True means "fetch now" and
    /// counts as the refetch for this interval; false means refuse the token without fetching.
    public mutating func shouldRefetchForUnknownKeyID(now: Int64) -> Bool {
        if let lastFetchAt, now < lastFetchAt.saturatingAdd(policy.unknownKeyRefetchInterval) { return false }
        if let retryNotBefore, now < retryNotBefore { return false }
        lastFetchAt = now
        return true
    }

    /// Seconds to cache a JWKS response for, from its `Cache-Control` (RFC 9111 §5.2.2).
    /// `no-store`/`no-cache` give the minimum; a missing `max-age` gives the default; a
    /// malformed or repeated `max-age` is treated as stale (RFC 9111 §4.2.1), i.e. the minimum.
    public static func lifetime(cacheControl: String?, policy: Policy = Policy()) -> Int64 {
        guard let cacheControl else { return policy.defaultLifetime }
        var maxAge: Int64?
        var malformed = false
        for rawDirective in cacheControl.split(separator: ",") {
            let directive = rawDirective.trimmingOWS()
            let parts = directive.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = parts[0].trimmingOWS().lowercased()
            switch name {
            case "no-store", "no-cache":
                return policy.minimumLifetime
            case "max-age":
                guard parts.count == 2, maxAge == nil, let seconds = parseDeltaSeconds(parts[1].trimmingOWS()) else {
                    malformed = true
                    continue
                }
                maxAge = seconds
            default:
                continue
            }
        }
        if malformed { return policy.minimumLifetime }
        guard let maxAge else { return policy.defaultLifetime }
        return min(max(maxAge, policy.minimumLifetime), policy.maximumLifetime)
    }

    /// delta-seconds (RFC 9111 §1.2.2), optionally quoted; saturates instead of overflowing.
    private static func parseDeltaSeconds(_ text: Substring) -> Int64? {
        var digits = text
        if digits.count >= 2, digits.first == "\"", digits.last == "\"" { digits = digits.dropFirst().dropLast() }
        guard !digits.isEmpty else { return nil }
        var value: Int64 = 0
        for c in digits.utf8 {
            guard c >= UInt8(ascii: "0"), c <= UInt8(ascii: "9") else { return nil }
            let (times10, o1) = value.multipliedReportingOverflow(by: 10)
            let (next, o2) = times10.addingReportingOverflow(Int64(c - UInt8(ascii: "0")))
            value = (o1 || o2) ? .max : next
        }
        return value
    }
}

private extension Substring {
    /// Strips HTTP optional whitespace (SP / HTAB) from both ends.
    func trimmingOWS() -> Substring {
        var s = self
        while let f = s.first, f == " " || f == "\t" { s = s.dropFirst() }
        while let l = s.last, l == " " || l == "\t" { s = s.dropLast() }
        return s
    }
}

private extension Int64 {
    func saturatingAdd(_ other: Int64) -> Int64 {
        let (sum, overflow) = addingReportingOverflow(other)
        guard overflow else { return sum }
        return other > 0 ? .max : .min
    }
}
