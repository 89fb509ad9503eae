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
        if let list = m.strings("exempt_clients") {
            for text in list {
                if let r = CIDR.parse(text) { l.exempt.append(r) } else {
                    m.problems.add(m.child("exempt_clients"), m.node("exempt_clients")?.line, "'\(text)' is not an address or CIDR range")
                }
            }
        }
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
            let name = entry.string("name") ?? path
            if !names.insert(name).inserted {
                entry.problems.add("\(path).name", entry.node("name")?.line, "'\(name)' names another rule too: each rule needs its own name")
            }
            if name.isEmpty || name.utf8.count > 64 || !name.unicodeScalars.allSatisfy({ $0.isASCII && $0.value >= 0x20 && $0 != "\"" && $0 != "\\" }) {
                entry.problems.add("\(path).name", entry.node("name")?.line, "must be 1 to 64 printable ASCII characters without quotes or backslashes")
            }
            let rate = entry.parsed("rate", "a rate like 20/s, 600/m or 10000/h", RateLimit.parse)
            if entry.node("rate") == nil { entry.problems.add("\(path).rate", item.line, "is required (like 20/s)") }
            var rule = RateRule(name: name, rate: rate ?? RateLimit(count: 1, periodSeconds: 1))
            if let n = entry.int("burst", in: 1...1_000_000) { rule.burst = n }
            if let n = entry.int("clients", in: RateRule.clientRange) { rule.clients = n }
            if let list = entry.strings("paths") {
                for text in list {
                    switch PathPrefix.parse(text) {
                    case .success(let p): rule.paths.append(p)
                    case .failure(let r): entry.problems.add("\(path).paths", entry.node("paths")?.line, "'\(text)' \(r.text)")
                    }
                }
            }
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
            let name = entry.string("name") ?? path
            if !names.insert(name).inserted {
                entry.problems.add("\(path).name", entry.node("name")?.line, "'\(name)' names another rule too: each rule needs its own name")
            }
            if name.isEmpty || name.utf8.count > 64 || !name.unicodeScalars.allSatisfy({ $0.isASCII && $0.value >= 0x20 && $0 != "\"" && $0 != "\\" }) {
                entry.problems.add("\(path).name", entry.node("name")?.line, "must be 1 to 64 printable ASCII characters without quotes or backslashes")
            }
            var rule = ClientAccessRule(name: name)
            if let list = entry.strings("paths") {
                for text in list {
                    switch PathPrefix.parse(text) {
                    case .success(let p): rule.paths.append(p)
                    case .failure(let r): entry.problems.add("\(path).paths", entry.node("paths")?.line, "'\(text)' \(r.text)")
                    }
                }
            }
            rule.allow = addresses(entry, "allow", path)
            rule.deny = addresses(entry, "deny", path)
            if entry.node("allow") == nil && entry.node("deny") == nil {
                entry.problems.add(path, item.line, "needs allow, deny or both: a rule with neither refuses nobody")
            }
            entry.finish()
            rules.append(rule)
        }
    }

    /// An address list of `client_access`: addresses, CIDR ranges, `all` (every IPv4 and IPv6
    /// address).
    private func addresses(_ entry: MappingReader, _ key: String, _ path: String) -> [CIDR] {
        guard let list = entry.strings(key) else { return [] }
        if list.isEmpty { entry.problems.add("\(path).\(key)", entry.node(key)?.line, "is empty: list addresses, CIDR ranges or all") }
        var out: [CIDR] = []
        for text in list {
            if text == "all" {
                out += [CIDR.parse("0.0.0.0/0")!, CIDR.parse("::/0")!]
            } else if let r = CIDR.parse(text) {
                out.append(r)
            } else {
                entry.problems.add("\(path).\(key)", entry.node(key)?.line, "'\(text)' is not an address, a CIDR range or all")
            }
        }
        return out
    }
}
