import CProxyLinux
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Runs the listeners on N event-loop threads.
///
/// Every TCP listener is bound once per loop with SO_REUSEPORT, so the kernel spreads new
/// connections across loops and a connection lives on one loop (one thread) for its life.
public final class ProxyServer: Sendable {
    private let loops: [EventLoop]
    private let contexts: [ListenerContext]
    private let log: Logger
    private let accessLog: AccessLog?
    private let running = Atomic<Int>(0)
    private let threads = Mutex<[EventLoopThread]>([])

    /// `metrics`: where the engine counts requests, connections and upstream latency (a
    /// private registry nobody reads when not given).
    public init(listeners: [ListenerSpec], loopCount: Int, log: Logger, accessLog: AccessLog?,
                metrics: EngineMetrics = EngineMetrics(registry: MetricsRegistry())) throws(SystemError) {
        var loops: [EventLoop] = []
        for i in 0..<max(1, loopCount) { loops.append(try EventLoop(index: i)) }
        self.loops = loops
        self.log = log
        self.accessLog = accessLog
        contexts = listeners.map { ListenerContext(spec: $0, loops: loops.count, log: log, accessLog: accessLog, metrics: metrics) }
    }

    /// Binds every listener (errors surface here, before anything runs) and starts the loops.
    public func start() throws(SystemError) {
        // SIGPIPE would kill the process on a write to a closed peer; sends use MSG_NOSIGNAL too.
        signal(SIGPIPE, SIG_IGN)
        var fdsPerLoop: [[(Int32, ListenerContext)]] = Array(repeating: [], count: loops.count)
        var opened: [Int32] = []
        do {
            for context in contexts {
                if case .unix = context.spec.address {
                    // One socket; only loop 0 accepts on it.
                    let fd = try Socket.makeListener(context.spec.address, reusePort: false)
                    opened.append(fd)
                    fdsPerLoop[0].append((fd, context))
                } else {
                    for i in 0..<loops.count {
                        let fd = try Socket.makeListener(context.spec.address, reusePort: true)
                        opened.append(fd)
                        fdsPerLoop[i].append((fd, context))
                    }
                }
            }
        } catch {
            for fd in opened { close(fd) }
            throw error
        }
        for context in contexts {
            context.onLoopIdle = { [weak self] loop in self?.checkDrained(loop) }
        }
        running.store(loops.count, ordering: .sequentiallyConsistent)
        var started: [EventLoopThread] = []
        for (i, loop) in loops.enumerated() {
            let listeners = fdsPerLoop[i].map { ListenerFD(fd: $0.0, context: $0.1) }
            let accessLog = self.accessLog
            let log = self.log
            let contexts = self.contexts
            let thread = try EventLoopThread(loop: loop, setup: { loop in
                for l in listeners {
                    let acceptor = Acceptor(fd: l.fd, loop: loop, context: l.context)
                    do {
                        try loop.register(acceptor, EventLoop.readable)
                    } catch {
                        log.error("cannot register listener", ["error": "\(error)"])
                    }
                    l.context.state(loop).acceptors.append(acceptor)
                }
                if let accessLog { loop.afterBatch.append { accessLog.flush(loopIndex: loop.index) } }
            }, teardown: { [self] loop in
                for context in contexts { context.state(loop).pool?.closeAll() }
                accessLog?.flush(loopIndex: loop.index)
                self.running.subtract(1, ordering: .sequentiallyConsistent)
            })
            started.append(thread)
        }
        threads.withLock { $0 = started }
    }

    public var loopCount: Int { loops.count }

    /// Stops accepting, lets in-flight requests finish (idle keep-alive connections are closed,
    /// busy ones get `Connection: close`), and returns when all loops are done or `timeout` passed.
    /// Returns whether everything drained in time.
    @discardableResult
    public func shutdown(timeout: UInt64) -> Bool {
        for loop in loops {
            loop.execute { [self] in
                let first = contexts.filter { !$0.spec.drainsLast }
                drain(first.isEmpty ? contexts : first, on: loop)
                checkDrained(loop)
            }
        }
        let deadline = EventLoop.monotonicNow() + timeout
        while running.load(ordering: .sequentiallyConsistent) > 0 {
            if EventLoop.monotonicNow() >= deadline { return false }
            usleep(5_000)
        }
        for thread in threads.withLock({ $0 }) { thread.join() }
        return true
    }

    /// Stops `group`'s listeners on `loop` and asks their connections to finish.
    private func drain(_ group: [ListenerContext], on loop: EventLoop) {
        for context in group {
            let s = context.state(loop)
            s.draining = true
            // Accept what is already queued first: closing a listener resets queued connections.
            for a in s.acceptors {
                a.onEvent(CProxyLinux_EPOLLIN)
                loop.close(a)
            }
            s.acceptors.removeAll()
            s.pool?.closeAll()
        }
        // Connections of listeners not in `group` ignore this (they check their listener).
        loop.forEachChannel { $0.onDrain() }
    }

    /// Once the first group is idle the listeners that drain last follow; once everything is
    /// idle the loop stops.
    private func checkDrained(_ loop: EventLoop) {
        let draining = contexts.filter { $0.state(loop).draining }
        guard !draining.isEmpty, draining.allSatisfy({ $0.state(loop).connections == 0 }) else { return }
        let remaining = contexts.filter { !$0.state(loop).draining }
        if remaining.isEmpty {
            loop.stop()
        } else {
            drain(remaining, on: loop)
            checkDrained(loop)
        }
    }
}

private struct ListenerFD: @unchecked Sendable {
    let fd: Int32
    let context: ListenerContext
}
