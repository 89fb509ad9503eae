import Synchronization

/// `oauth.rate_limit`: how many callbacks one client address may start, as a token bucket per
/// address (`limit.count` tokens, refilled at `limit.count` per period), shared by all loops.
///
/// Why: every callback with a fresh code costs a store entry for the replay window and a call
/// to the IdP, and the contract's other parameters are public. Without a limit one machine can
/// fill the in-memory store (every sign-in then gets 503) or get the proxy's IP throttled by
/// the IdP. A wrapper app's user needs one callback per sign-in.
///
/// Off by default: behind a load balancer that is not in `trusted_proxies`, every client has
/// the balancer's address, and a per-address limit would throttle the whole site.
final class CallbackRateLimiter: Sendable {
    enum Verdict: Equatable {
        case allowed
        /// `firstRefusal`: the first refusal since this address was last allowed (log it;
        /// the rest of the burst only counts).
        case refused(retryAfterSeconds: Int, firstRefusal: Bool)
    }

    let limit: RateLimit
    /// Addresses tracked at most; beyond that (a botnet, not one abuser) new addresses pass
    /// untracked rather than evicting those being limited.
    let maxClients: Int
    private let nanosPerToken: Double
    private let buckets: Mutex<[String: Bucket]>

    private struct Bucket {
        var tokens: Double
        var updated: UInt64
        var refused = false
    }

    init(limit: RateLimit, maxClients: Int = 100_000) {
        self.limit = limit
        self.maxClients = maxClients
        nanosPerToken = Double(limit.periodSeconds) * 1e9 / Double(limit.count)
        buckets = Mutex([:])
    }

    /// One callback from `client` at `now` (monotonic nanoseconds).
    func admit(_ client: String, now: UInt64) -> Verdict {
        let capacity = Double(limit.count)
        return buckets.withLock { table in
            var bucket = table[client] ?? Bucket(tokens: capacity, updated: now)
            if bucket.updated < now {
                bucket.tokens = min(capacity, bucket.tokens + Double(now - bucket.updated) / nanosPerToken)
                bucket.updated = now
            }
            guard bucket.tokens >= 1 else {
                let first = !bucket.refused
                bucket.refused = true
                table[client] = bucket
                let wait = (1 - bucket.tokens) * nanosPerToken / 1e9
                return .refused(retryAfterSeconds: max(1, Int(wait.rounded(.up))), firstRefusal: first)
            }
            bucket.tokens -= 1
            bucket.refused = false
            if table[client] == nil && table.count >= maxClients {
                Self.dropFullBuckets(&table, now: now, capacity: capacity, nanosPerToken: nanosPerToken)
                if table.count >= maxClients { return .allowed }
            }
            table[client] = bucket
            return .allowed
        }
    }

    /// Buckets that have refilled completely carry no information: drop them.
    private static func dropFullBuckets(_ table: inout [String: Bucket], now: UInt64, capacity: Double, nanosPerToken: Double) {
        // Loops cache their own "now": one may lag the bucket's last update slightly.
        table = table.filter { _, b in b.tokens + Double(now > b.updated ? now - b.updated : 0) / nanosPerToken < capacity }
    }

    var trackedClients: Int { buckets.withLock { $0.count } }
}
