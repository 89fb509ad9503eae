#if canImport(Glibc)
import Glibc
#endif

/// The `Date` header of the responses the proxy writes itself (RFC 9110 §6.6.1: a server with
/// a clock sends one), as IMF-fixdate: `Sun, 06 Nov 1994 08:49:37 GMT`. Formatted at most
/// once a second per loop; proxied responses keep the upstream's own `Date`.
final class HTTPDateCache {
    private var second = -1
    private var text: [UInt8] = []

    /// The current date's bytes (call on the owning loop's thread).
    func current() -> [UInt8] {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        let now = Int(ts.tv_sec)
        if now != second {
            second = now
            text = Self.format(epochSeconds: now)
        }
        return text
    }

    static func format(epochSeconds: Int) -> [UInt8] {
        var t = time_t(epochSeconds)
        var parts = tm()
        gmtime_r(&t, &parts)
        let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        func two(_ v: Int32) -> String { v < 10 ? "0\(v)" : "\(v)" }
        let s = "\(days[Int(parts.tm_wday)]), \(two(parts.tm_mday)) \(months[Int(parts.tm_mon)]) \(parts.tm_year + 1900) "
            + "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)) GMT"
        return Array(s.utf8)
    }
}
