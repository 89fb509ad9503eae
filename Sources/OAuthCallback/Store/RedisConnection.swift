import ProxyCore
#if canImport(Glibc)
import Glibc
#endif

/// What one loop's connection needs to know (a copy of the store's configuration).
struct RedisConnectionSettings: Sendable {
    /// The server's addresses, kept current off the loops (nil with `sentinel`).
    var resolver: HostResolver?
    var username: String?
    var password: String?
    var database: Int
    /// `rediss://`: the TLS client context (verification always on).
    var tls: UpstreamTLSClient?
    /// Why the store cannot connect at all (the name did not resolve, no TLS context); every
    /// attempt fails with this.
    var setupProblem: String?
    var commandTimeout: UInt64
    var backoffMin: UInt64
    var backoffMax: UInt64
    /// For log lines: the URL without its password.
    var redactedURL: String
    /// A Sentinel-managed master: every connection attempt asks the sentinels where it is,
    /// sends `ROLE` first and holds our commands until the answer is `master`.
    var sentinel: RedisSentinel? = nil
    /// Cluster: the one node this connection speaks to, at the address the cluster announced
    /// (or a seed's), instead of `resolver`'s.
    var node: SocketAddress? = nil
    /// With TLS, the name checked against the server's certificate instead of the TLS client's
    /// (a cluster seed's configured host). nil: for a node announced by the cluster or the
    /// sentinels, its IP address; otherwise the TLS client's own host.
    var serverName: String? = nil
}

/// One command waiting for its reply. `done` makes the completion run once even when we fail
/// the command ourselves first (timeout, drop).
final class RedisCommand {
    private var completion: ((Result<RedisReply, StoreError>) -> Void)?
    var timer: TimerHandle?

    init(completion: @escaping (Result<RedisReply, StoreError>) -> Void) {
        self.completion = completion
    }

    var done: Bool { completion == nil }

    /// Marks the command done and hands its completion to the caller (who runs it).
    func take() -> ((Result<RedisReply, StoreError>) -> Void)? {
        defer { completion = nil }
        timer?.cancel()
        timer = nil
        return completion
    }

    func finish(_ result: Result<RedisReply, StoreError>) {
        take()?(result)
    }
}

/// One loop's connection to Redis, plain or TLS alike: the engine's `OutboundStream` does the
/// non-blocking connect, the TLS handshake and the I/O; commands are encoded into its output
/// (RESP), and replies are parsed by hiredis's reader (`RedisReplyParser`). hiredis's own
/// async context is not used: it reads and writes the socket itself, so it cannot speak TLS
/// in the 0.14 that Debian ships. Timeouts and reconnect backoff are loop timers; nothing
/// here blocks (see `RedisStore` for DNS).
///
/// States: `idle` (never used) → `connecting` (AUTH/SELECT pipelined, user commands queue
/// behind them in the stream's output, each under its own timeout) → `ready`; any failure →
/// `backoff` (no stream; commands fail at once with `.unavailable`) → timer → `connecting` …
///
/// With Sentinel, each attempt begins in `resolving` (the sentinels are asked, `RedisSentinel`),
/// and `ROLE` joins the handshake. User commands sent while `resolving` or `connecting` are
/// **held** here, not written: were `ROLE` to say `slave`, nothing of ours may have reached
/// that server. Each held command keeps its own timeout, so none waits longer than an
/// ordinary command; they go out in order once `ROLE` said `master`, and fail `.unavailable`
/// when the attempt fails. In `backoff` (no master known) commands still fail at once.
///
/// Redis answers in order, so replies are matched to `pending` by position. Completions run
/// while replies are being taken apart and may drop the connection (a refused AUTH): the
/// reply loop stops as soon as its parser is no longer the current one.
///
/// Loop-confined: created, used and closed on its loop's thread only (asserted).
final class RedisConnection {
    enum State { case idle, resolving, connecting, ready, backoff, closed }

    let loop: EventLoop
    private let settings: RedisConnectionSettings
    private let logger: Logger?
    private(set) var state = State.idle
    private var stream: OutboundStream?
    private var parser: RedisReplyParser?
    /// Connected, and the TLS handshake (if any) done.
    private var streamReady = false
    /// Commands sent on the current stream and not yet answered, oldest first from `head`.
    private var pending: [RedisCommand] = []
    private var head = 0
    private var backoff: UInt64
    private var reconnectTimer: TimerHandle?
    /// Handshake commands still unanswered in `connecting`.
    private var handshakeLeft = 0
    /// Sentinel: the address being connected to (or connected), the master once `ROLE` said so.
    private var target: SocketAddress?
    /// Sentinel: commands waiting for a verified master, oldest first (see the type's comment).
    private var held: [(args: [[UInt8]], command: RedisCommand)] = []
    /// The last reason the connection went away, for the log.
    private var lastError = ""
    /// Whether the current streak of failures was logged already (one line per outage).
    private var outageLogged = false
    private let thread = pthread_self()

    init(loop: EventLoop, settings: RedisConnectionSettings, logger: Logger?) {
        self.loop = loop
        self.settings = settings
        self.logger = logger
        self.backoff = settings.backoffMin
    }

    deinit { close() }

    private func assertOnLoop() {
        assert(pthread_equal(thread, pthread_self()) != 0, "RedisConnection used off its event loop")
    }

    // MARK: Commands

    /// Sends one command (binary-safe arguments). `completion` runs on the loop, exactly once,
    /// never inside this call.
    func send(_ args: [[UInt8]], _ completion: @escaping (Result<RedisReply, StoreError>) -> Void) {
        assertOnLoop()
        if state == .idle { connect() }
        if settings.sentinel != nil, state == .resolving || state == .connecting {
            hold(args, completion)
            return
        }
        guard state == .connecting || state == .ready, stream != nil else {
            let why = state == .closed ? "redis store closed" : "redis unavailable (reconnecting): \(lastError)"
            post(.failure(StoreError(.unavailable, why)), completion)
            return
        }
        issue(args, completion)
    }

    /// Number of commands waiting for a reply (tests, metrics).
    var pendingCount: Int { pending.count - head }

    private func issue(_ args: [[UInt8]], _ completion: @escaping (Result<RedisReply, StoreError>) -> Void) {
        guard let stream else {
            post(.failure(StoreError(.unavailable, "redis unavailable")), completion)
            return
        }
        let command = RedisCommand(completion: completion)
        stream.send { RedisCommandEncoding.append(args, to: &$0) }
        pending.append(command)
        let timeout = settings.commandTimeout
        command.timer = loop.scheduleTimer(after: timeout) { [weak self, weak command] in
            guard let self, let command, !command.done else { return }
            command.timer = nil
            // Replies are matched to commands by order: with one missing, the connection is
            // unusable. Drop it (the others on it fail `.unavailable`, a new connection is
            // made after backoff), then report this one as timed out.
            let completion = command.take()
            let ms = timeout / 1_000_000
            if self.stream?.handshaking == true {
                let peer = self.settings.sentinel != nil || self.settings.node != nil
                    ? self.target?.description : self.settings.tls?.serverName
                self.drop(reason: "TLS handshake with \(peer ?? "redis") did not finish within \(ms) ms")
            } else {
                self.drop(reason: "command timed out after \(ms) ms")
            }
            completion?(.failure(StoreError(.timeout, "no reply from redis within \(ms) ms")))
        }
    }

    private func hold(_ args: [[UInt8]], _ completion: @escaping (Result<RedisReply, StoreError>) -> Void) {
        let command = RedisCommand(completion: completion)
        held.append((args, command))
        let timeout = settings.commandTimeout
        command.timer = loop.scheduleTimer(after: timeout) { [weak command] in
            guard let command, !command.done else { return }
            command.timer = nil
            // Unlike a command on the wire, failing a held one (or one sent late, whose timer
            // this still is) leaves the replies' order intact: the connection is kept.
            command.finish(.failure(StoreError(.timeout, "no verified redis master within \(timeout / 1_000_000) ms")))
        }
    }

    /// Sends the held commands, in order, behind the handshake's replies.
    private func flushHeld() {
        guard let stream else { return failHeld(StoreError(.unavailable, "redis unavailable")) }
        let waiting = held
        held = []
        for (args, command) in waiting where !command.done {
            stream.send { RedisCommandEncoding.append(args, to: &$0) }
            pending.append(command)
        }
    }

    private func failHeld(_ error: StoreError) {
        let waiting = held
        held = []
        for (_, command) in waiting { command.finish(.failure(error)) }
    }

    /// Delivers a failure from a later loop task (never inside the caller's call).
    private func post(_ result: Result<RedisReply, StoreError>, _ completion: @escaping (Result<RedisReply, StoreError>) -> Void) {
        let bound = RedisLoopBound(completion)
        loop.execute { bound.value(result) }
    }

    // MARK: Replies

    private func streamEvent(_ event: OutboundStream.Event) {
        switch event {
        case .ready:
            streamReady = true
            becomeReadyIfDone()
        case .received(let bytes):
            received(bytes)
        case .closed(let reason):
            drop(reason: reason, lost: true)
        }
    }

    private func received(_ bytes: UnsafeRawBufferPointer) {
        guard let current = parser else { return }
        if let error = current.feed(bytes) {
            drop(reason: error)
            return
        }
        // A completion may drop the connection (and with it this parser): stop then.
        while parser === current {
            switch current.next() {
            case .needMore:
                return
            case .protocolError(let error):
                drop(reason: error)
                return
            case .reply(let reply):
                guard let command = popPending() else {
                    drop(reason: "redis sent a reply nothing asked for")
                    return
                }
                command.finish(.success(reply))
                if settings.sentinel != nil, parser === current, case .error(let message) = reply,
                   RedisSentinel.meansNotMaster(message) {
                    drop(reason: "\(target?.description ?? "redis") answered \(message.prefix(80)); asking the sentinels again")
                    return
                }
            }
        }
    }

    private func popPending() -> RedisCommand? {
        guard head < pending.count else { return nil }
        let command = pending[head]
        head += 1
        if head == pending.count {
            pending.removeAll(keepingCapacity: true)
            head = 0
        } else if head >= 64 && head * 2 >= pending.count {
            pending.removeFirst(head)
            head = 0
        }
        return command
    }

    // MARK: Connecting

    private func connect() {
        reconnectTimer = nil
        guard state != .closed else { return }
        if let problem = settings.setupProblem {
            failedToConnect(problem)
            return
        }
        if let sentinel = settings.sentinel {
            state = .resolving
            sentinel.resolveMaster(on: loop) { [weak self] result in
                // Closed meanwhile: the answer is not wanted.
                guard let self, self.state == .resolving else { return }
                switch result {
                case .success(let address): self.open(address)
                case .failure(let error): self.failedToConnect(error.detail)
                }
            }
            return
        }
        if let node = settings.node {
            open(node)
            return
        }
        // Round robin over the name's addresses: after a failed attempt the next one is tried.
        guard let address = settings.resolver?.address(after: nil) else {
            failedToConnect(settings.resolver?.problem?.description ?? "no address")
            return
        }
        open(address)
    }

    private func open(_ address: SocketAddress) {
        target = address
        do {
            // A master announced by Sentinel, or a node by the cluster, is checked against the
            // address announced (its certificate needs that IP SAN): no name for it was configured.
            let announced = settings.sentinel != nil || settings.node != nil
            let name: String? = switch (announced, address) {
            case _ where settings.serverName != nil: settings.serverName
            case (true, .ipv4(let host, _)), (true, .ipv6(let host, _)): host
            default: nil
            }
            stream = try OutboundStream(to: address, tls: settings.tls, serverName: name, on: loop) { [weak self] event in
                self?.streamEvent(event)
            }
        } catch {
            failedToConnect(error.description)
            return
        }
        parser = RedisReplyParser()
        streamReady = false
        state = .connecting
        handshake()
    }

    /// AUTH and SELECT are queued at once: Redis answers in order, so user commands sent
    /// meanwhile run after them (and fail with NOAUTH if AUTH failed).
    private func handshake() {
        var steps: [(name: String, args: [[UInt8]])] = []
        if let password = settings.password {
            if let username = settings.username {
                steps.append(("AUTH", [Array("AUTH".utf8), Array(username.utf8), Array(password.utf8)]))
            } else {
                steps.append(("AUTH", [Array("AUTH".utf8), Array(password.utf8)]))
            }
        }
        if settings.database != 0 {
            steps.append(("SELECT", [Array("SELECT".utf8), Array(String(settings.database).utf8)]))
        }
        if settings.sentinel != nil { steps.append(("ROLE", [Array("ROLE".utf8)])) }
        handshakeLeft = steps.count
        for (what, step) in steps {
            issue(step) { [weak self] result in
                guard let self else { return }
                switch result {
                case .success(.error(let message)):
                    // Redis's own text (WRONGPASS…, NOAUTH…) never echoes the password.
                    self.lastError = "\(what) refused: \(message)"
                    self.drop(reason: self.lastError)
                case .success(let reply) where what == "ROLE" && RedisSentinel.role(reply) != "master":
                    // A sentinel not yet past a failover, or a demoted master: never ours to write to.
                    self.lastError = "\(self.target?.description ?? "redis") is not the master (ROLE \(RedisSentinel.role(reply)))"
                    self.drop(reason: self.lastError)
                case .success:
                    self.handshakeLeft -= 1
                    self.becomeReadyIfDone()
                case .failure:
                    break   // the connection is going away already
                }
            }
        }
    }

    private func becomeReadyIfDone() {
        guard state == .connecting, handshakeLeft == 0, streamReady else { return }
        state = .ready
        backoff = settings.backoffMin
        if outageLogged {
            logger?.info("redis store reconnected", ["redis": settings.redactedURL, "loop": String(loop.index)])
        }
        outageLogged = false
        lastError = ""
        if let sentinel = settings.sentinel, let target {
            sentinel.confirmed(target)
            flushHeld()
        }
    }

    private func failedToConnect(_ why: String) {
        lastError = why
        state = .backoff
        scheduleReconnect()
    }

    private func scheduleReconnect() {
        guard state != .closed else { return }
        state = .backoff
        if !outageLogged {
            outageLogged = true
            logger?.warn("redis store unavailable; callbacks fail closed until it returns",
                         ["redis": settings.redactedURL, "loop": String(loop.index), "error": lastError])
        } else {
            // The reason may change during one outage (a failover: refused, then not the master yet).
            logger?.debug("redis reconnect failed", ["redis": settings.redactedURL, "loop": String(loop.index), "error": lastError])
        }
        // After the log line: a caller that fails may read the log at once (tests do).
        failHeld(StoreError(.unavailable, "redis unavailable: \(lastError)"))
        reconnectTimer?.cancel()
        let delay = backoff
        backoff = min(backoff * 2, settings.backoffMax)
        reconnectTimer = loop.scheduleTimer(after: delay) { [weak self] in
            guard let self, self.state == .backoff else { return }
            self.connect()
        }
    }

    // MARK: Dropping

    /// Gives up on the current connection: fails every pending command and reconnects after
    /// backoff. `lost`: the stream failed or the server closed it (refused, TLS failure, EOF);
    /// otherwise we dropped it (timeout, refused handshake, protocol error).
    private func drop(reason: String, lost: Bool = false) {
        guard stream != nil else { return }
        // A sentinel's answer that did not give a usable master (refused, not the master, not
        // ready): that sentinel may not have seen the failover yet; the next walk starts elsewhere.
        if state == .connecting, let sentinel = settings.sentinel, let target { sentinel.unusable(target) }
        lastError = reason
        detach()
        if state != .closed { scheduleReconnect() }
        failPending(StoreError(.unavailable, "redis connection \(lost ? "lost" : "dropped"): \(reason)"))
    }

    /// Closes the stream and forgets the parser; no event from them arrives after this.
    private func detach() {
        stream?.close()
        stream = nil
        parser?.close()
        parser = nil
        streamReady = false
    }

    private func failPending(_ error: StoreError) {
        let commands = pending[head...]
        pending = []
        head = 0
        for command in commands { command.finish(.failure(error)) }
    }

    /// Closes the connection and fails every pending command (`.unavailable`); later `send`s
    /// fail the same way. Idempotent.
    func close() {
        guard state != .closed else { return }
        state = .closed
        reconnectTimer?.cancel()
        reconnectTimer = nil
        detach()
        failPending(StoreError(.unavailable, "redis store closed"))
        failHeld(StoreError(.unavailable, "redis store closed"))
    }
}

/// Carries a loop-confined value (a completion closure) into a task posted to its loop.
/// `@unchecked Sendable`: the value is only used by that task, on the loop's thread.
struct RedisLoopBound<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}
