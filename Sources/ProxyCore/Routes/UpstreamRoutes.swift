/// `routes:` as the exchange asks them: which upstream group a request goes to. Pure: the host
/// and path come in as bytes, the group's index comes out (`UpstreamRoutesTests`).
struct UpstreamRoutes {
    let routes: [UpstreamRoute]
    /// Some route names hosts (else the host is not even looked at).
    private let byHost: Bool

    /// nil when there are no routes: every request goes to the default group, and nothing is
    /// asked per request.
    init?(_ routes: [UpstreamRoute]) {
        guard !routes.isEmpty else { return nil }
        self.routes = routes
        byHost = routes.contains { !$0.hosts.isEmpty }
    }

    /// The group for a request to `host` (the `Host` field or the target's authority, as sent;
    /// nil when there is none) at the canonical `path`; 0 when no route matches.
    func group(host: UnsafeRawBufferPointer?, path: UnsafeRawBufferPointer) -> Int {
        guard byHost else {
            for r in routes where r.coversPath(path) { return r.group }
            return 0
        }
        var name: [UInt8] = []
        if let host { name = Self.hostName(host) }
        return name.withUnsafeBytes { name in
            for r in routes where (r.hosts.isEmpty || host != nil && r.coversHost(name)) && r.coversPath(path) { return r.group }
            return 0
        }
    }

    /// `Example.COM:8443` → `example.com`, `[::1]:80` → `[::1]`, `example.com.` → `example.com`:
    /// the name a client meant, as `hosts` entries are written.
    static func hostName(_ value: UnsafeRawBufferPointer) -> [UInt8] {
        var end = value.count
        if value.first == UInt8(ascii: "[") {
            if let close = value.firstIndex(of: UInt8(ascii: "]")) { end = close + 1 }
        } else if let colon = value.firstIndex(of: UInt8(ascii: ":")) {
            end = colon
        }
        if end > 1 && value[end - 1] == UInt8(ascii: ".") { end -= 1 }
        return value[..<end].map(asciiLower)
    }
}
