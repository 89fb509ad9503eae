import CProxyLinux
#if canImport(Glibc)
import Glibc
#endif

/// A pipe a body is spliced through. Its two descriptors hold a place in the process's
/// `SpliceBudget` and a unit of a connection budget (a unit is two descriptors: what an
/// outbound connection's socket and its share of the reserve are counted as) until `close`.
final class SplicePipe {
    let readFD: Int32
    let writeFD: Int32
    /// Bytes the pipe holds at most (64 KiB unless the system changed the default).
    let capacity: Int
    private let budget: ConnectionBudget
    private let pipes: SpliceBudget

    fileprivate init(readFD: Int32, writeFD: Int32, capacity: Int, budget: ConnectionBudget, pipes: SpliceBudget) {
        self.readFD = readFD
        self.writeFD = writeFD
        self.capacity = capacity
        self.budget = budget
        self.pipes = pipes
    }

    /// Closes both ends and gives the places back.
    func close() {
        Glibc.close(readFD)
        Glibc.close(writeFD)
        budget.closed()
        pipes.release()
    }
}

/// A loop's empty pipes, kept for the next spliced body (making one is a `pipe2` and, on
/// closing, two `close`s). Loop-confined: no locks. Trimmed like `BufferPool`: the pipes that
/// stayed in the pool through a whole trim interval are closed.
final class PipePool {
    /// Empty pipes kept per loop; more are closed at once. As many as `splice.max_pipes`'s
    /// default: a pool smaller than the downloads a loop carries at once made and closed a
    /// pipe for most responses (a fifth of a 1 MiB download's system calls at 50 connections).
    /// Pipes a burst left behind go with the next trims.
    static let idleLimit = 256
    private var idle: [SplicePipe] = []
    /// The fewest pipes the pool held since the last trim: none of those was needed.
    private var lowWater = 0

    /// Pipes in the pool now.
    var count: Int { idle.count }

    deinit {
        for p in idle { p.close() }
    }

    /// An empty pipe: a kept one, or a new one if `pipes` and `budget` have room. Nil when
    /// neither (the body is copied instead).
    func take(budget: ConnectionBudget, pipes: SpliceBudget) -> SplicePipe? {
        if let p = idle.popLast() {
            if idle.count < lowWater { lowWater = idle.count }
            return p
        }
        lowWater = 0
        guard budget.hasRoom, pipes.reserve() else { return nil }
        var fds: (Int32, Int32) = (-1, -1)
        let made = withUnsafeMutableBytes(of: &fds) { CProxyLinux_pipe($0.baseAddress!.assumingMemoryBound(to: Int32.self)) }
        guard made == 0 else {
            // EMFILE/ENFILE, or pipe-max limits: copying works without one.
            pipes.release()
            return nil
        }
        budget.opened()
        let size = CProxyLinux_pipe_size(fds.0)
        return SplicePipe(readFD: fds.0, writeFD: fds.1, capacity: size > 0 ? Int(size) : 64 * 1024, budget: budget, pipes: pipes)
    }

    /// Takes back a pipe that is empty; `close`s it if the pool is full.
    func put(_ pipe: SplicePipe) {
        if idle.count < PipePool.idleLimit { idle.append(pipe) } else { pipe.close() }
    }

    /// Closes the pipes no body took since the last trim; returns how many.
    @discardableResult
    func trim() -> Int {
        let unused = min(lowWater, idle.count)
        for _ in 0..<unused { idle.removeLast().close() }
        lowWater = idle.count
        return unused
    }
}
