/// A stream of a multiplexed connection (HTTP/2's, HTTP/3's) as the client-connection budget
/// counts it (`StreamAdmission`).
protocol BudgetedStream: AnyObject {
    /// When it began to wait for a unit (0: not waiting).
    var waitingSince: UInt64 { get set }
    /// It runs on its connection's own unit.
    var holdsConnectionUnit: Bool { get set }
    /// It runs on a unit of its own, given back when it ends.
    var budgetUnit: ConnectionBudget? { get set }
}

/// Which of one connection's streams run on the client-connection budget and which wait: the
/// rule both `HTTP2Connection` and `HTTP3Connection` follow (`StreamAdmitting`, which says
/// why streams wait rather than being refused). The connection's own unit runs one stream; every
/// further stream takes a unit of its own while it runs; streams that find none wait, oldest
/// first. A state machine without the loop: the connection brings the clock, the timer that
/// looks again and what a started or long-waiting stream does next.
struct StreamAdmission<Stream: BudgetedStream> {
    /// Streams waiting for a unit, oldest first.
    private(set) var waiting: [Stream] = []
    private var connectionUnitInUse = false

    /// `stream` opened at `now`: it waits behind any older waiter, then whatever can start does
    /// (`started` for each). Whether `stream` itself still waits.
    mutating func admit(_ stream: Stream, now: UInt64, budget: ConnectionBudget, started: (Stream) -> Void) -> Bool {
        stream.waitingSince = max(now, 1)
        waiting.append(stream)
        startWaiting(budget: budget, started: started)
        return stream.waitingSince != 0
    }

    /// Starts waiting streams, oldest first, while units are free.
    mutating func startWaiting(budget: ConnectionBudget, started: (Stream) -> Void) {
        while let stream = waiting.first {
            if !connectionUnitInUse {
                connectionUnitInUse = true
                stream.holdsConnectionUnit = true
            } else if budget.hasRoom {
                budget.opened()
                stream.budgetUnit = budget
            } else {
                break
            }
            waiting.removeFirst()
            stream.waitingSince = 0
            started(stream)
        }
    }

    /// `stream` ended (normally, reset, or with its connection): it stops waiting, or its unit
    /// goes back. The caller then starts the next waiters (`startWaiting`).
    mutating func ended(_ stream: Stream) {
        if stream.waitingSince != 0 {
            stream.waitingSince = 0
            waiting.removeAll { $0 === stream }
        }
        if stream.holdsConnectionUnit {
            stream.holdsConnectionUnit = false
            connectionUnitInUse = false
        } else if let unit = stream.budgetUnit {
            stream.budgetUnit = nil
            unit.closed()
        }
    }

    /// Streams that have waited `limit` or longer leave the queue (`each`: to be refused).
    mutating func takeWaiters(waitingAtLeast limit: UInt64, now: UInt64, _ each: (Stream) -> Void) {
        while let stream = waiting.first, now - stream.waitingSince >= limit {
            waiting.removeFirst()
            stream.waitingSince = 0
            each(stream)
        }
    }

    /// The connection is ending: nothing waits any more, and nothing is started on the way.
    mutating func abandonWaiters() {
        for stream in waiting { stream.waitingSince = 0 }
        waiting.removeAll()
    }
}
