/// Parsing of the value forms shared by flags and the configuration file.
public enum Units {
    /// `250ms`, `10s`, `2m`, `1h` → nanoseconds (must be > 0).
    public static func duration(_ text: String) -> UInt64? {
        let units: [(String, UInt64)] = [("ms", 1_000_000), ("s", 1_000_000_000), ("m", 60_000_000_000), ("h", 3_600_000_000_000)]
        for (suffix, scale) in units where text.hasSuffix(suffix) {
            let number = text.dropLast(suffix.count)
            // "ms" also ends in "s": only accept when the rest is all digits.
            if let n = UInt64(number), n > 0, n <= UInt64.max / scale { return n * scale }
        }
        return nil
    }

    /// `4096`, `512k`, `100m`, `2g` (powers of 1024) → bytes.
    public static func size(_ text: String) -> UInt64? {
        let lower = text.lowercased()
        var scale: UInt64 = 1
        var number = Substring(lower)
        if let last = lower.last, let s = ["k": UInt64(1) << 10, "m": 1 << 20, "g": 1 << 30][String(last)] {
            scale = s
            number = lower.dropLast()
        }
        guard let n = UInt64(number), n <= UInt64.max / scale else { return nil }
        return n * scale
    }
}
