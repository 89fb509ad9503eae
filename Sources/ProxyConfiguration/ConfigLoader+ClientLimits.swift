import ProxyCore

/// `rate_limits:` and the per-client keys of `limits:`.
extension ConfigLoader {
    /// `limits: { max_connections_per_client, exempt_clients, dry_run }` (the mapping's other
    /// keys are the engine's own, read by the caller).
    func readClientLimits(_ m: MappingReader, into l: inout ClientLimitSettings) {
        if let n = m.parsed("max_connections_per_client", "a number of connections from 1 to 10000000 (0 = no cap)", {
            Int($0).flatMap { (0...10_000_000).contains($0) ? $0 : nil }
        }) {
            l.maxConnectionsPerClient = n
        }
        if let list = m.cidrs("exempt_clients") { l.exempt += list }
        if let b = m.bool("dry_run") { l.dryRun = b }
    }

    /// `rate_limits: [{ name, paths, rate, burst, dry_run }]`.
    func readRateLimits(_ node: ConfigNode, _ m: MappingReader, into l: inout ClientLimitSettings) {
        guard case .sequence(let items, _) = node else {
            m.problems.add("rate_limits", node.line, "must be a list of { name, paths, rate, burst }, not \(node.kindName)")
            return
        }
        var names: Set<String> = []
        for (i, item) in items.enumerated() {
            let path = "rate_limits[\(i)]"
            let entry = MappingReader(item, path: path, pattern: "rate_limits[]", problems: m.problems)
            let name = ruleName(entry, path, unique: &names)
            let rate = entry.parsed("rate", "a rate like 20/s, 600/m or 10000/h", RateLimit.parse)
            if entry.node("rate") == nil { entry.problems.add("\(path).rate", item.line, "is required (like 20/s)") }
            var rule = RateRule(name: name, rate: rate ?? RateLimit(count: 1, periodSeconds: 1))
            if let n = entry.int("burst", in: 1...1_000_000) { rule.burst = n }
            if let n = entry.int("clients", in: RateRule.clientRange) { rule.clients = n }
            if let list = entry.pathPrefixes("paths") { rule.paths = list }
            if let b = entry.bool("dry_run") { rule.dryRun = b }
            entry.finish()
            if rate != nil { l.rules.append(rule) }
        }
    }

    /// `client_access: [{ name, paths, allow, deny }]`: address lists are addresses, CIDR
    /// ranges, or `all`; a rule needs at least one of them.
    func readClientAccess(_ node: ConfigNode, _ m: MappingReader, into rules: inout [ClientAccessRule]) {
        guard case .sequence(let items, _) = node else {
            m.problems.add("client_access", node.line, "must be a list of { name, paths, allow, deny }, not \(node.kindName)")
            return
        }
        var names: Set<String> = []
        for (i, item) in items.enumerated() {
            let path = "client_access[\(i)]"
            let entry = MappingReader(item, path: path, pattern: "client_access[]", problems: m.problems)
            var rule = ClientAccessRule(name: ruleName(entry, path, unique: &names))
            if let list = entry.pathPrefixes("paths") { rule.paths = list }
            for key in ["allow", "deny"] {
                guard let list = entry.cidrs(key, allowingAll: true) else { continue }
                if entry.strings(key)?.isEmpty == true {
                    entry.problems.add("\(path).\(key)", entry.node(key)?.line, "is empty: list addresses, CIDR ranges or all")
                }
                if key == "allow" { rule.allow = list } else { rule.deny = list }
            }
            if entry.node("allow") == nil && entry.node("deny") == nil {
                entry.problems.add(path, item.line, "needs allow, deny or both: a rule with neither refuses nobody")
            }
            entry.finish()
            rules.append(rule)
        }
    }

    /// A rule's `name` (`path` when not given): unique among `names`, 1 to 64 printable ASCII
    /// characters without quotes or backslashes (a metric label and a log field).
    private func ruleName(_ entry: MappingReader, _ path: String, unique names: inout Set<String>) -> String {
        let name = entry.string("name") ?? path
        if !names.insert(name).inserted {
            entry.problems.add("\(path).name", entry.node("name")?.line, "'\(name)' names another rule too: each rule needs its own name")
        }
        if name.isEmpty || name.utf8.count > 64 || !name.unicodeScalars.allSatisfy({ $0.isASCII && $0.value >= 0x20 && $0 != "\"" && $0 != "\\" }) {
            entry.problems.add("\(path).name", entry.node("name")?.line, "must be 1 to 64 printable ASCII characters without quotes or backslashes")
        }
        return name
    }
}
