import CProxyLinux
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Runs the listeners on N event-loop threads.
///
/// Every TCP listener is bound once per loop with SO_REUSEPORT, so the kernel spreads new
/// connections across loops, and an acceptor moves a connection to a less loaded loop when
/// the spread is uneven (`LoopPlacement`); a connection lives on one loop (one thread) for
/// its life.
public final class ProxyServer: Sendable {
    private let loops: [EventLoop]
    /// The listeners as started: the sockets; a reload replaces what serves them, not them.
    private let contexts: [ListenerContext]
    /// Per loop, every context with work on it: the current ones and, after a reload, the
    /// replaced ones until their connections are gone.
    private let live: LiveContexts
    private let log: Logger
    private let accessLog: AccessLog?
    private let metrics: EngineMetrics
    private let running = Atomic<Int>(0)
    private let threads = Mutex<[EventLoopThread]>([])
    /// Client connections: the public listeners' budget and the internal listener's own.
    public let clientBudget: ConnectionBudget
    private let internalBudget = ConnectionBudget(limit: ConnectionBudget.internalConnections)
    /// Per-client counts and buckets, across reloads (public listeners only).
    private let clients: ClientLimits
    /// The memory responses read ahead may take, across reloads.
    private let buffering: BufferingBudget
    /// The memory compressing responses' encoders may hold, across reloads.
    private let compressionMemory = MemoryReservation()
    /// The pipes spliced bodies may hold, across reloads.
    private let splice: SpliceBudget
    /// The loops as acceptors see them, to even out where connections live.
    private let placement: LoopSet
    /// What the loops' HTTP/3 sockets share (tokens, connection IDs).
    private let quic: QUICShared

    /// `metrics`: where the engine counts requests, connections and upstream latency (a
    /// private registry nobody reads when not given).
    /// `maxConnections`: the public listeners' client-connection budget; nil: none (the binary
    /// derives one from the descriptor limit: `ConnectionBudget.clientLimit`).
    public init(listeners: [ListenerSpec], loopCount: Int, log: Logger, accessLog: AccessLog?,
                metrics: EngineMetrics = EngineMetrics(registry: MetricsRegistry()),
                maxConnections: Int? = nil) throws(SystemError) {
        var loops: [EventLoop] = []
        for i in 0..<max(1, loopCount) { loops.append(try EventLoop(index: i)) }
        self.loops = loops
        self.log = log
        self.accessLog = accessLog
        self.metrics = metrics
        clientBudget = ConnectionBudget(limit: maxConnections ?? Int.max)
        // Room for every client of a full budget to be a different address (up to a million).
        clients = ClientLimits(clients: min(maxConnections ?? 1 << 16, 1 << 20), metrics: metrics.clientLimits)
        buffering = BufferingBudget(metrics: metrics.registry)
        splice = SpliceBudget(metrics: metrics.registry)
        let contexts = listeners.map { [clientBudget, internalBudget, clients, buffering, compressionMemory, splice] in
            ListenerContext(spec: $0, loops: loops.count, log: log, accessLog: accessLog, metrics: metrics,
                            budget: $0.ownBudget ? internalBudget : clientBudget, clients: $0.ownBudget ? nil : clients,
                            buffering: buffering, compressionMemory: compressionMemory, splice: splice)
        }
        self.contexts = contexts
        placement = LoopSet(loops, moved: metrics.registry.counter(
            "callback_proxy_connections_moved_total",
            "Client connections accepted on one event loop and moved to a less loaded one.").labels())
        metrics.registry.gauges("callback_proxy_loop_connections", "Client connections per event loop.", label: "loop") {
            [loops] in loops.map { ("\($0.index)", Double($0.clientConnections.load(ordering: .relaxed))) }
        }
        live = LiveContexts(loops: loops.count, contexts: contexts)
        quic = QUICShared(loops: loops)
    }

    /// Binds every listener (errors surface here, before anything runs) and starts the loops.
    public func start() throws(SystemError) {
        // SIGPIPE would kill the process on a write to a closed peer; sends use MSG_NOSIGNAL too.
        signal(SIGPIPE, SIG_IGN)
        var fdsPerLoop: [[(Int32, ListenerContext)]] = Array(repeating: [], count: loops.count)
        var udpPerLoop: [[(Int32, QUICAddress, ListenerContext)]] = Array(repeating: [], count: loops.count)
        var opened: [Int32] = []
        do {
            // HTTP/3: a UDP socket per loop on each TLS listener's address (`http3.enabled`).
            for context in contexts where context.credentials != nil && context.config.http3.enabled {
                if case .unix = context.spec.address { continue }
                for i in 0..<loops.count {
                    let (fd, local) = try QUICListener.bind(context.spec.address)
                    opened.append(fd)
                    udpPerLoop[i].append((fd, local, context))
                }
            }
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
            let udp = udpPerLoop[i].map { UDPListenerFD(fd: $0.0, local: $0.1, context: $0.2) }
            let quic = self.quic
            let accessLog = self.accessLog
            let log = self.log
            let live = self.live
            let placement = self.placement
            let thread = try EventLoopThread(loop: loop, setup: { loop in
                for l in listeners {
                    let acceptor = Acceptor(fd: l.fd, loop: loop, context: l.context, placement: placement)
                    do {
                        try loop.register(acceptor, EventLoop.readable)
                    } catch {
                        log.error("cannot register listener", ["error": "\(error)"])
                    }
                    l.context.state(loop).acceptors.append(acceptor)
                }
                for u in udp {
                    let listener = QUICListener(fd: u.fd, loop: loop, context: u.context, local: u.local, shared: quic)
                    do {
                        try loop.register(listener, EventLoop.readable)
                    } catch {
                        log.error("cannot register the HTTP/3 socket", ["error": "\(error)"])
                    }
                    u.context.state(loop).quic = listener
                }
                if let accessLog { loop.afterBatch.append { accessLog.flush(loopIndex: loop.index) } }
            }, teardown: { [self] loop in
                for context in live.contexts(loop) { for b in context.state(loop).balancers { b.closeAll() } }
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
        placement.stopping.store(true, ordering: .relaxed)
        for loop in loops {
            loop.execute { [self] in
                live.stopping[loop.index] = true
                let all = live.contexts(loop)
                for context in all { context.state(loop).stopping = true }
                // Replaced contexts drain with the listener they served.
                let first = all.filter { !$0.spec.drainsLast }
                drain(first.isEmpty ? all : first, on: loop)
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
            for b in s.balancers { b.closeAll() }
        }
        // Connections of listeners not in `group` ignore this (they check their listener).
        loop.forEachChannel { $0.onDrain() }
    }

    /// Replaced contexts leave once idle. When stopping: once the first group is idle the
    /// listeners that drain last follow; once everything is idle the loop stops.
    private func checkDrained(_ loop: EventLoop) {
        live.prune(loop)
        guard live.stopping[loop.index] else { return }
        let contexts = live.contexts(loop)
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

extension ProxyServer {
    /// Serves the same listeners with new specs (configuration, phases, certificates): every
    /// loop switches its acceptors to the new contexts at once; a connection of an old one
    /// finishes the request in flight on it — unaffected — and moves to the new one at its
    /// next request boundary (idle ones at once), its TLS session untouched. Unlike nginx's
    /// old workers, which must close their keep-alive connections, nothing is closed: the
    /// reload is in-process, so no client ever sees one. Listener names and addresses must be
    /// the ones the server started with: sockets are not rebound.
    public func reload(_ specs: [ListenerSpec]) throws(ReloadRefused) {
        guard specs.count == contexts.count,
              zip(specs, contexts).allSatisfy({ $0.name == $1.spec.name && $0.address == $1.spec.address }) else {
            throw ReloadRefused(message: "the listeners changed (names or addresses): restart to apply")
        }
        // QUIC's UDP sockets are bound at start, beside each TLS listener: they cannot come or go.
        guard zip(specs, contexts).allSatisfy({ $0.config.http3.enabled == $1.spec.config.http3.enabled }) else {
            throw ReloadRefused(message: "http3.enabled changed: restart to apply")
        }
        let fresh = specs.map { [clientBudget, internalBudget, clients, buffering, compressionMemory, splice] in
            ListenerContext(spec: $0, loops: loops.count, log: log, accessLog: accessLog, metrics: metrics,
                            budget: $0.ownBudget ? internalBudget : clientBudget, clients: $0.ownBudget ? nil : clients,
                            buffering: buffering, compressionMemory: compressionMemory, splice: splice)
        }
        for context in fresh { context.onLoopIdle = { [weak self] loop in self?.checkDrained(loop) } }
        for loop in loops {
            loop.execute { [self] in
                guard !live.stopping[loop.index] else { return }
                let current = live.current(loop)
                for (old, new) in zip(current, fresh) {
                    let s = old.state(loop)
                    new.state(loop).acceptors = s.acceptors
                    for a in s.acceptors { a.context = new }
                    s.acceptors.removeAll()
                    new.state(loop).quic = s.quic
                    s.quic?.context = new
                    s.quic = nil
                    s.retired = true
                    s.successor = new
                    for b in s.balancers { b.closeAll() }
                }
                live.replace(current, with: fresh, on: loop)
                loop.forEachChannel { $0.onReload() }
                checkDrained(loop)
            }
        }
    }
}

public struct ReloadRefused: Error, Sendable {
    public let message: String
}

/// Which contexts each loop serves. `@unchecked Sendable`: slot `i` is only touched by loop `i`.
final class LiveContexts: @unchecked Sendable {
    private var current: [[ListenerContext]]
    private var retired: [[ListenerContext]]
    var stopping: [Bool]

    init(loops: Int, contexts: [ListenerContext]) {
        current = Array(repeating: contexts, count: loops)
        retired = Array(repeating: [], count: loops)
        stopping = Array(repeating: false, count: loops)
    }

    func current(_ loop: EventLoop) -> [ListenerContext] { current[loop.index] }

    func contexts(_ loop: EventLoop) -> [ListenerContext] { current[loop.index] + retired[loop.index] }

    func replace(_ old: [ListenerContext], with new: [ListenerContext], on loop: EventLoop) {
        current[loop.index] = new
        retired[loop.index] += old
    }

    /// Drops replaced contexts with no connection left on this loop (their idle pool goes too).
    func prune(_ loop: EventLoop) {
        retired[loop.index].removeAll { context in
            let s = context.state(loop)
            guard s.connections == 0 else { return false }
            for b in s.balancers { b.closeAll() }
            return true
        }
    }
}

private struct ListenerFD: @unchecked Sendable {
    let fd: Int32
    let context: ListenerContext
}

private struct UDPListenerFD: @unchecked Sendable {
    let fd: Int32
    let local: QUICAddress
    let context: ListenerContext
}
