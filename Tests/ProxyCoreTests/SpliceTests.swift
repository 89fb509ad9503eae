import Testing
import CProxyLinux
#if canImport(Glibc)
import Glibc
#endif
@testable import ProxyCore

@Suite struct BodySpliceTests {
    @Test func aBodyMovesThroughThePipeAndNeverPastItsEnd() {
        var s = BodySplice(capacity: 64 * 1024, remaining: 100 * 1024)
        #expect(s.fillLength == 64 * 1024 && s.remaining > 0 && s.pipeEmpty)
        s.filled(64 * 1024)
        #expect(s.fillLength == 0, "a full pipe takes nothing more from the upstream")
        s.drained(10 * 1024)
        #expect(s.fillLength == 10 * 1024 && !s.pipeEmpty && !s.finished)
        s.drained(54 * 1024)
        // 36 KiB of the body are left: asking for the pipe's room would read into what follows
        // on the upstream connection (the next response is not this body's).
        #expect(s.fillLength == 36 * 1024)
        s.filled(36 * 1024)
        #expect(s.remaining == 0 && s.fillLength == 0 && !s.finished, "all taken, not all delivered")
        s.drained(36 * 1024)
        #expect(s.finished && s.pipeEmpty)
    }

    @Test func aShortFillAndPartialDrainsKeepTheCountsExact() {
        var s = BodySplice(capacity: 65_536, remaining: 200_000)
        s.filled(1_000)
        s.drained(999)
        #expect(s.inPipe == 1 && s.remaining == 199_000 && s.fillLength == 65_535)
    }

    @Test func eligibility() {
        let min: UInt64 = 64 * 1024
        #expect(BodySplice.eligible(remaining: min, minSize: min, plainSockets: true, pendingBytes: false, readAhead: false, encoded: false))
        #expect(!BodySplice.eligible(remaining: min - 1, minSize: min, plainSockets: true, pendingBytes: false, readAhead: false, encoded: false),
                "below the threshold a copy is cheaper")
        #expect(!BodySplice.eligible(remaining: nil, minSize: min, plainSockets: true, pendingBytes: false, readAhead: false, encoded: false),
                "chunked and read-to-close bodies are re-framed or have no known end")
        #expect(!BodySplice.eligible(remaining: 1 << 20, minSize: min, plainSockets: false, pendingBytes: false, readAhead: false, encoded: false),
                "TLS on either side")
        #expect(!BodySplice.eligible(remaining: 1 << 20, minSize: min, plainSockets: true, pendingBytes: true, readAhead: false, encoded: false),
                "bytes waiting in a buffer would be overtaken")
        #expect(!BodySplice.eligible(remaining: 1 << 20, minSize: min, plainSockets: true, pendingBytes: false, readAhead: true, encoded: false),
                "a response read ahead is held in memory on purpose")
        #expect(!BodySplice.eligible(remaining: 1 << 20, minSize: min, plainSockets: true, pendingBytes: false, readAhead: false, encoded: true),
                "a compressed body passes through its encoder")
    }
}

@Suite struct PipePoolTests {
    @Test func aPipeHoldsAPlaceInBothBudgetsUntilItIsClosed() throws {
        let pipes = SpliceBudget(metrics: MetricsRegistry())
        let connections = ConnectionBudget(limit: 10)
        let pool = PipePool()
        let p = try #require(pool.take(budget: connections, pipes: pipes))
        #expect(pipes.current == 1 && connections.current == 1)
        // Non-blocking at both ends: a splice into a full pipe must not stall the loop.
        #expect(fcntl(p.readFD, F_GETFL) & O_NONBLOCK != 0 && fcntl(p.writeFD, F_GETFL) & O_NONBLOCK != 0)
        #expect(fcntl(p.readFD, F_GETFD) & FD_CLOEXEC != 0)
        #expect(p.capacity >= 4096)
        // Bytes really pass: written in at one end, read out at the other.
        var byte: UInt8 = 42
        #expect(write(p.writeFD, &byte, 1) == 1)
        var out: UInt8 = 0
        #expect(read(p.readFD, &out, 1) == 1 && out == 42)
        p.close()
        #expect(pipes.current == 0 && connections.current == 0)
    }

    @Test func noPipeWhenEitherBudgetIsFull() {
        let pipes = SpliceBudget(metrics: MetricsRegistry())
        pipes.setLimit(1)
        let pool = PipePool()
        let first = pool.take(budget: ConnectionBudget(limit: 10), pipes: pipes)
        #expect(first != nil)
        #expect(pool.take(budget: ConnectionBudget(limit: 10), pipes: pipes) == nil, "splice.max_pipes reached")
        first?.close()
        let full = ConnectionBudget(limit: 1)
        full.opened()
        #expect(pool.take(budget: full, pipes: pipes) == nil, "the connection budget has no room for two descriptors")
        #expect(pipes.current == 0, "a refused pipe holds no place")
    }

    @Test func emptyPipesAreReusedAndTheUnusedOnesTrimmed() throws {
        let pipes = SpliceBudget(metrics: MetricsRegistry())
        let connections = ConnectionBudget(limit: 100)
        let pool = PipePool()
        let taken = (0..<6).compactMap { _ in pool.take(budget: connections, pipes: pipes) }
        #expect(taken.count == 6)
        for p in taken { pool.put(p) }
        let again = try #require(pool.take(budget: connections, pipes: pipes))
        #expect(again === taken.last, "the pool's pipe, not a new one")
        #expect(pipes.current == 6)
        pool.put(again)
        // The burst took all six since the last trim: none goes.
        #expect(pool.trim() == 0 && pool.count == 6)
        // Two at a time since: the four never taken are closed.
        let two = (0..<2).compactMap { _ in pool.take(budget: connections, pipes: pipes) }
        for p in two { pool.put(p) }
        #expect(pool.trim() == 4 && pool.count == 2)
        #expect(pipes.current == 2 && connections.current == 2)
    }
}

/// `SpliceCall` on real descriptors: a non-blocking Unix socket pair and a pipe.
@Suite struct SpliceCallTests {
    @Test func eachOutcomeOfASpliceIsNamed() throws {
        var pair: (Int32, Int32) = (-1, -1)
        let made = withUnsafeMutableBytes(of: &pair) {
            socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | CProxyLinux_SOCK_NONBLOCK, 0,
                       $0.baseAddress!.assumingMemoryBound(to: Int32.self))
        }
        try #require(made == 0)
        let pool = PipePool()
        let pipe = try #require(pool.take(budget: ConnectionBudget(limit: 10), pipes: SpliceBudget(metrics: MetricsRegistry())))
        defer { pipe.close(); close(pair.1) }

        #expect(write(pair.0, "hello", 5) == 5)
        guard case .moved(5) = SpliceCall.run(from: pair.1, to: pipe.writeFD, count: 100) else {
            Issue.record("the five bytes the socket held were not moved into the pipe"); return
        }
        guard case .wouldBlock = SpliceCall.run(from: pair.1, to: pipe.writeFD, count: 100) else {
            Issue.record("an empty socket must say wait, not end or fail"); return
        }
        // Out of the pipe to the other socket, with SPLICE_F_MORE as a request body uses it.
        guard case .moved(5) = SpliceCall.run(from: pipe.readFD, to: pair.1, count: 5, more: true) else {
            Issue.record("the pipe's bytes did not reach the socket"); return
        }
        var got = [UInt8](repeating: 0, count: 8)
        #expect(read(pair.0, &got, 8) == 5 && Array(got[0..<5]) == Array("hello".utf8))

        close(pair.0)
        guard case .ended = SpliceCall.run(from: pair.1, to: pipe.writeFD, count: 100) else {
            Issue.record("a peer that closed must read as the input's end"); return
        }
        guard case .failed(let e) = SpliceCall.run(from: -1, to: pipe.writeFD, count: 100) else {
            Issue.record("a bad descriptor must fail"); return
        }
        #expect(e == EBADF)
    }
}
