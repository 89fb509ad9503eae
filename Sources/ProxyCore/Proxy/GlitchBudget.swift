/// A connection's budget of "glitches" (HAProxy's word): things a client makes the proxy do that
/// carry no request forward, such as HTTP/2 PINGs and SETTINGS (`HTTP2FrameGuard`) or QUIC
/// packets that bring nothing new (`QUICWorkGuard`). Each costs one unit; the budget refills at
/// `perSecond` up to `burst`, and work a client legitimately owes for what it was sent (the
/// acknowledgements of data) can be given back with `give`. An empty budget ends the connection.
/// A pure token bucket: the clock comes in as an argument.
struct GlitchBudget {
    struct Limits: Equatable {
        var burst: Int
        var perSecond: Int
    }

    let limits: Limits
    private var tokens: Double
    private var refilledAt: UInt64

    init(limits: Limits, now: UInt64) {
        self.limits = limits
        tokens = Double(limits.burst)
        refilledAt = now
    }

    /// Takes one unit; false when the budget is empty.
    mutating func spend(_ now: UInt64) -> Bool {
        if now > refilledAt {
            let elapsed = Double(now - refilledAt) / 1e9
            tokens = min(Double(limits.burst), tokens + elapsed * Double(limits.perSecond))
            refilledAt = now
        }
        guard tokens >= 1 else { return false }
        tokens -= 1
        return true
    }

    /// Gives `units` back, up to `burst`.
    mutating func give(_ units: Double) {
        tokens = min(Double(limits.burst), tokens + units)
    }
}
