import ProxyCore

/// The kinds of list many sections share, read one way: each bad entry reported under the
/// key, the good ones kept.
extension MappingReader {
    /// Canonical path prefixes (they are compared with the canonical request path, so
    /// `/%61dmin` or `/x/../admin` could never match as written).
    func pathPrefixes(_ key: String) -> [PathPrefix]? {
        strings(key).map { $0.compactMap { pathPrefix($0, key) } }
    }

    /// One canonical path prefix.
    func pathPrefix(_ key: String, required: Bool = false) -> PathPrefix? {
        string(key, required: required).flatMap { pathPrefix($0, key) }
    }

    private func pathPrefix(_ text: String, _ key: String) -> PathPrefix? {
        switch PathPrefix.parse(text) {
        case .success(let p): return p
        case .failure(let r):
            problems.add(child(key), node(key)?.line, "'\(text)' \(r.text)")
            return nil
        }
    }

    /// Addresses and CIDR ranges; with `allowingAll`, `all` too (every IPv4 and IPv6 address).
    func cidrs(_ key: String, allowingAll: Bool = false) -> [CIDR]? {
        guard let list = strings(key) else { return nil }
        var out: [CIDR] = []
        for text in list {
            if allowingAll && text == "all" {
                out += [CIDR.parse("0.0.0.0/0")!, CIDR.parse("::/0")!]
            } else if let r = CIDR.parse(text) {
                out.append(r)
            } else {
                problems.add(child(key), node(key)?.line,
                             "'\(text)' is not an address\(allowingAll ? ", a CIDR range or all" : " or CIDR range")")
            }
        }
        return out
    }
}
