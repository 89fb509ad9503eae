import ProxyCore

/// A Redis Cluster redirection (`-MOVED slot host:port`, `-ASK slot host:port`): the node
/// asked does not serve `slot` (MOVED: any more; ASK: for this one command, while the slot is
/// being migrated).
struct RedisRedirect: Equatable {
    enum Kind: String { case moved, ask }

    var kind: Kind
    var slot: Int
    var address: SocketAddress

    /// nil when `message` is no redirection; a failure when it is one we cannot follow: a node
    /// announced by host name (a lookup would block the loop) or as `?` (its address unknown
    /// to the cluster). An empty host is the host of the node that answered (`answeredBy`),
    /// as the specification says.
    static func parse(_ message: String, answeredBy: SocketAddress) -> Result<RedisRedirect, StoreError>? {
        let kind: Kind
        if message.hasPrefix("MOVED ") { kind = .moved } else if message.hasPrefix("ASK ") { kind = .ask } else { return nil }
        let parts = message.split(separator: " ", omittingEmptySubsequences: true)
        guard parts.count == 3, let slot = Int(parts[1]), (0..<RedisHashSlot.count).contains(slot) else {
            return .failure(StoreError(.unavailable, "redis cluster: malformed redirection '\(message.prefix(80))'"))
        }
        // `host:port`; an IPv6 host is not bracketed, so the port follows the last colon.
        let endpoint = parts[2]
        guard let colon = endpoint.lastIndex(of: ":"), let port = Int(endpoint[endpoint.index(after: colon)...]),
              let address = RedisSlotMap.nodeAddress(host: endpoint[..<colon], port: port, answeredBy: answeredBy) else {
            return .failure(StoreError(.unavailable, "redis cluster: \(kind == .moved ? "MOVED" : "ASK") to '\(endpoint.prefix(80))', "
                                       + "not an IP address and port"))
        }
        return .success(RedisRedirect(kind: kind, slot: slot, address: address))
    }
}
