import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Structured operator log: one JSON object per line on stderr (or plain `key=value` text).
/// Used off the hot path (failures, lifecycle); secrets are never passed to it — callers log
/// reasons, never values.
public final class Logger: Sendable {
    public enum Level: Int, Sendable, Comparable {
        case debug, info, warn, error
        public static func < (a: Level, b: Level) -> Bool { a.rawValue < b.rawValue }
        var name: String { ["debug", "info", "warn", "error"][rawValue] }
        public init?(name: String) {
            switch name.lowercased() {
            case "debug": self = .debug
            case "info": self = .info
            case "warn", "warning": self = .warn
            case "error": self = .error
            default: return nil
            }
        }
    }

    public enum Format: Sendable { case json, text }

    /// Changed by a configuration reload; read on every log call (one relaxed load).
    private let threshold: Atomic<Int>
    public var level: Level {
        get { Level(rawValue: threshold.load(ordering: .relaxed)) ?? .info }
    }

    public func setLevel(_ level: Level) { threshold.store(level.rawValue, ordering: .relaxed) }

    let format: Format
    let fd: Int32
    private let lock = Mutex(())

    public init(level: Level = .info, format: Format = .json, fd: Int32 = 2) {
        threshold = Atomic(level.rawValue)
        self.format = format
        self.fd = fd
    }

    public func debug(_ message: String, _ fields: KeyValuePairs<String, String> = [:]) { log(.debug, message, fields) }
    public func info(_ message: String, _ fields: KeyValuePairs<String, String> = [:]) { log(.info, message, fields) }
    public func warn(_ message: String, _ fields: KeyValuePairs<String, String> = [:]) { log(.warn, message, fields) }
    public func error(_ message: String, _ fields: KeyValuePairs<String, String> = [:]) { log(.error, message, fields) }

    public func log(_ level: Level, _ message: String, _ fields: KeyValuePairs<String, String>) {
        guard level >= self.level else { return }
        write(level, message, fields.lazy.map { ($0.key, $0.value) })
    }

    /// The same with fields put together at run time (`LogThrottle`'s summary lines).
    public func log(_ level: Level, _ message: String, fields: [(String, String)]) {
        guard level >= self.level else { return }
        write(level, message, fields)
    }

    private func write(_ level: Level, _ message: String, _ fields: some Sequence<(String, String)>) {
        var line = ""
        switch format {
        case .json:
            line = "{\"time\":\"\(Clock.isoNow())\",\"level\":\"\(level.name)\",\"msg\":\(JSON.quote(message))"
            for (k, v) in fields { line += ",\(JSON.quote(k)):\(JSON.quote(v))" }
            line += "}\n"
        case .text:
            line = "\(Clock.isoNow()) \(level.name) \(message)"
            for (k, v) in fields { line += " \(k)=\(JSON.quote(v))" }
            line += "\n"
        }
        lock.withLock { _ in
            var l = line
            l.withUTF8 { buf in
                var off = 0
                while off < buf.count {
                    let n = Glibc.write(fd, buf.baseAddress! + off, buf.count - off)
                    if n <= 0 { break }
                    off += n
                }
            }
        }
    }
}

enum JSON {
    /// A JSON string literal for `s` (control characters escaped).
    static func quote(_ s: String) -> String {
        var out = "\""
        for u in s.unicodeScalars {
            switch u {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            default:
                if u.value < 0x20 || u.value == 0x7F {
                    let hex = String(u.value, radix: 16)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                } else {
                    out.unicodeScalars.append(u)
                }
            }
        }
        return out + "\""
    }
}

enum Clock {
    /// Wall-clock time as `2026-01-02T03:04:05.678Z`.
    static func isoNow() -> String {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        var buf = ByteBuffer()
        defer { buf.free() }
        appendISO(&buf, seconds: Int(ts.tv_sec), millis: Int(ts.tv_nsec / 1_000_000))
        return buf.string
    }

    static func appendISO(_ out: inout ByteBuffer, seconds: Int, millis: Int) {
        var t = time_t(seconds)
        var parts = tm()
        gmtime_r(&t, &parts)
        func two(_ v: Int32) { out.append(byte: UInt8(0x30 + v / 10)); out.append(byte: UInt8(0x30 + v % 10)) }
        out.append(decimal: UInt64(parts.tm_year + 1900))
        out.append(byte: 0x2D); two(parts.tm_mon + 1)
        out.append(byte: 0x2D); two(parts.tm_mday)
        out.append(byte: 0x54); two(parts.tm_hour)
        out.append(byte: 0x3A); two(parts.tm_min)
        out.append(byte: 0x3A); two(parts.tm_sec)
        out.append(byte: 0x2E)
        out.append(byte: UInt8(0x30 + millis / 100))
        out.append(byte: UInt8(0x30 + millis / 10 % 10))
        out.append(byte: UInt8(0x30 + millis % 10))
        out.append(byte: 0x5A)
    }
}
