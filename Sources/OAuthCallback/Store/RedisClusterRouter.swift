import ProxyCore
#if canImport(Glibc)
import Glibc
#endif

/// One loop's side of a Redis Cluster store: its copy of the slot map and one
/// `RedisConnection` per primary (made on first use), each command sent to the primary of
/// its key's slot (`RedisHashSlot`).
///
/// - **`-MOVED slot node`**: the slot is served there now: the map is corrected for that slot,
///   a full refresh is scheduled (a MOVED usually means a whole range moved), and the command
///   is sent once more, to that node.
/// - **`-ASK slot node`**: the slot is being migrated and this key is already there: `ASKING`
///   then the command are sent to that node, once; the map is left alone.
/// - At most `maxRedirects` redirections per command; one more fails it `.unavailable`.
/// - **A node's connection fails** (lost, refused, timed out): its commands fail
///   `.unavailable` at once, as with a single Redis (nothing is queued), and the map is
///   fetched again, so a replica the cluster promoted in its place is found. Until then its
///   slots' commands fail at once (its connection is in backoff).
/// - `-CLUSTERDOWN` (and `-TRYAGAIN`, which single-key commands never get) fail the command
///   `.unavailable` like any Redis error; CLUSTERDOWN also schedules a refresh.
/// - **Refreshes** run one at a time per loop, at most one per `refreshInterval`; a request
///   made meanwhile runs when allowed. Connections to nodes that are no longer primaries are
///   closed when a map is installed.
/// - **No map yet** (the loop's first commands, or every earlier fetch failed): commands wait
///   for the fetch under way, each under its own `commandTimeout` (as Sentinel holds commands
///   until `ROLE`), and fail `.unavailable` if it fails; with no fetch allowed yet they fail at once.
///
/// Loop-confined: created, used and closed on its loop's thread only (asserted).
final class RedisClusterRouter {
    let loop: EventLoop
    private let cluster: RedisCluster
    private let commandTimeout: UInt64
    private let logger: Logger?
    private var map: RedisSlotMap?
    private var connections: [SocketAddress: RedisConnection] = [:]
    private var refreshing = false
    /// A refresh was asked for while one ran (or before the interval was over).
    private var refreshWanted = false
    private var lastRefresh: UInt64?
    private var refreshTimer: TimerHandle?
    /// Waiting for the first map (see the type's comment), oldest first.
    private var waiting: [Waiter] = []
    /// Why the last fetch failed, for errors and the log; whether this outage was logged.
    private var lastProblem = "no slot map yet"
    private var outageLogged = false
    private var closed = false
    private let thread = pthread_self()

    init(loop: EventLoop, cluster: RedisCluster, commandTimeout: UInt64, logger: Logger?) {
        self.loop = loop
        self.cluster = cluster
        self.commandTimeout = commandTimeout
        self.logger = logger
    }

    deinit { close() }

    private func assertOnLoop() {
        assert(pthread_equal(thread, pthread_self()) != 0, "RedisClusterRouter used off its event loop")
    }

    // MARK: Commands

    /// Sends one command for `key` (the key as sent, prefix included). `completion` runs on
    /// the loop, exactly once, never inside this call.
    func send(_ args: [[UInt8]], key: [UInt8], _ completion: @escaping (Result<RedisReply, StoreError>) -> Void) {
        assertOnLoop()
        let slot = RedisHashSlot.slot(of: key)
        // The usual case: a map is there, and the command goes out in this very batch (a
        // posted task per command cost a lock and an eventfd wake-up each, measured by
        // bench/callbacks). Completions still never run inside this call.
        if map != nil && !closed { return route(args, slot: slot, redirectsLeft: cluster.maxRedirects, completion) }
        withMap { [weak self] error in
            guard let self else { return completion(.failure(StoreError(.unavailable, "redis store closed"))) }
            if let error { return completion(.failure(error)) }
            self.route(args, slot: slot, redirectsLeft: self.cluster.maxRedirects, completion)
        }
    }

    /// The current map's primary for `slot`.
    private func route(_ args: [[UInt8]], slot: Int, redirectsLeft: Int,
                       _ completion: @escaping (Result<RedisReply, StoreError>) -> Void) {
        guard let address = map?.primary(for: slot) else {
            requestRefresh()
            return post { completion(.failure(StoreError(.unavailable, "redis cluster: no known primary serves slot \(slot)"))) }
        }
        dispatch(args, slot: slot, to: address, asking: false, redirectsLeft: redirectsLeft, completion)
    }

    private func dispatch(_ args: [[UInt8]], slot: Int, to address: SocketAddress, asking: Bool, redirectsLeft: Int,
                          _ completion: @escaping (Result<RedisReply, StoreError>) -> Void) {
        let connection = connection(to: address)
        // Redis answers in order: ASKING's reply comes first and concerns only the next command.
        if asking { connection.send([Array("ASKING".utf8)]) { _ in } }
        connection.send(args) { [weak self] result in
            guard let self, !self.closed else { return completion(result) }
            self.handle(result, args, slot: slot, from: address, redirectsLeft: redirectsLeft, completion)
        }
    }

    private func handle(_ result: Result<RedisReply, StoreError>, _ args: [[UInt8]], slot: Int, from address: SocketAddress,
                        redirectsLeft: Int, _ completion: @escaping (Result<RedisReply, StoreError>) -> Void) {
        switch result {
        case .success(.error(let message)):
            guard let parsed = RedisRedirect.parse(message, answeredBy: address) else {
                if message.hasPrefix("CLUSTERDOWN") { requestRefresh() }
                return completion(result)
            }
            let redirect: RedisRedirect
            switch parsed {
            case .success(let r): redirect = r
            case .failure(let error):
                requestRefresh()
                return completion(.failure(error))
            }
            switch redirect.kind {
            case .moved:
                cluster.counters.moved.increment()
                map?.moved(slot: redirect.slot, to: redirect.address)
                requestRefresh()
            case .ask:
                cluster.counters.ask.increment()
            }
            guard redirectsLeft > 0 else {
                return completion(.failure(StoreError(.unavailable, "redis cluster: slot \(slot) redirected more than "
                                                      + "\(cluster.maxRedirects) times (last: \(message.prefix(80)))")))
            }
            dispatch(args, slot: slot, to: redirect.address, asking: redirect.kind == .ask,
                     redirectsLeft: redirectsLeft - 1, completion)
        case .failure:
            // The node may be gone (a failover under way): look at the map again.
            requestRefresh()
            completion(result)
        case .success:
            completion(result)
        }
    }

    /// This loop's connection to `address`, made on first use.
    private func connection(to address: SocketAddress) -> RedisConnection {
        if let c = connections[address] { return c }
        let c = RedisConnection(loop: loop, settings: cluster.settings(forNode: address), logger: logger)
        connections[address] = c
        return c
    }

    /// `/readyz`: every primary of the map answers `PING`, and every slot has a primary.
    /// `done` runs on the loop, never inside this call, with the first problem.
    func probe(_ done: @escaping (StoreError?) -> Void) {
        assertOnLoop()
        withMap { [weak self] error in
            guard let self, let map = self.map, error == nil else {
                return done(error ?? StoreError(.unavailable, "redis store closed"))
            }
            guard map.covered == RedisHashSlot.count else {
                self.requestRefresh()
                return done(StoreError(.unavailable, "redis cluster: \(RedisHashSlot.count - map.covered) slots have no known primary"))
            }
            var left = map.primaries.count
            var first: StoreError?
            for address in map.primaries {
                self.connection(to: address).send([Array("PING".utf8)]) { [weak self] result in
                    switch result {
                    case .success(.error(let message)): first = first ?? StoreError(.unavailable, "\(address): \(message.prefix(80))")
                    case .failure(let error):
                        first = first ?? error
                        self?.requestRefresh()
                    case .success: break
                    }
                    left -= 1
                    if left == 0 { done(first) }
                }
            }
        }
    }

    // MARK: The slot map

    /// Runs `body` (on the loop, never inside this call) once a map is there: at once when one
    /// is, after the fetch under way when not, with an error when there is none.
    private func withMap(_ body: @escaping (StoreError?) -> Void) {
        if closed { return post { body(StoreError(.unavailable, "redis store closed")) } }
        if map != nil { return post { body(nil) } }
        requestRefresh()
        guard refreshing else {
            return post { [lastProblem] in body(StoreError(.unavailable, "redis cluster unavailable: \(lastProblem)")) }
        }
        let waiter = Waiter(body)
        let timeout = commandTimeout
        // Unlike the connection's commands, one that times out here leaves nothing out of order.
        waiter.timer = loop.scheduleTimer(after: timeout) { [weak waiter] in
            waiter?.resume(StoreError(.timeout, "no redis cluster slot map within \(timeout / 1_000_000) ms"))
        }
        waiting.append(waiter)
    }

    private func resumeWaiting() {
        let all = waiting
        waiting = []
        let error = map == nil ? StoreError(.unavailable, closed ? "redis store closed" : "redis cluster unavailable: \(lastProblem)") : nil
        for waiter in all { waiter.resume(error) }
    }

    /// A refresh now, or as soon as one is allowed (one at a time, one per `refreshInterval`).
    private func requestRefresh() {
        guard !closed else { return }
        if refreshing || refreshTimer != nil {
            refreshWanted = true
            return
        }
        let now = loop.nowNanoseconds
        if let last = lastRefresh, now < last + cluster.refreshInterval {
            refreshTimer = loop.scheduleTimer(after: last + cluster.refreshInterval - now) { [weak self] in
                guard let self else { return }
                self.refreshTimer = nil
                self.refreshWanted = false
                self.startRefresh()
            }
            return
        }
        startRefresh()
    }

    private func startRefresh() {
        guard !closed else { return }
        refreshing = true
        refreshWanted = false
        lastRefresh = loop.nowNanoseconds
        cluster.fetchSlotMap(on: loop, known: map?.nodes ?? []) { [weak self] result in
            guard let self, !self.closed else { return }
            self.refreshing = false
            switch result {
            case .success(let fresh): self.install(fresh)
            case .failure(let error): self.fetchFailed(error.detail)
            }
            self.resumeWaiting()
            if self.refreshWanted { self.requestRefresh() }
        }
    }

    private func install(_ fresh: RedisSlotMap) {
        map = fresh
        cluster.installed(fresh)
        if outageLogged {
            logger?.info("redis cluster slot map fetched again", ["redis": cluster.url.description, "loop": String(loop.index)])
            outageLogged = false
        }
        // A node that is no longer a primary (failed, or now a replica) gets no more commands.
        for (address, connection) in connections where !fresh.primaries.contains(address) {
            connections[address] = nil
            connection.close()
        }
    }

    private func fetchFailed(_ why: String) {
        lastProblem = why
        if !outageLogged {
            outageLogged = true
            logger?.warn("redis cluster slot map unavailable; \(map == nil ? "callbacks fail closed until it is fetched" : "using the last one")",
                         ["redis": cluster.url.description, "loop": String(loop.index), "error": why])
        } else {
            logger?.debug("redis cluster slot map fetch failed", ["redis": cluster.url.description, "loop": String(loop.index), "error": why])
        }
    }

    /// Runs `task` from a later loop task (never inside the caller's call).
    private func post(_ task: @escaping () -> Void) {
        let bound = RedisLoopBound(task)
        loop.execute { bound.value() }
    }

    /// Closes every node connection (their pending commands fail `.unavailable`), fails the
    /// waiting commands; later calls fail the same way. Idempotent.
    func close() {
        guard !closed else { return }
        closed = true
        refreshTimer?.cancel()
        refreshTimer = nil
        resumeWaiting()
        let all = connections.values
        connections = [:]
        for connection in all { connection.close() }
    }
}

/// A call waiting for the first slot map: resumed once, by the fetch or by its timeout.
private final class Waiter {
    private var body: ((StoreError?) -> Void)?
    var timer: TimerHandle?

    init(_ body: @escaping (StoreError?) -> Void) { self.body = body }

    func resume(_ error: StoreError?) {
        timer?.cancel()
        timer = nil
        let body = self.body
        self.body = nil
        body?(error)
    }
}
