/// Decides where a user may be sent after sign-in or sign-out (the `rd` parameter of
/// `/_oauth/start` and `/_oauth/sign_out`). Anything it does not positively recognise as safe
/// is refused, and the caller falls back to `/`: a refused legitimate target costs the user
/// one click, an accepted hostile one is an open redirect.
///
/// Accepted:
/// - a path on this site: exactly one leading `/`, then printable ASCII;
/// - an absolute `https://` URL whose host is on the allowlist (see `init(allowedHosts:)`),
///   or `http://` when the matching entry is written with `http://`.
///
/// Refused, among others: `//host`, `/\host`, `//` anywhere in the path, any backslash, any
/// control character or whitespace (raw, or percent-encoded at any depth — `%0a`, `%250a`),
/// encoded `/` or `\` that turn the path into `//host` after decoding, `.`/`..` path
/// segments, non-ASCII bytes (raw, or percent-encoded in the path: overlong UTF-8, full-width
/// dots), userinfo (`user@host`), IP literals and numeric hosts unless listed, trailing dots,
/// other schemes, and inputs longer than `maximumLength` bytes.
///
/// The input is checked after the caller has percent-decoded the query parameter once; a
/// browser percent-decodes nothing in a `Location` header, but the app behind us or a later
/// hop might, so the path is also checked after repeated decoding.
public struct RedirectValidator: Sendable {
    /// Longer targets are refused outright (2 KiB): no legitimate `rd` comes close.
    public static let maximumLength = 2048

    private let rules: [HostRule]

    /// - Parameter allowedHosts: entries of the form
    ///   - `good.com` — exactly that host, `https`, default port (443, written or not);
    ///   - `good.com:8443` — that host on that port only; `good.com:*` — any port;
    ///   - `.good.com` (or `*.good.com`) — `good.com` and any subdomain of it
    ///     (oauth2-proxy's `--whitelist-domain` semantics);
    ///   - `https://good.com` — same as `good.com`;
    ///   - `http://legacy.internal` — also allows plain `http` for that entry (and `https`);
    ///     plain `http` is never allowed otherwise.
    ///   Hosts compare case-insensitively. Entries that are not a valid DNS name
    ///   (`isValidEntry` false) are ignored here; the configuration check reports them.
    public init(allowedHosts: [String]) {
        rules = allowedHosts.compactMap(HostRule.init(entry:))
    }

    /// Whether an allowlist entry is well formed (for the configuration check).
    public static func isValidEntry(_ entry: String) -> Bool { HostRule(entry: entry) != nil }

    /// The host an allowlist entry names, lower-case, without scheme, port or wildcard
    /// (`.apps.example.com` → `apps.example.com`); nil for a malformed entry.
    public static func entryHost(_ entry: String) -> String? {
        HostRule(entry: entry).map { String(decoding: $0.host, as: UTF8.self) }
    }

    /// The target to redirect to (the input itself, unchanged), or nil when it is refused.
    public func validate(_ rd: String) -> String? {
        let bytes = Array(rd.utf8)
        guard !bytes.isEmpty, bytes.count <= Self.maximumLength else { return nil }
        // Printable ASCII only: no control characters, no whitespace, no non-ASCII look-alikes,
        // and no backslash, which browsers treat as `/` in special URLs.
        for byte in bytes where byte <= 0x20 || byte >= 0x7F || byte == .backslash { return nil }

        if bytes[0] == .slash {
            return Self.isSafeLocalReference(bytes[...]) ? rd : nil
        }
        return isAllowedAbsolute(bytes) ? rd : nil
    }

    // MARK: Absolute URLs

    private func isAllowedAbsolute(_ bytes: [UInt8]) -> Bool {
        let plainHTTP: Bool
        let afterScheme: Int
        if Self.hasPrefix(bytes, "https://") {
            plainHTTP = false
            afterScheme = 8
        } else if Self.hasPrefix(bytes, "http://") {
            plainHTTP = true
            afterScheme = 7
        } else {
            return false
        }
        var authorityEnd = afterScheme
        while authorityEnd < bytes.count, !Self.endsAuthority(bytes[authorityEnd]) { authorityEnd += 1 }
        guard let authority = Authority(bytes[afterScheme..<authorityEnd]) else { return false }

        let defaultPort = plainHTTP ? 80 : 443
        guard rules.contains(where: { $0.allows(authority, plainHTTP: plainHTTP, defaultPort: defaultPort) }) else {
            return false
        }
        guard authorityEnd < bytes.count else { return true }
        let rest = bytes[authorityEnd...]
        if rest.first == .slash { return Self.isSafeLocalReference(rest) }
        return Self.isSafeQueryAndFragment(rest)
    }

    private static func endsAuthority(_ byte: UInt8) -> Bool {
        byte == .slash || byte == .questionMark || byte == .hash
    }

    // MARK: Paths

    /// A reference starting with `/`: path, then optional `?query` and `#fragment`.
    private static func isSafeLocalReference(_ reference: ArraySlice<UInt8>) -> Bool {
        guard reference.first == .slash else { return false }
        var pathEnd = reference.startIndex
        while pathEnd < reference.endIndex, reference[pathEnd] != .questionMark, reference[pathEnd] != .hash {
            pathEnd += 1
        }
        guard isSafePath(reference[reference.startIndex..<pathEnd]) else { return false }
        return isSafeQueryAndFragment(reference[pathEnd...])
    }

    private static func isSafePath(_ raw: ArraySlice<UInt8>) -> Bool {
        guard let path = PercentDecoding.decodedRepeatedly(raw) else { return false }
        guard path.first == .slash else { return false }
        if path.count > 1, path[1] == .slash || path[1] == .backslash { return false }
        // After decoding: no whitespace, controls, backslashes or non-ASCII (overlong UTF-8
        // `%c0%af`, full-width dots and slashes) anywhere in the path.
        for byte in path where byte <= 0x20 || byte >= 0x7F || byte == .backslash { return false }
        // No dot segments: `/..//evil.com` normalises to `//evil.com`. No empty segment either
        // (`//` anywhere, as oauth2-proxy refuses): `/http://evil.com` is a path here, but a
        // later hop that merges or strips a leading segment turns it into a hostile URL.
        let segments = path.split(separator: .slash, omittingEmptySubsequences: false)
        for (i, segment) in segments.enumerated() {
            if segment.elementsEqual([.dot]) || segment.elementsEqual([.dot, .dot]) { return false }
            if segment.isEmpty && i > 0 && i < segments.count - 1 { return false }
        }
        return true
    }

    /// `?query#fragment` (either may be absent): encoded spaces and slashes are normal here,
    /// encoded control characters (header injection, `%0d%0a`) are not.
    private static func isSafeQueryAndFragment(_ raw: ArraySlice<UInt8>) -> Bool {
        guard raw.isEmpty || raw.first == .questionMark || raw.first == .hash else { return false }
        guard let decoded = PercentDecoding.decodedRepeatedly(raw) else { return false }
        for byte in decoded where byte < 0x20 || byte == 0x7F { return false }
        return true
    }

    private static func hasPrefix(_ bytes: [UInt8], _ prefix: StaticString) -> Bool {
        let prefixBytes = UnsafeBufferPointer(start: prefix.utf8Start, count: prefix.utf8CodeUnitCount)
        guard bytes.count >= prefixBytes.count else { return false }
        for (byte, expected) in zip(bytes, prefixBytes) where ASCII.lowercased(byte) != expected { return false }
        return true
    }
}

// MARK: - Hosts

/// `host[:port]` of an absolute target, already checked against the DNS name grammar.
private struct Authority {
    let host: [UInt8]   // lowercase
    let port: Int?

    /// Refuses userinfo (`@`), percent-escapes, IP-literal brackets, underscores and anything
    /// else outside `[A-Za-z0-9.-]` plus one `:port`.
    init?(_ raw: ArraySlice<UInt8>) {
        var hostEnd = raw.endIndex
        var port: Int?
        if let colon = raw.firstIndex(of: .colon) {
            guard let parsed = Self.port(raw[(colon + 1)...]) else { return nil }
            port = parsed
            hostEnd = colon
        }
        let host = raw[raw.startIndex..<hostEnd].map(ASCII.lowercased)
        guard DNSName.isValid(host[...]) else { return nil }
        self.host = host
        self.port = port
    }

    /// 1–65535, decimal, no sign, no leading zero.
    static func port(_ digits: ArraySlice<UInt8>) -> Int? {
        guard (1...5).contains(digits.count), digits.first != UInt8(ascii: "0") else { return nil }
        var value = 0
        for byte in digits {
            guard ASCII.isDigit(byte) else { return nil }
            value = value * 10 + Int(byte - UInt8(ascii: "0"))
        }
        return value <= 65535 ? value : nil
    }
}

/// One allowlist entry.
private struct HostRule: Sendable {
    enum Port: Sendable { case defaultOnly, exactly(Int), any }

    let host: [UInt8]            // lowercase, without the leading dot
    let includesSubdomains: Bool
    let port: Port
    let allowsPlainHTTP: Bool

    init?(entry: String) {
        var text = Array(entry.utf8).map(ASCII.lowercased)[...]
        var plainHTTP = false
        if text.starts(with: Array("http://".utf8)) {
            plainHTTP = true
            text = text.dropFirst(7)
        } else if text.starts(with: Array("https://".utf8)) {
            text = text.dropFirst(8)
        }
        if text.last == .slash { text = text.dropLast() }
        var subdomains = false
        if text.starts(with: Array("*.".utf8)) {
            subdomains = true
            text = text.dropFirst(2)
        } else if text.first == .dot {
            subdomains = true
            text = text.dropFirst()
        }
        var port = Port.defaultOnly
        if let colon = text.firstIndex(of: .colon) {
            let portText = text[(colon + 1)...]
            if portText.elementsEqual([UInt8(ascii: "*")]) {
                port = .any
            } else if let number = Authority.port(portText) {
                port = .exactly(number)
            } else {
                return nil
            }
            text = text[text.startIndex..<colon]
        }
        guard DNSName.isValid(text) else { return nil }
        host = Array(text)
        includesSubdomains = subdomains
        self.port = port
        allowsPlainHTTP = plainHTTP
    }

    func allows(_ authority: Authority, plainHTTP: Bool, defaultPort: Int) -> Bool {
        if plainHTTP, !allowsPlainHTTP { return false }
        switch port {
        case .any: break
        case .defaultOnly: guard authority.port == nil || authority.port == defaultPort else { return false }
        case .exactly(let number): guard authority.port == number else { return false }
        }
        if authority.host == host { return true }
        // A subdomain: `….<host>` with the dot, so `evilgood.com` never matches `.good.com`.
        guard includesSubdomains, authority.host.count > host.count + 1 else { return false }
        let dotIndex = authority.host.count - host.count - 1
        return authority.host[dotIndex] == .dot && authority.host[(dotIndex + 1)...].elementsEqual(host)
    }
}

/// RFC 1123 host names: dot-separated labels of `[a-z0-9-]`, 1–63 bytes, not starting or
/// ending with `-`; at most 253 bytes; no empty label (so no leading, doubled or trailing dot).
/// Punycode (`xn--…`) labels are valid names and only ever match an identical entry.
private enum DNSName {
    static func isValid(_ name: ArraySlice<UInt8>) -> Bool {
        guard !name.isEmpty, name.count <= 253 else { return false }
        for label in name.split(separator: .dot, omittingEmptySubsequences: false) {
            guard (1...63).contains(label.count), label.first != .hyphen, label.last != .hyphen else { return false }
            for byte in label where !(ASCII.isLowerAlphanumeric(byte) || byte == .hyphen) { return false }
        }
        return true
    }
}

// MARK: - Percent-decoding

private enum PercentDecoding {
    /// How many layers of encoding are peeled (`%25252f` → `%252f` → `%2f` → `/`).
    static let maximumRounds = 4

    /// Decodes until nothing changes. Nil when the first layer has a malformed escape (`%zz`,
    /// a trailing `%`) or when escapes remain after `maximumRounds` — both are refused rather
    /// than guessed at. In later layers a `%` that is not an escape is an ordinary character
    /// (`/100%25off` decodes to `/100%off`).
    static func decodedRepeatedly(_ raw: ArraySlice<UInt8>) -> [UInt8]? {
        var current = Array(raw)
        for round in 0..<maximumRounds {
            guard current.contains(.percent) else { return current }
            guard let next = decodeOnce(current, strict: round == 0) else { return nil }
            if next == current { return current }
            current = next
        }
        return decodeOnce(current, strict: false) == current ? current : nil
    }

    static func decodeOnce(_ bytes: [UInt8], strict: Bool) -> [UInt8]? {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var i = 0
        while i < bytes.count {
            if bytes[i] == .percent, i + 2 < bytes.count,
               let high = ASCII.hexValue(bytes[i + 1]), let low = ASCII.hexValue(bytes[i + 2]) {
                out.append(high << 4 | low)
                i += 3
                continue
            }
            if bytes[i] == .percent, strict { return nil }
            out.append(bytes[i])
            i += 1
        }
        return out
    }
}

private enum ASCII {
    static func lowercased(_ byte: UInt8) -> UInt8 {
        (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) ? byte | 0x20 : byte
    }

    static func isDigit(_ byte: UInt8) -> Bool { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) }

    static func isLowerAlphanumeric(_ byte: UInt8) -> Bool {
        isDigit(byte) || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte)
    }

    static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}

extension UInt8 {
    fileprivate static let slash = UInt8(ascii: "/")
    fileprivate static let backslash = UInt8(ascii: "\\")
    fileprivate static let questionMark = UInt8(ascii: "?")
    fileprivate static let hash = UInt8(ascii: "#")
    fileprivate static let colon = UInt8(ascii: ":")
    fileprivate static let dot = UInt8(ascii: ".")
    fileprivate static let hyphen = UInt8(ascii: "-")
    fileprivate static let percent = UInt8(ascii: "%")
}
