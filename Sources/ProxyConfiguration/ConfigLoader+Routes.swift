import ProxyCore

/// `upstream_groups:` and `routes:` — requests sent to several groups of servers by host and
/// path — and the default group's `upstream_balance` and `upstream_retry_statuses`.
///
/// ```yaml
/// upstream_groups:
///   cable:                                   # a name routes use: lowercase letters, digits, - and _
///     upstreams: [{ url: unix:/run/anycable.sock }]   # or upstream: URL
///     balance: hash header X-Session         # round_robin | least_conn | hash client_address | hash header NAME
///     health: { max_fails: 3, check_path: /health }   # as upstream_health
///     retry_statuses: [502, 503]
///     timeouts: { upstream_connect: 2s, upstream: 1h }
///     x_accel_redirect: false                # its X-Accel-Redirect followed (default: only the default group's)
/// routes:
///   - { paths: [/cable], upstream_group: cable }
///   - { hosts: [api.example.com], upstream_group: api }
/// ```
extension ConfigLoader {
    func readBalancing(_ m: MappingReader, into c: inout AppConfig) {
        if let b = m.parsed("upstream_balance", Self.balanceForms, UpstreamBalance.parse) { c.proxy.upstreamBalance = b }
        if let list = statuses(m, "upstream_retry_statuses") { c.proxy.upstreamRetryStatuses = list }
        if let groups = m.mapping("upstream_groups", keysAre: "<name>") { readUpstreamGroups(groups, into: &c) }
        if let node = m.node("routes") { readRoutes(node, m, into: &c) }
        // The default group (`upstream`, `upstreams`, or `--upstream`) is required whatever the
        // file says: `Check.load` refuses a configuration without one once the flags applied.
    }

    static let balanceForms = "round_robin, least_conn, hash client_address or hash header NAME"

    private func readUpstreamGroups(_ m: MappingReader, into c: inout AppConfig) {
        for name in m.keys {
            guard let node = m.node(name) else {
                m.problems.add(m.child(name), m.line, "must be a mapping")
                continue
            }
            if !isToken(name) || name.utf8.count > 64 {
                m.problems.add(m.child(name), node.line, "group names are 1 to 64 lowercase letters, digits, - and _")
            }
            if name == UpstreamGroupSettings.defaultName {
                m.problems.add(m.child(name), node.line, "'default' is the top-level upstream's group: choose another name")
            }
            let g = MappingReader(node, path: m.child(name), pattern: m.childPattern(name), problems: m.problems)
            var servers: [UpstreamServer]? = nil
            if let u = g.parsed("upstream", "http://HOST:PORT, https://HOST:PORT or unix:/path", UpstreamTarget.parse) {
                servers = [UpstreamServer(target: u)]
            }
            if let list = g.node("upstreams") {
                if servers != nil {
                    g.problems.add(g.child("upstreams"), list.line, "give either upstream (one server) or upstreams (several), not both")
                }
                servers = readServers(list, g)
            } else if !g.has("upstream") {
                g.problems.add(g.path, node.line, "needs upstream (one server) or upstreams (several)")
            }
            var settings = UpstreamGroupSettings(name: name, servers: servers ?? [])
            if let h = g.mapping("health") { readUpstreamHealth(h, into: &settings.health) }
            if let b = g.parsed("balance", Self.balanceForms, UpstreamBalance.parse) { settings.balance = b }
            if let list = statuses(g, "retry_statuses") { settings.retryStatuses = list }
            if let b = g.bool("x_accel_redirect") { settings.followsAccelRedirect = b }
            if let t = g.mapping("timeouts") {
                let d = "a duration like 30s or 5m"
                settings.connectTimeout = t.parsed("upstream_connect", d, Units.duration)
                settings.responseTimeout = t.parsed("upstream", d, Units.duration)
                t.finish()
            }
            g.finish()
            if servers != nil { c.proxy.upstreamGroups.append(settings) }
        }
        if c.proxy.upstreamGroups.count > 64 { m.problems.add(m.path, m.line, "at most 64 groups") }
    }

    private func readRoutes(_ node: ConfigNode, _ m: MappingReader, into c: inout AppConfig) {
        guard case .sequence(let items, _) = node else {
            m.problems.add("routes", node.line, "must be a list of { hosts, paths, upstream_group }, not \(node.kindName)")
            return
        }
        let names = [UpstreamGroupSettings.defaultName] + c.proxy.upstreamGroups.map(\.name)
        for (i, item) in items.enumerated() {
            let path = "routes[\(i)]"
            let entry = MappingReader(item, path: path, pattern: "routes[]", problems: m.problems)
            var route = UpstreamRoute(group: 0)
            if let hosts = entry.strings("hosts") {
                for h in hosts where !UpstreamRoute.isHostPattern(h) {
                    entry.problems.add("\(path).hosts", entry.node("hosts")?.line, "'\(h)' is not a host name or *.name")
                }
                route.hosts = hosts.map { $0.lowercased() }
            }
            if let list = entry.pathPrefixes("paths") { route.paths = list }
            if route.hosts.isEmpty && route.paths.isEmpty {
                entry.problems.add(path, item.line, "needs hosts, paths or both: a route with neither takes every request")
            }
            if let name = entry.string("upstream_group", required: true) {
                if let g = names.firstIndex(of: name) {
                    route.group = g
                } else {
                    entry.problems.add("\(path).upstream_group", entry.node("upstream_group")?.line,
                                       "'\(name)' is no group: upstream_groups has \(names.dropFirst().joined(separator: ", ")), and default is the top-level upstream")
                }
            }
            entry.finish()
            c.proxy.routes.append(route)
        }
    }
}
