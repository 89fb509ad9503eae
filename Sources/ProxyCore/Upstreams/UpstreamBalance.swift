/// How a group's servers share its requests (`upstream_balance`, `upstream_groups.<name>.balance`).
///
/// Whichever it is, backups get requests only while no other server is available, a server out
/// of health is passed over, and a request moved after a failure never goes to a server it
/// tried (`UpstreamAttempt`).
public enum UpstreamBalance: Sendable, Equatable, CustomStringConvertible {
    /// Smooth weighted round robin (nginx's default).
    case roundRobin
    /// The server with the fewest requests in flight for its weight, across every loop (nginx's
    /// `least_conn`): long requests (downloads, long polls, websockets) do not pile up on one.
    case leastConnections
    /// A consistent hash of the key (nginx's `hash … consistent`, ketama): the same key goes to
    /// the same server while it is available, and a server going out or coming back moves only
    /// the keys it owns — websockets and server-side sessions stay where they started.
    case hash(UpstreamHashKey)

    /// `round_robin`, `least_conn`, `hash client_address` or `hash header X-Name`; nil otherwise.
    public static func parse(_ text: String) -> UpstreamBalance? {
        let words = text.split(separator: " ", omittingEmptySubsequences: true)
        switch words.first {
        case "round_robin" where words.count == 1: return .roundRobin
        case "least_conn" where words.count == 1: return .leastConnections
        case "hash" where words.count == 2 && words[1] == "client_address": return .hash(.clientAddress)
        case "hash" where words.count == 3 && words[1] == "header":
            let name = words[2]
            guard !name.isEmpty, name.utf8.count <= 64, name.utf8.allSatisfy(ByteMatching.isTokenChar) else { return nil }
            return .hash(.header(name.lowercased()))
        default: return nil
        }
    }

    public var description: String {
        switch self {
        case .roundRobin: "round_robin"
        case .leastConnections: "least_conn"
        case .hash(.clientAddress): "hash client_address"
        case .hash(.header(let name)): "hash header \(name)"
        }
    }
}

/// What a consistent hash is taken of.
public enum UpstreamHashKey: Sendable, Equatable {
    /// The client's address as the per-client limits see it (`trusted_proxies` honoured).
    case clientAddress
    /// A request header's value (lowercased name); a request without it gets round robin.
    case header(String)
}
