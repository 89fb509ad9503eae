/// Per-cause rate limiting for lines an outage repeats once per request.
///
/// With the upstream down, every request would write its own `request failed` line — 10–18k
/// lines a second under load, which journald then rate-limits, dropping the useful lines with
/// the noise. Here the first line of a cause (its message and a key such as the status and
/// reason, which names the upstream address and the error) is written at once; the ones that
/// follow within a second are counted, and a second later one summary line says how many,
/// with the fields of the latest (its `request_id` finds one of them in the access log).
///
/// `@unchecked Sendable`: `perLoop[i]` is only touched on loop `i`.
public final class LogThrottle: @unchecked Sendable {
    public static let interval: UInt64 = 1_000_000_000
    /// Causes tracked per loop; beyond it, new causes share one key (a flood of distinct
    /// reasons must not grow memory).
    static let maxCauses = 256

    private struct Cause {
        var level: Logger.Level
        var message: String
        var lastWritten: UInt64
        var suppressed = 0
        var latest: [(String, String)] = []
    }

    private final class PerLoop {
        var causes: [String: Cause] = [:]
        var flushArmed = false
    }

    private let log: Logger
    private let perLoop: [PerLoop]

    public init(log: Logger, loops: Int) {
        self.log = log
        perLoop = (0..<max(1, loops)).map { _ in PerLoop() }
    }

    /// Writes the line now if its cause has not been written within the last second, else
    /// counts it for the summary. Call on `loop`'s thread.
    public func log(_ level: Logger.Level, _ message: String, key: String, fields: [(String, String)], on loop: EventLoop) {
        guard level >= log.level else { return }
        let state = perLoop[loop.index]
        var cause = message + "\u{0}" + key
        if state.causes[cause] == nil && state.causes.count >= Self.maxCauses { cause = message + "\u{0}(other causes)" }
        let now = loop.nowNanoseconds
        if var known = state.causes[cause], now &- known.lastWritten < Self.interval {
            known.suppressed += 1
            known.latest = fields
            state.causes[cause] = known
            armFlush(state, on: loop)
            return
        }
        // A window that ended before its flush ran (the timer and this request in one loop
        // iteration): its count is written first, never dropped.
        if let ended = state.causes[cause], ended.suppressed > 0 { writeSummary(ended) }
        state.causes[cause] = Cause(level: level, message: message, lastWritten: now)
        log.log(level, message, fields: fields)
    }

    private func writeSummary(_ cause: Cause) {
        log.log(cause.level, cause.message, fields: cause.latest + [
            ("suppressed", "\(cause.suppressed)"), ("suppressed_over_ms", "\(Self.interval / 1_000_000)"),
        ])
    }

    private func armFlush(_ state: PerLoop, on loop: EventLoop) {
        guard !state.flushArmed else { return }
        state.flushArmed = true
        loop.scheduleTimer(after: Self.interval) { [self] in flush(state, on: loop) }
    }

    /// One summary line per cause with lines held back; causes quiet for a second are forgotten.
    private func flush(_ state: PerLoop, on loop: EventLoop) {
        state.flushArmed = false
        let now = loop.nowNanoseconds
        for (key, var cause) in state.causes {
            if cause.suppressed > 0 {
                writeSummary(cause)
                cause.suppressed = 0
                cause.lastWritten = now
                state.causes[key] = cause
            } else if now &- cause.lastWritten >= Self.interval {
                state.causes[key] = nil
            }
        }
    }
}
