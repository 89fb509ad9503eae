import ProxyCore
import Synchronization

/// The operator's line for a `config` failure: at error level, naming the setting, once per
/// minute per provider and setting. Every sign-in fails the same way until the setting is
/// fixed, so a line per callback would bury the one that matters; the count is in
/// `callback_proxy_callbacks_total{outcome="config_error"}`.
final class ConfigFailureLog: Sendable {
    static let interval: UInt64 = 60 * 1_000_000_000
    private let lastLogged = Mutex<[String: UInt64]>([:])
    private let interval: UInt64

    /// `interval`: nanoseconds between two lines for one key (a minute for config failures).
    init(interval: UInt64 = ConfigFailureLog.interval) {
        self.interval = interval
    }

    /// Whether a line for (`provider`, `setting`) is due at `now` (nanoseconds); if so, it is
    /// taken as written.
    func isDue(provider: String, setting: String, now: UInt64) -> Bool {
        lastLogged.withLock { last in
            let key = provider + "\u{0}" + setting
            if let at = last[key], now &- at < interval { return false }
            if last.count >= 1_024 { last.removeAll() }
            last[key] = now
            return true
        }
    }
}
