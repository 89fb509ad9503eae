/// One entry of `routes:` — the requests that go to an upstream group other than the default
/// one: those for any of `hosts` (every host when none) whose path is under any of `paths`
/// (every path when none). The first route that matches wins (nginx picks its `server` by
/// name, then its `location`; here both are one ordered list, read top to bottom).
///
/// A route decides where a request goes, after every phase has run: the OAuth layer, the
/// access rules and the limits see each request the same way whatever its route.
public struct UpstreamRoute: Sendable, Equatable {
    /// Lowercased names; `*.example.com` is any name under example.com (not example.com itself).
    public var hosts: [String] = []
    /// Matched against the canonical path — the one forwarded, which is what the group's app
    /// sees — segment by segment (`/cable` covers `/cable` and `/cable/x`, not `/cables`).
    public var paths: [PathPrefix] = []
    /// The index of its group in `ProxyConfig.groupSettings` (0 is the default group).
    public var group: Int

    public init(hosts: [String] = [], paths: [PathPrefix] = [], group: Int) {
        self.hosts = hosts
        self.paths = paths
        self.group = group
    }

    /// Whether `host` (lowercased, without port or trailing dot) is one of `hosts`.
    func coversHost(_ host: UnsafeRawBufferPointer) -> Bool {
        if hosts.isEmpty { return true }
        for h in hosts {
            if h.hasPrefix("*.") {
                let suffix = h.utf8.dropFirst(1)  // ".example.com"
                if host.count > suffix.count && host.suffix(suffix.count).elementsEqual(suffix) { return true }
            } else if host.elementsEqual(h.utf8) {
                return true
            }
        }
        return false
    }

    /// Whether `path` (canonical) is under one of `paths`.
    func coversPath(_ path: UnsafeRawBufferPointer) -> Bool {
        paths.isEmpty || paths.contains { $0.matches(path) }
    }

    /// What a `hosts` entry must look like: a DNS name or `*.` and one (lowercase is made here).
    public static func isHostPattern(_ text: String) -> Bool {
        let name = text.hasPrefix("*.") ? String(text.dropFirst(2)) : text
        return HostSyntax.isDNSName(name.utf8, maxLength: 253)
    }
}
