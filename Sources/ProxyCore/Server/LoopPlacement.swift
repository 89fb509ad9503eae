import Synchronization

/// Which loop a newly accepted client connection lives on.
///
/// Every loop has its own SO_REUSEPORT socket per listener, and the kernel picks the socket
/// by a hash of the connection's addresses: over thousands of connections that is even, over
/// ten it is a coin flip per connection, and a connection never changes loops. With 10
/// keep-alive clients on 2 loops a split of 7:3 or worse happens in a third of runs; the loop with 7
/// queues 2.3 times the other's work while the other idles, and the 99th percentile doubles
/// (measured: bench/results/NOTES.md, "Issue 25: connections by load"). HAProxy avoids this by
/// handing each accepted connection to its least-loaded thread; nginx leaves it to which
/// worker wakes first.
///
/// Here the loop that accepted a connection keeps it unless it already holds more than the
/// least loaded loop by more than `slack`; then the descriptor is queued to that loop
/// (`EventLoop.execute`), which starts it as if it had accepted it. A move costs the target a
/// wake-up, so small differences — which the hash evens out by itself at high connection
/// counts — are left alone: the slack grows with the load (an eighth), and below eight
/// connections a loop any more loaded than another gives the connection away.
///
/// Counts are `EventLoop.clientConnections`: connections a loop holds, plus those queued to it
/// and not yet started (so a burst of accepts does not send every one to the same loop before
/// it has counted any).
enum LoopPlacement {
    /// Tolerated excess of the accepting loop over the least loaded one.
    @inline(__always)
    static func slack(_ mine: Int) -> Int { mine / 8 }

    /// The index of the loop to move a connection to, or nil to keep it on `own`.
    /// `loads[i]`: the connections loop `i` holds now.
    static func target(own: Int, loads: some Collection<Int>) -> Int? {
        var mine = 0
        var least = Int.max
        var leastIndex = -1
        for (i, load) in loads.enumerated() {
            if i == own {
                mine = load
            } else if load < least {
                least = load
                leastIndex = i
            }
        }
        guard leastIndex >= 0, mine > least + slack(mine) else { return nil }
        return leastIndex
    }
}

/// All loops of a server, as the acceptors see them to place connections.
final class LoopSet: Sendable {
    let loops: [EventLoop]
    /// Connections moved to another loop than the one that accepted them.
    let moved: Counter
    /// Set when the server stops: a loop with nothing left to finish stops at once, and a
    /// connection queued to it then would never be served (the internal listener, which drains
    /// last, still accepts: a /readyz after SIGTERM must get its 503). The accepting loop is
    /// running by definition, so it keeps what it accepts.
    let stopping = Atomic<Bool>(false)

    init(_ loops: [EventLoop], moved: Counter) {
        self.loops = loops
        self.moved = moved
    }

    /// Where a connection accepted on `loop` should go: nil to keep it (one loop, the server
    /// stopping, or no other loop sufficiently less loaded).
    @inline(__always)
    func target(from loop: EventLoop) -> EventLoop? {
        guard loops.count > 1, !stopping.load(ordering: .relaxed) else { return nil }
        return LoopPlacement.target(own: loop.index, loads: loops.lazy.map { $0.clientConnections.load(ordering: .relaxed) })
            .map { loops[$0] }
    }
}
