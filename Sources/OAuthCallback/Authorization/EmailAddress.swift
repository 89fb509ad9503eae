/// The parts of an email address that access rules compare, or nil when the address cannot be
/// trusted to mean one thing: exactly one `@`, a non-empty local part, and a domain of ASCII
/// letters, digits, `-` and `.` (no empty label, no trailing dot). ASCII letters lower-cased:
/// providers keep the case the user typed, and mail routing ignores it in the domain (and, in
/// practice, in the local part too). Only ASCII: Unicode folding would turn the Kelvin sign
/// (U+212A) into `k`, so `\u{212A}im@…` would pass for `kim@…`, an account the IdP holds apart.
public struct EmailAddress: Equatable {
    public let address: String
    let domain: Substring

    public init?(_ text: String) {
        let lower = text.asciiLowercased()
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

    /// A domain rule's entry as the rules compare it: `example.com` (that domain) or
    /// `.example.com` (its subdomains), ASCII lower-cased; nil when it is neither.
    public static func domainPattern(_ text: some StringProtocol) -> String? {
        let lower = text.asciiLowercased()
        return isDomain(lower.hasPrefix(".") ? lower.dropFirst() : Substring(lower)) ? lower : nil
    }

    /// Whether the domain is `pattern` (`example.com`) or, for `.example.com`, one of its
    /// subdomains. `pattern` is lower-cased.
    func domainMatches(_ pattern: String) -> Bool {
        if pattern.hasPrefix(".") { return domain.count > pattern.count && domain.hasSuffix(pattern) }
        return domain == pattern
    }
}

extension StringProtocol {
    /// With A–Z turned into a–z and every other character kept as it is (`lowercased()` folds
    /// Unicode too, which identity comparisons must not).
    public func asciiLowercased() -> String {
        // Addresses are nearly always lower-case already: then no copy (this runs on every
        // request with a session, through the access rules).
        guard utf8.contains(where: { $0 >= 0x41 && $0 <= 0x5a }) else { return String(self) }
        var bytes = Array(utf8)
        for i in bytes.indices where bytes[i] >= 0x41 && bytes[i] <= 0x5a { bytes[i] |= 0x20 }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The same bytes: Swift's `==` on strings compares canonical equivalence, so `Å` written as
    /// U+212B (Angstrom sign) equals U+00C5 — two different identifiers to an IdP.
    func sameBytes<Other: StringProtocol>(_ other: Other) -> Bool { utf8.elementsEqual(other.utf8) }
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
