import ProxyCore

/// `upstreams:` (several servers) and `upstream_health:`.
extension ConfigLoader {
    /// `upstreams: [{ url, weight, backup }]`; the first server is also `upstream` (the `Host`
    /// an HTTP/1.0 request without one gets, the name in the `ready` line).
    func readUpstreams(_ node: ConfigNode, _ m: MappingReader, into c: inout AppConfig) {
        if m.has("upstream") {
            m.problems.add(m.child("upstreams"), node.line, "give either upstream (one server) or upstreams (several), not both")
        }
        guard let servers = readServers(node, m) else { return }
        c.proxy.upstreamServers = servers
        c.upstream = servers.first?.target
    }

    /// The servers of an `upstreams:` list under `m`; nil (and the problems said) when any is wrong.
    func readServers(_ node: ConfigNode, _ m: MappingReader) -> [UpstreamServer]? {
        let key = m.child("upstreams")
        guard case .sequence(let items, _) = node, !items.isEmpty else {
            m.problems.add(key, node.line, "must be a list of { url, weight, backup } with at least one server")
            return nil
        }
        if items.count > 64 { m.problems.add(key, node.line, "at most 64 servers") }
        var servers: [UpstreamServer] = []
        for (i, item) in items.enumerated() {
            let path = "\(key)[\(i)]"
            let entry = MappingReader(item, path: path, pattern: m.childPattern("upstreams") + "[]", problems: m.problems)
            let target = entry.parsed("url", "http://HOST:PORT, https://HOST:PORT or unix:/path", UpstreamTarget.parse)
            if entry.node("url") == nil { entry.problems.add("\(path).url", item.line, "is required (like http://10.0.0.5:3000)") }
            var server = UpstreamServer(target: target ?? UpstreamTarget(address: .ipv4(host: "127.0.0.1", port: 1)))
            if let w = entry.int("weight", in: 1...100) { server.weight = w }
            if let b = entry.bool("backup") { server.backup = b }
            entry.finish()
            guard let target else { continue }
            if servers.contains(where: { $0.target == target }) {
                // One server's pool, health and metric series; twice would also give it two
                // places on a hash ring of which one never wins.
                entry.problems.add("\(path).url", entry.node("url")?.line, "'\(target)' is listed twice: give it a weight instead")
                continue
            }
            servers.append(server)
        }
        if !servers.isEmpty && servers.allSatisfy(\.backup) {
            m.problems.add(key, node.line, "every server is a backup: at least one must not be")
        }
        return servers.count == items.count && items.count <= 64 ? servers : nil
    }

    /// A list of statuses from 400 to 599 (`fail_statuses`, `retry_statuses`).
    func statuses(_ m: MappingReader, _ key: String) -> [Int]? {
        guard let list = m.strings(key) else { return nil }
        var out: [Int] = []
        for text in list {
            guard let n = Int(text), (400...599).contains(n) else {
                m.problems.add(m.child(key), m.node(key)?.line, "'\(text)' is not a status from 400 to 599")
                continue
            }
            out.append(n)
        }
        return out
    }

    /// `upstream_health: { max_fails, fail_timeout, fail_statuses, check_path, check_interval,
    /// check_timeout, check_status }`.
    func readUpstreamHealth(_ m: MappingReader, into h: inout UpstreamHealthSettings) {
        if let n = m.int("max_fails", in: 1...1_000) { h.maxFails = n }
        let d = "a duration like 10s or 1m"
        if let v = m.parsed("fail_timeout", d, Units.duration) { h.failTimeout = v }
        if let list = statuses(m, "fail_statuses") { h.failStatuses = list }
        if let p = m.string("check_path") {
            if case .failure(let r) = PathPrefix.parse(p) {
                m.problems.add(m.child("check_path"), m.node("check_path")?.line, "'\(p)' \(r.text)")
            } else {
                h.checkPath = p
            }
        }
        if let v = m.parsed("check_interval", "a duration from 1s to 1h", { Units.duration($0).flatMap { (1_000_000_000...3_600_000_000_000).contains($0) ? $0 : nil } }) {
            h.checkInterval = v
        }
        if let v = m.parsed("check_timeout", "a duration from 100ms to 1m", { Units.duration($0).flatMap { (100_000_000...60_000_000_000).contains($0) ? $0 : nil } }) {
            h.checkTimeout = v
        }
        if let r = m.parsed("check_status", "a status or a range like 200-399", Self.statusRange) { h.checkStatuses = r }
        m.finish()
    }

    /// `200` or `200-399`.
    static func statusRange(_ text: String) -> ClosedRange<Int>? {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard (1...2).contains(parts.count), let low = Int(parts[0]), let high = Int(parts.last!),
              (100...599).contains(low), (low...599).contains(high) else { return nil }
        return low...high
    }
}
