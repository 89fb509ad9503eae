/// The parts of an email address that access rules compare, or nil when the address cannot be
/// trusted to mean one thing: exactly one `@`, a non-empty local part, and a domain of ASCII
/// letters, digits, `-` and `.` (no empty label, no trailing dot). Lower-cased: providers keep
/// the case the user typed, and mail routing ignores it in the domain (and, in practice, in
/// the local part too).
public struct EmailAddress: Equatable {
    let address: String
    let domain: Substring

    init?(_ text: String) {
        let lower = text.lowercased()
        let parts = lower.split(separator: "@", omittingEmptySubsequences: false)
        guard parts.count == 2, !parts[0].isEmpty, Self.isDomain(parts[1]) else { return nil }
        address = lower
        domain = lower[lower.index(after: lower.firstIndex(of: "@")!)...]
    }

    /// Letters, digits and `-` in dot-separated labels of 1–63 bytes; ASCII only (the
    /// configuration's check of the domains it is given, too).
    public static func isDomain(_ d: Substring) -> Bool {
        guard !d.isEmpty, d.utf8.count <= 253 else { return false }
        for label in d.split(separator: ".", omittingEmptySubsequences: false) {
            guard (1...63).contains(label.utf8.count), label.first != "-", label.last != "-" else { return false }
            for b in label.utf8 where !(b >= 0x61 && b <= 0x7a) && !(b >= 0x30 && b <= 0x39) && b != 0x2d && !(b >= 0x41 && b <= 0x5a) {
                return false
            }
        }
        return true
    }

    /// Whether the domain is `pattern` (`example.com`) or, for `.example.com`, one of its
    /// subdomains. `pattern` is lower-cased.
    func domainMatches(_ pattern: String) -> Bool {
        if pattern.hasPrefix(".") { return domain.count > pattern.count && domain.hasSuffix(pattern) }
        return domain == pattern
    }
}

extension Substring {
    /// Without the characters of `set` at either end.
    func trimming(_ set: String) -> String {
        var s = self
        while let f = s.first, set.contains(f) { s = s.dropFirst() }
        while let l = s.last, set.contains(l) { s = s.dropLast() }
        return String(s)
    }
}
