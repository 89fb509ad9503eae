/// Routes and balancing keys: the exchange's side. Which group a request goes to is decided
/// once, when it leaves for the upstream (after every phase, on the path that is forwarded);
/// a request that moves to another server after a failure stays in its group.
extension ClientExchange {
    /// The balancer of the request's group on this loop (without routes, the default group's:
    /// the request's state is not even looked at).
    @inline(__always) var balancer: UpstreamBalancer {
        _fastPath(!listener.hasRoutes) ? listener.balancer(loop, group: 0) : listener.balancer(loop, group: current!.group)
    }

    /// Sets the request's group from `routes:`: by its `Host` (or the target's authority) and
    /// the path it is forwarded with — `target`, when a phase rewrote it, else the canonical one.
    func chooseGroup(_ routes: UpstreamRoutes, target: String?) {
        let bytes = headBytes
        let hostRange = head.authority ?? head.hostIndex.map { head.headers[$0].value }
        let host = hostRange.map { UnsafeRawBufferPointer(rebasing: bytes[$0.start..<$0.end]) }
        if let target {
            let path = target.utf8.prefix { $0 != UInt8(ascii: "?") }
            current!.group = Array(path).withUnsafeBytes { routes.group(host: host, path: $0) }
        } else if !head.canonicalPath.isEmpty {
            current!.group = head.canonicalPath.withUnsafeBytes { routes.group(host: host, path: $0) }
        } else {
            let p = head.pathOnly
            current!.group = routes.group(host: host, path: UnsafeRawBufferPointer(rebasing: bytes[p.start..<p.end]))
        }
    }

    /// The request's key for `balance: hash …` (nil: none — no such header, no address — and
    /// the request gets round robin).
    func balanceKey(_ key: UpstreamHashKey) -> UInt64? {
        switch key {
        case .clientAddress:
            guard var client = rulesClientAddress(RequestView(self)) else { return nil }
            let v4 = client.isV4
            return withUnsafeBytes(of: &client.bytes) { HashRing.hash(v4 ? $0.prefix(4) : $0[...]) }
        case .header:
            // Several fields of the name hash as one, joined as `withRequestField` joins them.
            return withRequestField(lowercased: balancer.group.hashHeader) { value in
                guard let value, !value.isEmpty else { return nil }
                return HashRing.hash(value)
            }
        }
    }

    /// The key `balancer`'s group hashes this request by (nil: it does not hash).
    @inline(__always) func hashKey(_ balancer: UpstreamBalancer) -> UInt64? {
        guard case .hash(let key) = balancer.group.balance else { return nil }
        return balanceKey(key)
    }
}
