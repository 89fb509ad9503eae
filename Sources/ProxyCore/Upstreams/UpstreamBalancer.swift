/// One loop's view of an `UpstreamGroup`: an idle-connection pool per server, the timeouts of
/// its connections, and the choice of server for each request among the servers that are
/// available, the backups only when no other is (`UpstreamBalance`):
/// - round robin: smooth weighted (nginx's: over any run of requests each server's share is its
///   weight's, interleaved rather than in bursts);
/// - least connections: the fewest requests in flight for the weight, ties by round robin;
/// - hash: the key's server on the group's ring, round robin for a request without a key.
/// Touched by its loop only.
final class UpstreamBalancer {
    let group: UpstreamGroup
    let pools: [UpstreamPool]
    /// The pool when there is one server and no health checks: always the choice, so a request
    /// skips the choosing (and its array and atomics) altogether.
    let only: UpstreamPool?
    /// The listener's timeouts with the group's upstream ones in their place.
    let timeouts: Timeouts
    /// Smooth weighted round robin's running scores, per server.
    private var scores: [Int]
    /// `least_conn`'s snapshot of the in-flight counts for one choice (-1: not eligible).
    private var loads: [Int]

    init(group: UpstreamGroup, capacity: Int, tls: UpstreamTLSClient?, timeouts: Timeouts = Timeouts()) {
        self.group = group
        let counts = group.balance == .leastConnections
        pools = group.servers.indices.map { i in
            let target = group.servers[i].server.target
            return UpstreamPool(target: target, resolver: group.resolvers[i], capacity: capacity,
                                tls: target.tls ? (group.tls.isEmpty ? tls : group.tls[i]) : nil,
                                inFlight: counts ? group.servers[i] : nil)
        }
        var t = timeouts
        if let c = group.connectTimeout { t.upstreamConnect = c }
        if let r = group.responseTimeout { t.upstreamResponse = r }
        self.timeouts = t
        scores = Array(repeating: 0, count: group.servers.count)
        loads = Array(repeating: -1, count: group.servers.count)
        only = pools.count == 1 && group.health.checkPath == nil ? pools[0] : nil
    }

    /// The server for the next attempt, not one of `tried` (a bit per server); nil when no
    /// server is left that may get requests. `key`: the request's hash key (`balance: hash`).
    func pick(now: UInt64, excluding tried: UInt64, key: UInt64? = nil) -> Int? {
        let servers = group.servers
        if servers.count == 1 {
            return tried & 1 == 0 && servers[0].available(now) ? 0 : nil
        }
        if let key, let ring = group.ring,
           let s = ring.server(for: key, where: { tried & (1 << UInt64($0)) == 0 && servers[$0].available(now) }) {
            return s
        }
        let fewest = group.balance == .leastConnections
        for backups in [false, true] {
            // Least connections: only the servers with the fewest in flight for their weight take
            // part in the round. The counts are read once (other loops change them meanwhile):
            // the choice is made on one snapshot, so some eligible server always remains.
            var least = -1
            if fewest {
                for i in servers.indices {
                    loads[i] = eligible(i, backups, tried, now) ? servers[i].inFlight.load(ordering: .relaxed) : -1
                    if loads[i] >= 0 && (least < 0 || loads[i] * servers[least].server.weight < loads[least] * servers[i].server.weight) {
                        least = i
                    }
                }
            }
            var best = -1
            var total = 0
            for i in servers.indices {
                if fewest {
                    // Same load for the weight as the least loaded (in-flight × the other's weight).
                    guard loads[i] >= 0, loads[i] * servers[least].server.weight == loads[least] * servers[i].server.weight else { continue }
                } else {
                    guard eligible(i, backups, tried, now) else { continue }
                }
                let w = servers[i].server.weight
                scores[i] += w
                total += w
                if best < 0 || scores[i] > scores[best] { best = i }
            }
            if best >= 0 {
                scores[best] -= total
                return best
            }
        }
        return nil
    }

    @inline(__always) private func eligible(_ i: Int, _ backups: Bool, _ tried: UInt64, _ now: UInt64) -> Bool {
        let s = group.servers[i]
        return s.server.backup == backups && tried & (1 << UInt64(i)) == 0 && s.available(now)
    }

    func closeAll() {
        for p in pools { p.closeAll() }
    }
}
