import CHiredis
import ProxyCore
#if canImport(Glibc)
import Glibc
#endif

/// A Redis reply, copied out of hiredis's reply object (which lives only during the callback).
enum RedisReply: Equatable {
    case string([UInt8])
    case status(String)
    case integer(Int64)
    case null
    case error(String)
    case array([RedisReply])

    init(_ reply: UnsafePointer<redisReply>) {
        let r = reply.pointee
        switch r.type {
        case REDIS_REPLY_STRING:
            self = .string(r.str.map { Array(UnsafeRawBufferPointer(start: $0, count: r.len)) } ?? [])
        case REDIS_REPLY_STATUS:
            self = .status(r.str.map { String(decoding: UnsafeRawBufferPointer(start: $0, count: r.len), as: UTF8.self) } ?? "")
        case REDIS_REPLY_ERROR:
            self = .error(r.str.map { String(decoding: UnsafeRawBufferPointer(start: $0, count: r.len), as: UTF8.self) } ?? "")
        case REDIS_REPLY_INTEGER:
            self = .integer(Int64(r.integer))
        case REDIS_REPLY_ARRAY:
            var items: [RedisReply] = []
            for i in 0..<r.elements {
                if let e = r.element[i] { items.append(RedisReply(e)) } else { items.append(.null) }
            }
            self = .array(items)
        default:
            self = .null
        }
    }
}

/// What one loop's connection needs to know (a copy of the store's configuration).
struct RedisConnectionSettings: Sendable {
    var host: String
    var port: Int
    var username: String?
    var password: String?
    var database: Int
    var commandTimeout: UInt64
    var backoffMin: UInt64
    var backoffMax: UInt64
    /// For log lines: the URL without its password.
    var redactedURL: String
}

/// One command waiting for its reply. hiredis holds it (retained, through `privdata`) from
/// `redisAsyncCommandArgv` until its reply callback, which hiredis runs exactly once: with the
/// reply, or with NULL when the context goes away. `done` makes the completion run once even
/// when we fail the command ourselves first (timeout, drop).
final class RedisCommand {
    let id: UInt64
    private var completion: ((Result<RedisReply, StoreError>) -> Void)?
    var timer: TimerHandle?
    /// Weak: during the connection's `close()` (or deinit) hiredis may still call back.
    weak var connection: RedisConnection?

    init(id: UInt64, connection: RedisConnection, completion: @escaping (Result<RedisReply, StoreError>) -> Void) {
        self.id = id
        self.connection = connection
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
        guard let completion else { return }
        self.completion = nil
        timer?.cancel()
        timer = nil
        completion(result)
    }
}

/// The single Swift owner of one loop's `redisAsyncContext`, and the adapter that drives it
/// with that loop: hiredis's `ev.addRead/delRead/addWrite/delWrite/cleanup` hooks become one
/// `FDWatch` (the socket stays hiredis's: it closes it in `redisFree`, after `cleanup`, where
/// we cancel the watch), readiness becomes `redisAsyncHandleRead/Write`, and timeouts and
/// reconnect backoff are loop timers. Nothing here blocks (see `RedisStore` for DNS).
///
/// States: `idle` (never used) → `connecting` (AUTH/SELECT pipelined, user commands queue
/// behind them in hiredis, each under its own timeout) → `ready`; any failure → `backoff`
/// (no context; commands fail at once with `.unavailable`) → timer → `connecting` …
///
/// hiredis frees the context by itself on a socket error or EOF (running pending callbacks
/// with NULL, then `cleanup`): `cleanup` is therefore the one place that learns the context
/// is gone. When *we* drop it (timeout, failed handshake, close) we detach first — clear the
/// hooks, cancel the watch — then `redisAsyncFree`, so no hook ever reaches a half-torn-down
/// connection.
///
/// Loop-confined: created, used and closed on its loop's thread only (asserted).
final class RedisConnection {
    enum State { case idle, connecting, ready, backoff, closed }

    let loop: EventLoop
    private let settings: RedisConnectionSettings
    private let logger: Logger?
    private(set) var state = State.idle
    private var context: UnsafeMutablePointer<redisAsyncContext>?
    private var watch: FDWatch?
    private var wantRead = false
    private var wantWrite = false
    private var pending: [UInt64: RedisCommand] = [:]
    private var nextID: UInt64 = 0
    private var backoff: UInt64
    private var reconnectTimer: TimerHandle?
    /// Handshake commands still unanswered in `connecting`.
    private var handshakeLeft = 0
    /// The last reason the context went away (hiredis's error text), for the log.
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
        guard state == .connecting || state == .ready, context != nil else {
            let why = state == .closed ? "redis store closed" : "redis unavailable (reconnecting): \(lastError)"
            post(.failure(StoreError(.unavailable, why)), completion)
            return
        }
        issue(args, completion)
    }

    /// Number of commands waiting for a reply (tests, metrics).
    var pendingCount: Int { pending.count }

    private func issue(_ args: [[UInt8]], _ completion: @escaping (Result<RedisReply, StoreError>) -> Void) {
        guard let ac = context else {
            post(.failure(StoreError(.unavailable, "redis unavailable")), completion)
            return
        }
        nextID &+= 1
        let command = RedisCommand(id: nextID, connection: self, completion: completion)
        let privdata = Unmanaged.passRetained(command).toOpaque()
        let rc = Self.withArgv(args) { argc, argv, lengths in
            redisAsyncCommandArgv(ac, { ac, reply, privdata in
                let command = Unmanaged<RedisCommand>.fromOpaque(privdata!).takeRetainedValue()
                let result: Result<RedisReply, StoreError>
                if let reply {
                    result = .success(RedisReply(reply.assumingMemoryBound(to: redisReply.self)))
                } else {
                    var why = "redis connection lost"
                    if let ac, ac.pointee.err != 0, let s = ac.pointee.errstr { why += ": " + String(cString: s) }
                    result = .failure(StoreError(.unavailable, why))
                }
                command.connection?.completed(command)
                command.finish(result)
            }, privdata, argc, argv, lengths)
        }
        guard rc == REDIS_OK else {
            // Not registered: hiredis will never call back, so the reference is ours to drop.
            Unmanaged<RedisCommand>.fromOpaque(privdata).release()
            post(.failure(StoreError(.unavailable, "redis connection is closing")), completion)
            return
        }
        pending[command.id] = command
        let timeout = settings.commandTimeout
        command.timer = loop.scheduleTimer(after: timeout) { [weak self, weak command] in
            guard let self, let command, !command.done else { return }
            command.timer = nil
            self.completed(command)
            // Replies are matched to commands by order: with one missing, the connection is
            // unusable. Drop it (the others on it fail `.unavailable`, a new connection is
            // made after backoff), then report this one as timed out.
            // (Taken out first: freeing the context runs its hiredis callback with NULL.)
            let completion = command.take()
            self.drop(reason: "command timed out after \(timeout / 1_000_000) ms")
            completion?(.failure(StoreError(.timeout, "no reply from redis within \(timeout / 1_000_000) ms")))
        }
    }

    /// A command got its answer (or was failed by us): it no longer counts as pending.
    fileprivate func completed(_ command: RedisCommand) {
        pending.removeValue(forKey: command.id)
    }

    /// Calls `body` with C views of `args`: one contiguous buffer, explicit lengths (binary-safe).
    private static func withArgv(_ args: [[UInt8]],
                                 _ body: (Int32, UnsafeMutablePointer<UnsafePointer<CChar>?>, UnsafePointer<Int>) -> Int32) -> Int32 {
        var flat: [UInt8] = []
        flat.reserveCapacity(args.reduce(1) { $0 + $1.count })
        var offsets: [Int] = []
        for a in args {
            offsets.append(flat.count)
            flat.append(contentsOf: a)
        }
        flat.append(0)  // never empty, so every argument has a valid (possibly zero-length) address
        let lengths = args.map(\.count)
        return flat.withUnsafeBufferPointer { buf in
            let base = UnsafeRawPointer(buf.baseAddress!).assumingMemoryBound(to: CChar.self)
            var argv: [UnsafePointer<CChar>?] = offsets.map { base + $0 }
            return argv.withUnsafeMutableBufferPointer { argvBuf in
                lengths.withUnsafeBufferPointer { lenBuf in
                    body(Int32(args.count), argvBuf.baseAddress!, lenBuf.baseAddress!)
                }
            }
        }
    }

    /// Delivers a failure from a later loop task (never inside the caller's call).
    private func post(_ result: Result<RedisReply, StoreError>, _ completion: @escaping (Result<RedisReply, StoreError>) -> Void) {
        let bound = RedisLoopBound(completion)
        loop.execute { bound.value(result) }
    }

    // MARK: Connecting

    private func connect() {
        reconnectTimer = nil
        guard state != .closed else { return }
        guard let ac = redisAsyncConnect(settings.host, Int32(settings.port)) else {
            failedToConnect("out of memory")
            return
        }
        if ac.pointee.err != 0 {
            let why = ac.pointee.errstr.map { String(cString: $0) } ?? "connect failed"
            redisAsyncFree(ac)
            failedToConnect(why)
            return
        }
        let me = Unmanaged.passUnretained(self).toOpaque()
        ac.pointee.data = me
        ac.pointee.ev.data = me
        ac.pointee.ev.addRead = { me in RedisConnection.from(me).setInterest(read: true, write: nil) }
        ac.pointee.ev.delRead = { me in RedisConnection.from(me).setInterest(read: false, write: nil) }
        ac.pointee.ev.addWrite = { me in RedisConnection.from(me).setInterest(read: nil, write: true) }
        ac.pointee.ev.delWrite = { me in RedisConnection.from(me).setInterest(read: nil, write: false) }
        ac.pointee.ev.cleanup = { me in RedisConnection.from(me).contextFreed() }
        redisAsyncSetConnectCallback(ac) { ac, status in
            guard let me = ac?.pointee.data else { return }
            let connection = RedisConnection.from(me)
            if status == REDIS_OK {
                connection.connected()
            } else {
                // hiredis frees the context right after this (then `cleanup`).
                connection.lastError = ac?.pointee.errstr.map { String(cString: $0) } ?? "connect failed"
                connection.state = .backoff
            }
        }
        redisAsyncSetDisconnectCallback(ac) { ac, status in
            guard let me = ac?.pointee.data else { return }
            let connection = RedisConnection.from(me)
            connection.lastError = ac?.pointee.errstr.map { String(cString: $0) } ?? "disconnected"
            if connection.state != .closed { connection.state = .backoff }
            _ = status
        }
        do {
            watch = try loop.watch(fd: ac.pointee.c.fd, readable: false, writable: false) { [unowned self] readable, writable in
                self.ready(readable: readable, writable: writable)
            }
        } catch {
            ac.pointee.ev = .init()
            ac.pointee.data = nil
            ac.pointee.onConnect = nil
            ac.pointee.onDisconnect = nil
            redisAsyncFree(ac)
            failedToConnect("cannot watch the socket: \(error)")
            return
        }
        context = ac
        state = .connecting
        // hiredis asked for write interest (connect in progress) before the watch existed.
        wantWrite = true
        watch?.update(readable: wantRead, writable: wantWrite)
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
        handshakeLeft = steps.count
        for (what, step) in steps {
            issue(step) { [weak self] result in
                guard let self else { return }
                switch result {
                case .success(.error(let message)):
                    // Redis's own text (WRONGPASS…, NOAUTH…) never echoes the password.
                    self.lastError = "\(what) refused: \(message)"
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

    private func connected() {
        becomeReadyIfDone()
    }

    private func becomeReadyIfDone() {
        guard state == .connecting, handshakeLeft == 0,
              let ac = context, ac.pointee.c.flags & REDIS_CONNECTED != 0 else { return }
        state = .ready
        backoff = settings.backoffMin
        if outageLogged {
            logger?.info("redis store reconnected", ["redis": settings.redactedURL, "loop": String(loop.index)])
        }
        outageLogged = false
        lastError = ""
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
        }
        reconnectTimer?.cancel()
        let delay = backoff
        backoff = min(backoff * 2, settings.backoffMax)
        reconnectTimer = loop.scheduleTimer(after: delay) { [weak self] in
            guard let self, self.state == .backoff else { return }
            self.connect()
        }
    }

    // MARK: Event adapter

    private static func from(_ me: UnsafeMutableRawPointer?) -> RedisConnection {
        Unmanaged<RedisConnection>.fromOpaque(me!).takeUnretainedValue()
    }

    private func setInterest(read: Bool?, write: Bool?) {
        if let read { wantRead = read }
        if let write { wantWrite = write }
        watch?.update(readable: wantRead, writable: wantWrite)
    }

    private func ready(readable: Bool, writable: Bool) {
        // Each call may free the context (then `cleanup` has set `context` to nil).
        if writable, let ac = context { redisAsyncHandleWrite(ac) }
        if readable, let ac = context { redisAsyncHandleRead(ac) }
    }

    /// hiredis is freeing the context (error, EOF, failed connect): the socket closes next.
    private func contextFreed() {
        watch?.cancel()
        watch = nil
        wantRead = false
        wantWrite = false
        context = nil
        failPending(StoreError(.unavailable, "redis connection lost: \(lastError)"))
        if state != .closed { scheduleReconnect() }
    }

    // MARK: Dropping

    /// Gives up on the current context: fails every pending command, frees the context (even
    /// from inside a hiredis callback: hiredis then frees it when the callback returns) and
    /// reconnects after backoff.
    private func drop(reason: String) {
        guard let ac = detach() else { return }
        lastError = reason
        if state != .closed { scheduleReconnect() }
        failPending(StoreError(.unavailable, "redis connection dropped: \(reason)"))
        redisAsyncFree(ac)
    }

    /// Unhooks the context from us (hooks, callbacks, watch) and hands it back for freeing.
    private func detach() -> UnsafeMutablePointer<redisAsyncContext>? {
        guard let ac = context else { return nil }
        context = nil
        ac.pointee.ev.addRead = nil
        ac.pointee.ev.delRead = nil
        ac.pointee.ev.addWrite = nil
        ac.pointee.ev.delWrite = nil
        ac.pointee.ev.cleanup = nil
        ac.pointee.ev.data = nil
        ac.pointee.data = nil
        ac.pointee.onConnect = nil
        ac.pointee.onDisconnect = nil
        watch?.cancel()
        watch = nil
        wantRead = false
        wantWrite = false
        return ac
    }

    private func failPending(_ error: StoreError) {
        let commands = pending.values.sorted { $0.id < $1.id }
        pending.removeAll()
        for command in commands { command.finish(.failure(error)) }
    }

    /// Frees the context and fails every pending command (`.unavailable`); later `send`s fail
    /// the same way. Idempotent.
    func close() {
        guard state != .closed else { return }
        state = .closed
        reconnectTimer?.cancel()
        reconnectTimer = nil
        let ac = detach()
        failPending(StoreError(.unavailable, "redis store closed"))
        if let ac { redisAsyncFree(ac) }
    }
}

/// Carries a loop-confined value (a completion closure) into a task posted to its loop.
/// `@unchecked Sendable`: the value is only used by that task, on the loop's thread.
struct RedisLoopBound<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}
