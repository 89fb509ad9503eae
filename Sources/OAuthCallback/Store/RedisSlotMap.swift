import ProxyCore

/// Which primary serves each of the 16,384 hash slots, as one node answered `CLUSTER SLOTS`
/// (a client-side cache of the cluster's configuration: MOVED corrects one slot of it, a
/// refresh replaces it).
///
/// `CLUSTER SLOTS` rather than `CLUSTER SHARDS` (both in Redis 7.0): its reply names each
/// range's primary first, by position, in a compact array every Redis Cluster since 3.0 (and
/// Valkey) answers; `CLUSTER SHARDS` exists only from 7.0 and its extra fields (replication
/// offset, health) are not needed — a primary that failed is noticed by its connection failing,
/// and the refresh that follows finds its replica promoted.
struct RedisSlotMap: Equatable {
    /// The primaries, each once; `owner` indexes into it.
    private(set) var primaries: [SocketAddress] = []
    /// Every replica announced (refreshes may ask them too: a replica knows the slot map).
    private(set) var replicas: [SocketAddress] = []
    /// Per slot, an index into `primaries`, or `unowned`.
    private var owner: [UInt16]
    /// Why some slots have no primary here (a node announced by name, or none at all), for the log.
    private(set) var problems: [String] = []

    private static let unowned = UInt16.max

    init() { owner = Array(repeating: Self.unowned, count: RedisHashSlot.count) }

    /// The primary serving `slot`, if any.
    func primary(for slot: Int) -> SocketAddress? {
        let i = owner[slot]
        return i == Self.unowned ? nil : primaries[Int(i)]
    }

    /// Slots that have a primary (16,384 when the cluster is whole).
    var covered: Int { owner.reduce(0) { $0 + ($1 == Self.unowned ? 0 : 1) } }

    /// Every node known, primaries first (where a refresh asks).
    var nodes: [SocketAddress] { primaries + replicas.filter { !primaries.contains($0) } }

    /// `-MOVED slot address`: that slot is served there from now on.
    mutating func moved(slot: Int, to address: SocketAddress) {
        owner[slot] = index(of: address)
    }

    private mutating func index(of address: SocketAddress) -> UInt16 {
        if let i = primaries.firstIndex(of: address) { return UInt16(i) }
        primaries.append(address)
        return UInt16(primaries.count - 1)
    }

    /// A node's address as the cluster announces it: an IP address (an empty host means the
    /// node that answered, per the specification). nil for a host name (never looked up on a
    /// loop) or `?` (the cluster does not know the node's address).
    static func nodeAddress<S: StringProtocol>(host: S, port: Int, answeredBy: SocketAddress) -> SocketAddress? {
        guard (1...65535).contains(port) else { return nil }
        let port = UInt16(port)
        if host.isEmpty {
            switch answeredBy {
            case .ipv4(let h, _): return .ipv4(host: h, port: port)
            case .ipv6(let h, _): return .ipv6(host: h, port: port)
            case .unix: return nil
            }
        }
        let text = String(host)
        guard PeerAddress(text: text) != nil else { return nil }
        return SocketAddress.parse(text.contains(":") ? "[\(text)]:\(port)" : "\(text):\(port)")
    }

    /// Reads `CLUSTER SLOTS`: an array of `[start, end, primary, replica…]`, each node
    /// `[host, port, id, …]`. A range whose primary cannot be used stays unowned (and is
    /// named in `problems`); a reply that owns no slot at all is a failure (a node that is not
    /// or no longer part of a cluster: its map is useless).
    static func parse(_ reply: RedisReply, answeredBy: SocketAddress) -> Result<RedisSlotMap, StoreError> {
        if case .error(let message) = reply {
            return .failure(StoreError(.unavailable, "refused CLUSTER SLOTS: \(message.prefix(120))"))
        }
        guard case .array(let ranges) = reply else {
            return .failure(StoreError(.unavailable, "answered CLUSTER SLOTS with something other than an array"))
        }
        var map = RedisSlotMap()
        for range in ranges {
            guard case .array(let items) = range, items.count >= 3,
                  case .integer(let start) = items[0], case .integer(let end) = items[1],
                  start >= 0, start <= end, end < RedisHashSlot.count else {
                return .failure(StoreError(.unavailable, "answered CLUSTER SLOTS with a malformed slot range"))
            }
            let nodes = items[2...].map { node(of: $0, answeredBy: answeredBy) }
            for case .success(let replica) in nodes.dropFirst() where !map.replicas.contains(replica) {
                map.replicas.append(replica)
            }
            switch nodes[0] {
            case .success(let primary):
                let i = map.index(of: primary)
                for slot in Int(start)...Int(end) { map.owner[slot] = i }
            case .failure(let why):
                map.problems.append("slots \(start)-\(end): \(why)")
            }
        }
        guard map.covered > 0 else {
            let why = map.problems.isEmpty ? "" : " (" + map.problems.joined(separator: "; ") + ")"
            return .failure(StoreError(.unavailable, "knows no primary for any slot\(why)"))
        }
        return .success(map)
    }

    private struct Unusable: Error, CustomStringConvertible { let description: String }

    private static func node(of reply: RedisReply, answeredBy: SocketAddress) -> Result<SocketAddress, Unusable> {
        guard case .array(let fields) = reply, fields.count >= 2, case .integer(let port) = fields[1] else {
            return .failure(Unusable(description: "a malformed node entry"))
        }
        let host: String
        switch fields[0] {
        case .string(let bytes): host = String(decoding: bytes, as: UTF8.self)
        case .null: host = ""
        default: return .failure(Unusable(description: "a malformed node entry"))
        }
        guard let address = nodeAddress(host: host, port: Int(port), answeredBy: answeredBy) else {
            return .failure(Unusable(description: "node announced as '\(host.prefix(80)):\(port)', not an IP address and port"))
        }
        return .success(address)
    }
}
