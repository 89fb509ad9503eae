/// One loop's view of an `UpstreamGroup`: an idle-connection pool per server, and the choice of
/// server for each request — smooth weighted round robin (nginx's: over any run of requests
/// each server's share is its weight's, interleaved rather than in bursts) among the servers
/// that are available, the backups only when no other is. Touched by its loop only.
final class UpstreamBalancer {
    let group: UpstreamGroup
    let pools: [UpstreamPool]
    /// The pool when there is one server and no health checks: always the choice, so a request
    /// skips the choosing (and its array and atomics) altogether.
    let only: UpstreamPool?
    /// Smooth weighted round robin's running scores, per server.
    private var scores: [Int]

    init(group: UpstreamGroup, capacity: Int, tls: UpstreamTLSClient?) {
        self.group = group
        pools = group.servers.indices.map { i in
            let target = group.servers[i].server.target
            return UpstreamPool(target: target, resolver: group.resolvers[i], capacity: capacity,
                                tls: target.tls ? (group.tls.isEmpty ? tls : group.tls[i]) : nil)
        }
        scores = Array(repeating: 0, count: group.servers.count)
        only = pools.count == 1 && group.health.checkPath == nil ? pools[0] : nil
    }

    /// The server for the next attempt, not one of `tried` (a bit per server); nil when no
    /// server is left that may get requests.
    func pick(now: UInt64, excluding tried: UInt64) -> Int? {
        let servers = group.servers
        if servers.count == 1 {
            return tried & 1 == 0 && servers[0].available(now) ? 0 : nil
        }
        for backups in [false, true] {
            var best = -1
            var total = 0
            for i in servers.indices where servers[i].server.backup == backups && tried & (1 << UInt64(i)) == 0 && servers[i].available(now) {
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

    func closeAll() {
        for p in pools { p.closeAll() }
    }
}
