import Synchronization

/// A token bucket per client address, for every loop at once and without a lock: each client's
/// bucket is one word, its *theoretical arrival time* (GCRA, the cell-rate algorithm ATM
/// switches and many gateways use): the moment the bucket would be full again. A request at
/// `now` is allowed when taking its token leaves that moment no more than `burst` tokens ahead;
/// taking it moves the moment on by one token's time. An idle client's moment lies in the past
/// and its slot carries no information, so it is free for another client.
///
/// `burst` requests may arrive at once; after that one per `interval`. The low bit of the
/// stored time marks "refused since last allowed", so a flood logs its first refusal only.
public final class RateBuckets: Sendable {
    public enum Verdict: Equatable, Sendable {
        case allowed
        /// `firstRefusal`: the first refusal since this client was last allowed (log it; the
        /// rest of the burst only counts).
        case refused(retryAfterSeconds: Int, firstRefusal: Bool)
        /// No room in the table for this client: allowed, not counted (`AtomicSlots`).
        case untracked
    }

    public let limit: RateLimit
    public let burst: Int
    /// Nanoseconds per token.
    let interval: UInt64
    /// How far ahead of `now` the arrival time may run: `burst` tokens.
    let tolerance: UInt64
    private let slots: AtomicSlots

    /// `burst` defaults to the limit's count (`30/m`: 30 at once, then one every 2 s).
    /// `clients`: addresses tracked at once, at most (the table's size; untouched slots cost no
    /// memory).
    public init(limit: RateLimit, burst: Int? = nil, clients: Int = 1 << 17) {
        self.limit = limit
        self.burst = max(1, burst ?? limit.count)
        interval = max(2, UInt64(limit.periodSeconds) * 1_000_000_000 / UInt64(limit.count))
        tolerance = interval * UInt64(self.burst)
        slots = AtomicSlots(capacity: clients)
    }

    /// One request from `client` at `now` (a loop's monotonic nanoseconds; loops' clocks may
    /// differ slightly, which the `max` below absorbs).
    public func admit(_ client: ClientKey, now: UInt64) -> Verdict {
        let key = client.hash
        // A lost race means another loop changed a slot on the way: look again, a few times.
        for _ in 0..<4 {
            // A slot whose bucket is full again carries no information: another client may take it.
            switch slots.lookup(client, isFree: { UInt64($0.second) & ~1 <= now }) {
            case .found(let i, let held):
                if let verdict = update(i, held, key: key, now: now) { return verdict }
            case .free(let i, let held):
                // A new (or long idle) client: a full bucket less this request's token.
                let claimed = WordPair(first: key, second: UInt((now &+ interval) & ~1))
                if slots.exchange(i, held, claimed).exchanged { return .allowed }
            case .full:
                return .untracked
            }
        }
        return .untracked
    }

    /// Takes a token from the bucket in slot `i`, if it has one; nil when the slot changed
    /// under us (the caller looks again).
    private func update(_ i: Int, _ held: WordPair, key: UInt, now: UInt64) -> Verdict? {
        var held = held
        while held.first == key {
            let stored = UInt64(held.second)
            let arrival = max(stored & ~1, now)
            let next = arrival &+ interval
            if next - now <= tolerance {
                let desired = WordPair(first: key, second: UInt(next & ~1))
                let r = slots.exchange(i, held, desired)
                if r.exchanged { return .allowed }
                held = r.original
                continue
            }
            let wait = next - now - tolerance
            let seconds = max(1, Int((wait + 999_999_999) / 1_000_000_000))
            if stored & 1 == 1 { return .refused(retryAfterSeconds: seconds, firstRefusal: false) }
            let r = slots.exchange(i, held, WordPair(first: key, second: UInt(stored | 1)))
            if r.exchanged { return .refused(retryAfterSeconds: seconds, firstRefusal: true) }
            held = r.original
        }
        return nil
    }

    /// Clients whose buckets are not full at `now` (for tests).
    func tracked(now: UInt64) -> Int {
        var n = 0
        for i in 0..<slots.count {
            let held = slots.load(i)
            if held.first != 0 && UInt64(held.second) & ~1 > now { n += 1 }
        }
        return n
    }
}

/// `N/s`, `N/m` or `N/h`: a token bucket of N that refills at N per period.
public struct RateLimit: Sendable, Equatable {
    public var count: Int
    public var periodSeconds: Int

    public init(count: Int, periodSeconds: Int) {
        self.count = count
        self.periodSeconds = periodSeconds
    }

    /// `30/m` → 30 per 60 s. Nil for anything else (a count from 1 to 1,000,000).
    public static func parse(_ text: String) -> RateLimit? {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, let n = Int(parts[0]), (1...1_000_000).contains(n),
              let period = ["s": 1, "m": 60, "h": 3_600][String(parts[1])] else { return nil }
        return RateLimit(count: n, periodSeconds: period)
    }

    public var description: String {
        "\(count)/" + (periodSeconds == 1 ? "s" : periodSeconds == 60 ? "m" : "h")
    }
}
