import Testing
@testable import ProxyCore

/// Which streams of one HTTP/2 or HTTP/3 connection run on the client-connection budget and
/// which wait (`StreamAdmission`).
@Suite struct StreamAdmissionTests {
    final class Stream: BudgetedStream {
        let name: Int
        var waitingSince: UInt64 = 0
        var holdsConnectionUnit = false
        var budgetUnit: ConnectionBudget? = nil
        init(_ name: Int) { self.name = name }
    }

    @Test func theConnectionsOwnUnitRunsOneStreamAndFurtherOnesTakeUnitsOfTheirOwn() {
        let budget = ConnectionBudget(limit: 2)
        var a = StreamAdmission<Stream>()
        var started: [Int] = []
        let s = (0..<4).map(Stream.init)
        #expect(!a.admit(s[0], now: 10, budget: budget) { started.append($0.name) })
        #expect(s[0].holdsConnectionUnit && s[0].budgetUnit == nil && budget.current == 0)
        #expect(!a.admit(s[1], now: 10, budget: budget) { started.append($0.name) })
        #expect(!a.admit(s[2], now: 10, budget: budget) { started.append($0.name) })
        #expect(budget.current == 2)
        // No unit left: the fourth waits.
        #expect(a.admit(s[3], now: 10, budget: budget) { started.append($0.name) })
        #expect(started == [0, 1, 2] && a.waiting.map(\.name) == [3] && s[3].waitingSince == 10)
        // One ends: its unit goes to the waiter.
        a.ended(s[1])
        #expect(budget.current == 1)
        a.startWaiting(budget: budget) { started.append($0.name) }
        #expect(started == [0, 1, 2, 3] && a.waiting.isEmpty && s[3].waitingSince == 0 && budget.current == 2)
        // The connection's own unit comes back with its stream.
        a.ended(s[0])
        let e = Stream(4)
        #expect(!a.admit(e, now: 20, budget: budget) { started.append($0.name) })
        #expect(e.holdsConnectionUnit)
        for x in [s[2], s[3], e] { a.ended(x) }
        #expect(budget.current == 0)
    }

    @Test func waitersStartOldestFirstAndNoneJumpsTheQueue() {
        let budget = ConnectionBudget(limit: 1)
        budget.opened()  // another connection holds the only unit
        var a = StreamAdmission<Stream>()
        var started: [Int] = []
        let s = (0..<4).map(Stream.init)
        _ = a.admit(s[0], now: 1, budget: budget) { started.append($0.name) }  // the connection's unit
        for x in s[1...] { #expect(a.admit(x, now: 2, budget: budget) { started.append($0.name) }) }
        a.ended(s[0])
        a.startWaiting(budget: budget) { started.append($0.name) }
        #expect(started == [0, 1] && a.waiting.map(\.name) == [2, 3])
    }

    @Test func longWaitersLeaveTheQueueAndAnEndedWaiterStopsWaiting() {
        let budget = ConnectionBudget(limit: 1)
        budget.opened()  // another connection holds the only unit
        var a = StreamAdmission<Stream>()
        let s = (0..<4).map(Stream.init)
        _ = a.admit(s[0], now: 1, budget: budget) { _ in }
        _ = a.admit(s[1], now: 100, budget: budget) { _ in }
        _ = a.admit(s[2], now: 200, budget: budget) { _ in }
        _ = a.admit(s[3], now: 300, budget: budget) { _ in }
        a.ended(s[2])  // reset by the client while it waited
        #expect(a.waiting.map(\.name) == [1, 3] && s[2].waitingSince == 0)
        var refused: [Int] = []
        a.takeWaiters(waitingAtLeast: 150, now: 400) { refused.append($0.name) }
        #expect(refused == [1] && a.waiting.map(\.name) == [3])
        a.abandonWaiters()
        #expect(a.waiting.isEmpty && s[3].waitingSince == 0)
    }
}
