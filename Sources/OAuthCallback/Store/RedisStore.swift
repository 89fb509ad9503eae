import ProxyCore
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The shared store for several proxy instances: Redis, over plain TCP or TLS (`rediss://`),
/// driven by the proxy's own event loops (no loop thread ever waits on Redis).
///
/// - **One connection per event loop**, made on the loop's first use and reused; a request's
///   store calls run entirely on its loop (`RedisConnection`).
/// - **Atomic commands**: `setIfAbsent` → `SET k v NX EX ttl` (OK vs nil); `getAndDelete` →
///   `GETDEL k` (Redis ≥ 6.2 — Debian bookworm ships 7.0; older servers answer "unknown
///   command", which fails `.unavailable`: fail closed, never a non-atomic GET then DEL);
///   `get` → `GET`; `set` → `SET k v EX ttl`; `replace` → `SET k v XX EX ttl`, or with an
///   expected value a compare-and-set script (`EVAL`: an ACL user needs `+eval`); `delete` →
///   `DEL` (1 vs 0). Values are sent with
///   explicit lengths, so they are binary-safe.
/// - **Keys** get `keyPrefix` (default `cbp:`) in front, and are validated like the memory
///   store's (1…512 bytes, TTL 1 s…30 days) so both stores refuse the same bugs.
/// - **Failure semantics (fail closed)**: every command has a timeout (a loop timer): no reply
///   in `commandTimeout` fails it `.timeout` and drops the connection (replies would be out of
///   order); a lost connection fails its pending commands `.unavailable`; while a connection
///   is down, calls fail **at once** with `.unavailable` — nothing is queued waiting for
///   Redis. Reconnect is automatic, with exponential backoff (`backoffMin` doubling to
///   `backoffMax`) on loop timers. Redis errors map to `.unavailable` (`OOM` to
///   `.capacityExceeded`).
/// - **AUTH** (`AUTH password`, or `AUTH user password` for an ACL user) and **SELECT db** are
///   pipelined on connect (after the TLS handshake with `rediss://`). The password is never
///   logged nor put in an error.
/// - **TLS** (`rediss://`): the server's certificate is always verified (the system CA store,
///   or `Configuration.tls`'s CA file) and its name checked against the URL's host (an IP
///   address against IP SANs); SNI is the host when it is a name. A failed verification fails
///   the connection like a refused one: callers get `.unavailable`, the log says why.
/// - **DNS**: a `HostResolver` (the upstream's): the name is looked up at set-up, then every
///   10 s on its own thread (every second while it has never resolved), never on a loop; each
///   connection attempt takes the current address. A Redis started after the proxy, or moved
///   to another address, is followed without a reload.
/// - **Sentinel** (`RedisSpec.Topology.sentinel`): the master's address comes from the sentinels,
///   asked again at every reconnection, and is verified with `ROLE` before use; a master that
///   goes away or answers `READONLY`/`MASTERDOWN`/`LOADING` is dropped and looked up again
///   (`RedisSentinel`). Meanwhile callers fail `.unavailable`, as with any outage.
/// - **Cluster** (`RedisSpec.Topology.cluster`): each loop keeps the slot map (`CLUSTER SLOTS`)
///   and one connection per primary, sends each command to its key's slot's primary and
///   follows `MOVED`/`ASK` (`RedisClusterRouter`, `RedisCluster`); a node whose connection
///   fails makes its commands fail `.unavailable` at once while the map is fetched again.
public final class RedisStore: Store {
    public struct Configuration: Sendable {
        /// Where the servers are, the login and `WAIT`, as configured. Its `tls` file settings
        /// are not read here: `tls` is the client built from them.
        public var spec: RedisSpec
        /// Prepended to every key; separates this deployment's keys from anything else in the db.
        public var keyPrefix = "cbp:"
        /// No reply within this (nanoseconds) fails the command `.timeout`. Default 1 s.
        public var commandTimeout: UInt64 = 1_000_000_000
        /// Reconnect delays (nanoseconds): the first retry after `backoffMin`, doubling up to
        /// `backoffMax` (2 s for one server, 500 ms with Sentinel or Cluster: see `init`).
        public var backoffMin: UInt64 = 50_000_000
        public var backoffMax: UInt64 = 2_000_000_000
        public var maxKeyBytes = 512
        public var maxTTLSeconds: Int64 = 30 * 24 * 3_600
        /// For a TLS topology: trust and client certificate, built where their files are read
        /// (`tlsClient(for:)`, at set-up). nil: the system CA store, no client certificate.
        /// Unused without TLS.
        public var tls: UpstreamTLSClient? = nil
        /// How long one sentinel may take to answer, connect included (nanoseconds; the spec
        /// asks for a few hundred milliseconds, then the next sentinel is tried).
        public var sentinelTimeout: UInt64 = 300_000_000
        /// How long one node may take to answer `CLUSTER SLOTS`, connect included (nanoseconds).
        public var clusterQueryTimeout: UInt64 = 300_000_000
        /// At most one slot-map refresh per loop in this long (nanoseconds).
        public var clusterRefreshInterval: UInt64 = 100_000_000
        /// Redirections (`MOVED`, `ASK`) followed for one command before it fails `.unavailable`.
        public var clusterMaxRedirects = 2
        /// Where redirections and refreshes are counted (the metrics registry's, when wired).
        public var clusterCounters = RedisCluster.Counters()

        /// With Sentinel or Cluster, reconnects back off at most 500 ms. Sentinel: a failover
        /// ends within seconds and each attempt is one short query to a sentinel, so retrying
        /// often shortens the outage by up to a second for little load (with 1 s, the first
        /// success came ≈ 0.35 s after the sentinels named the new master). Cluster: a promoted
        /// replica is found by the map refresh, and a node that comes back is retried soon.
        public init(_ spec: RedisSpec, tls: UpstreamTLSClient? = nil, keyPrefix: String = "cbp:",
                    commandTimeout: UInt64 = 1_000_000_000) {
            self.spec = spec
            self.tls = tls
            self.keyPrefix = keyPrefix
            self.commandTimeout = commandTimeout
            if case .single = spec.topology {} else { backoffMax = 500_000_000 }
        }
    }

    public let configuration: Configuration
    private let settings: RedisConnectionSettings
    /// The URL's host, kept resolved off the loops (nil with Sentinel).
    private let resolver: HostResolver?
    /// With Sentinel: where the master is, and how often it moved (metrics).
    public let sentinel: RedisSentinel?
    /// With Cluster: the seeds, the counters and what the last slot map said (metrics).
    public let cluster: RedisCluster?
    /// How often the host name is looked up again.
    static let resolveInterval: UInt64 = 10_000_000_000
    private let prefix: [UInt8]
    private let logger: Logger?
    private let links = Mutex(Links())

    private struct Links {
        var byLoop: [Int: RedisLoopLink] = [:]
        var closed = false
    }

    /// The TLS client context for a `rediss://` store: verification always on (the CA file in
    /// `settings`, else the system store), the URL's host checked, no ALPN (Redis speaks none).
    /// Reads the certificate files now (blocking; at set-up). `settings.serverName` is ignored:
    /// the name checked is always the URL's host.
    public static func tlsClient(for url: RedisURL, _ settings: UpstreamTLSSettings = UpstreamTLSSettings()) throws(TLSSetupError) -> UpstreamTLSClient {
        var settings = settings
        settings.serverName = nil
        return try UpstreamTLSClient(settings, host: url.host, alpn: nil)
    }

    /// The TLS client context for `spec`, with its `tls` settings; nil without TLS. With
    /// Sentinel or Cluster its host is a placeholder: each connection checks the address
    /// announced (or a cluster seed's configured host).
    public static func tlsClient(for spec: RedisSpec) throws(TLSSetupError) -> UpstreamTLSClient? {
        guard spec.usesTLS else { return nil }
        return try tlsClient(for: spec.dataURL, spec.tls)
    }

    /// Does not connect: each loop connects on its first call. Resolves the host name now
    /// (blocking; call it at startup, not on a loop thread).
    public init(_ configuration: Configuration, logger: Logger? = nil) {
        self.configuration = configuration
        self.logger = logger
        let spec = configuration.spec
        let url = spec.dataURL
        var problem: String? = nil
        let redactedURL: String
        switch spec.topology {
        case .cluster(let seeds):
            resolver = nil
            sentinel = nil
            if seeds.seeds.isEmpty { problem = "no cluster node configured" }
            redactedURL = spec.clusterURL?.description ?? ""
        case .sentinel(let sentinelURL, let sentinels):
            resolver = nil
            sentinel = RedisSentinel(sentinelURL, password: sentinels.password?.value,
                                     tls: sentinels.tls ? configuration.tls : nil,
                                     queryTimeout: max(1_000_000, configuration.sentinelTimeout), logger: logger)
            if sentinelURL.sentinels.isEmpty { problem = "no sentinel configured" }
            redactedURL = spec.sentinelURL?.description ?? ""
        case .single:
            sentinel = nil
            redactedURL = url.description
            // Logs "redis name does not resolve" itself when it does not.
            let resolver = HostResolver(name: url.host, port: UInt16(clamping: url.port), interval: Self.resolveInterval,
                                        log: logger, role: "redis")
            self.resolver = resolver
            do {
                // An address needs no second look.
                if PeerAddress(text: url.host) == nil { try resolver.start() }
            } catch {
                logger?.error("cannot start the redis resolver thread; the name is looked up at set-up only",
                              ["error": error.description])
            }
        }
        var tls = configuration.tls
        if url.tls && tls == nil {
            do {
                tls = try Self.tlsClient(for: url)
            } catch {
                problem = "TLS set-up failed: \(error)"
                logger?.error("redis store TLS set-up failed; the store is unavailable",
                              ["redis": url.description, "error": error.description])
            }
        }
        settings = RedisConnectionSettings(
            resolver: resolver, username: url.username, password: url.password,
            database: url.database, tls: url.tls ? tls : nil, setupProblem: problem,
            commandTimeout: max(1_000_000, configuration.commandTimeout),
            backoffMin: max(1_000_000, configuration.backoffMin),
            backoffMax: max(configuration.backoffMin, configuration.backoffMax),
            redactedURL: redactedURL, sentinel: sentinel)
        let template = settings
        cluster = spec.clusterURL.map {
            RedisCluster($0, template: template, counters: configuration.clusterCounters,
                         queryTimeout: max(1_000_000, configuration.clusterQueryTimeout),
                         refreshInterval: configuration.clusterRefreshInterval,
                         maxRedirects: max(0, configuration.clusterMaxRedirects), logger: logger)
        }
        prefix = Array(configuration.keyPrefix.utf8)
    }

    deinit {
        close()
        resolver?.stop()
        sentinel?.stop()
        cluster?.stop()
    }

    // MARK: Store

    public func setIfAbsent(key: String, value: [UInt8], ttlSeconds: Int64, on loop: EventLoop,
                            _ completion: @escaping (Result<Bool, StoreError>) -> Void) {
        run(on: loop, key: key, ttlSeconds: ttlSeconds, completion) { k in
            [Array("SET".utf8), k, value, Array("NX".utf8), Array("EX".utf8), Array(String(ttlSeconds).utf8)]
        } map: { reply in
            switch reply {
            case .status: .success(true)     // OK
            case .null: .success(false)      // NX: the key was there
            default: nil
            }
        }
    }

    /// `SET NX`, then (when it stored the entry) `WAIT replicas timeout` on the same connection —
    /// to the same node, for a cluster: Redis's replication is asynchronous, and an entry the
    /// master acknowledged can be lost with it in a failover; `WAIT` says how many replicas
    /// have it. While `WAIT` blocks (normally one replication round trip), the commands behind
    /// it on that loop's connection wait too.
    public func setIfAbsentAcknowledged(key: String, value: [UInt8], ttlSeconds: Int64, on loop: EventLoop,
                                        _ completion: @escaping (Result<Bool, StoreError>) -> Void) {
        let replicas = configuration.spec.wait.replicas, timeout = configuration.spec.wait.timeoutMS
        guard replicas > 0 else { return setIfAbsent(key: key, value: value, ttlSeconds: ttlSeconds, on: loop, completion) }
        setIfAbsent(key: key, value: value, ttlSeconds: ttlSeconds, on: loop) { [self] result in
            guard case .success(true) = result else { return completion(result) }
            run(on: loop, key: key, ttlSeconds: ttlSeconds, completion) { _ in
                [Array("WAIT".utf8), Array(String(replicas).utf8), Array(String(timeout).utf8)]
            } map: { reply in
                guard case .integer(let acknowledged) = reply else { return nil }
                return acknowledged >= replicas ? .success(true)
                    : .failure(StoreError(.unavailable, "written to \(acknowledged) of the \(replicas) replicas store_wait_replicas asks for within \(timeout) ms"))
            }
        }
    }

    public func getAndDelete(key: String, on loop: EventLoop,
                             _ completion: @escaping (Result<[UInt8]?, StoreError>) -> Void) {
        run(on: loop, key: key, ttlSeconds: 1, completion) { k in [Array("GETDEL".utf8), k] } map: { reply in
            switch reply {
            case .string(let bytes): .success(bytes)
            case .null: .success(nil)
            default: nil
            }
        }
    }

    public func get(key: String, on loop: EventLoop,
                    _ completion: @escaping (Result<[UInt8]?, StoreError>) -> Void) {
        run(on: loop, key: key, ttlSeconds: 1, completion) { k in [Array("GET".utf8), k] } map: { reply in
            switch reply {
            case .string(let bytes): .success(bytes)
            case .null: .success(nil)
            default: nil
            }
        }
    }

    public func set(key: String, value: [UInt8], ttlSeconds: Int64, on loop: EventLoop,
                    _ completion: @escaping (Result<Void, StoreError>) -> Void) {
        run(on: loop, key: key, ttlSeconds: ttlSeconds, completion) { k in
            [Array("SET".utf8), k, value, Array("EX".utf8), Array(String(ttlSeconds).utf8)]
        } map: { reply in
            if case .status = reply { return .success(()) }
            return nil
        }
    }

    /// `SET k v XX EX ttl` without `expected`; with it, a compare-and-set in one script
    /// (`compareAndSet`): Redis runs a script atomically, and before 8.4 has no `SET … IFEQ`.
    public func replace(key: String, value: [UInt8], ttlSeconds: Int64, ifHolding expected: [UInt8]?, on loop: EventLoop,
                        _ completion: @escaping (Result<Bool, StoreError>) -> Void) {
        let ttl = Array(String(ttlSeconds).utf8)
        run(on: loop, key: key, ttlSeconds: ttlSeconds, completion) { k in
            guard let expected else { return [Array("SET".utf8), k, value, Array("XX".utf8), Array("EX".utf8), ttl] }
            return [Array("EVAL".utf8), Self.compareAndSet, Array("1".utf8), k, expected, value, ttl]
        } map: { reply in
            switch reply {
            case .status: .success(true)     // OK
            case .null: .success(false)      // absent, or holding something else
            default: nil
            }
        }
    }

    /// KEYS[1] is replaced by ARGV[2] with a TTL of ARGV[3] seconds if it holds ARGV[1]; the
    /// reply is `SET`'s OK, or nil (Lua's false). The script replicates as its effect (Redis ≥ 5).
    static let compareAndSet = Array("""
        if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[3]) end return false
        """.utf8)

    public func delete(key: String, on loop: EventLoop,
                       _ completion: @escaping (Result<Bool, StoreError>) -> Void) {
        run(on: loop, key: key, ttlSeconds: 1, completion) { k in [Array("DEL".utf8), k] } map: { reply in
            if case .integer(let n) = reply { return .success(n > 0) }
            return nil
        }
    }

    /// Closes every loop's connection, each on its own loop (pending commands fail
    /// `.unavailable`); later calls fail the same way. Idempotent; call it before stopping
    /// the loops.
    public func close() {
        let all = links.withLock { links -> [RedisLoopLink] in
            links.closed = true
            defer { links.byLoop.removeAll() }
            return Array(links.byLoop.values)
        }
        for link in all {
            link.loop.execute { link.close() }
        }
    }

    // MARK: Plumbing

    /// Validates, builds the command with the prefixed key, sends it on `loop`'s connection
    /// and maps the reply (`map` returns nil for a reply of an unexpected shape).
    private func run<T>(on loop: EventLoop, key: String, ttlSeconds: Int64,
                        _ completion: @escaping (Result<T, StoreError>) -> Void,
                        command: ([UInt8]) -> [[UInt8]],
                        map: @escaping (RedisReply) -> Result<T, StoreError>?) {
        if let error = validate(key: key, ttlSeconds: ttlSeconds) {
            let bound = RedisLoopBound(completion)
            loop.execute { bound.value(.failure(error)) }
            return
        }
        let prefixed = prefix + Array(key.utf8)
        let args = command(prefixed)
        let send: () -> Void = { [self] in
            let link: RedisLoopLink
            switch self.link(for: loop) {
            case .success(let l):
                link = l
            case .failure(let error):
                let bound = RedisLoopBound(completion)
                loop.execute { bound.value(.failure(error)) }
                return
            }
            link.send(args, key: prefixed) { result in
                switch result {
                case .failure(let error):
                    completion(.failure(error))
                case .success(.error(let message)):
                    completion(.failure(Self.storeError(fromRedis: message)))
                case .success(let reply):
                    completion(map(reply) ?? .failure(StoreError(.unavailable, "unexpected redis reply \(Self.shape(reply))")))
                }
            }
        }
        if loop.inLoopThread {
            send()
        } else {
            // Off the contract (callers are on `loop`), but harmless: hop onto the loop.
            let bound = RedisLoopBound(send)
            loop.execute { bound.value() }
        }
    }

    /// This loop's connection (or cluster router), made on first use (on the loop's thread).
    private func link(for loop: EventLoop) -> Result<RedisLoopLink, StoreError> {
        let made = links.withLock { links -> (RedisLoopLink, RedisLoopLink?)? in
            guard !links.closed else { return nil }
            let existing = links.byLoop[loop.index]
            if let existing, existing.loop === loop { return (existing, nil) }
            // A different loop object under the same index (loops rebuilt, as in tests).
            let link = if let cluster {
                RedisLoopLink(loop: loop, route: .cluster(RedisClusterRouter(loop: loop, cluster: cluster,
                                                                             commandTimeout: settings.commandTimeout, logger: logger)))
            } else {
                RedisLoopLink(loop: loop, route: .single(RedisConnection(loop: loop, settings: settings, logger: logger)))
            }
            links.byLoop[loop.index] = link
            return (link, existing)
        }
        guard let (link, replaced) = made else { return .failure(StoreError(.unavailable, "redis store closed")) }
        if let replaced { replaced.loop.execute { replaced.close() } }
        return .success(link)
    }

    /// For `/readyz`, on `loop`'s thread: nil when the store can serve every key. With Cluster,
    /// every primary of the loop's slot map answers `PING` and every slot has a primary (one
    /// key's `GET` would test one primary of several); otherwise nil — the caller's own probe
    /// command says it. `done` runs on `loop`, never inside this call.
    public func probeCluster(on loop: EventLoop, _ done: @escaping (StoreError?) -> Void) {
        guard cluster != nil, case .success(let link) = link(for: loop), case .cluster(let router) = link.route else {
            let bound = RedisLoopBound(done)
            loop.execute { bound.value(nil) }
            return
        }
        router.probe(done)
    }

    private func validate(key: String, ttlSeconds: Int64) -> StoreError? {
        let length = key.utf8.count
        guard length > 0, length <= configuration.maxKeyBytes else {
            return StoreError(.invalidArgument, "key length \(length) outside 1...\(configuration.maxKeyBytes)")
        }
        guard ttlSeconds >= 1, ttlSeconds <= configuration.maxTTLSeconds else {
            return StoreError(.invalidArgument, "ttl \(ttlSeconds) s outside 1...\(configuration.maxTTLSeconds)")
        }
        return nil
    }

    static func storeError(fromRedis message: String) -> StoreError {
        let code: StoreError.Code = message.hasPrefix("OOM") ? .capacityExceeded : .unavailable
        return StoreError(code, "redis: \(message.prefix(200))")
    }

    private static func shape(_ reply: RedisReply) -> String {
        switch reply {
        case .string: "string"
        case .status: "status"
        case .integer: "integer"
        case .null: "nil"
        case .error: "error"
        case .array: "array"
        }
    }

}

/// One loop's connection (or, with Cluster, its router over one connection per primary) in
/// the store's table.
///
/// `@unchecked Sendable`: the table is shared by all loops (behind the store's mutex, which
/// guards only the table), but each link is only ever used on its own loop's thread — by store
/// calls made there, `close` tasks posted there, and its streams' events on that loop.
/// `RedisConnection` and `RedisClusterRouter` assert this.
private final class RedisLoopLink: @unchecked Sendable {
    /// One server's connection, or a router that sends each key to its slot's primary.
    enum Route {
        case single(RedisConnection)
        case cluster(RedisClusterRouter)
    }

    let loop: EventLoop
    let route: Route

    init(loop: EventLoop, route: Route) {
        self.loop = loop
        self.route = route
    }

    /// `key`: the key as sent (a cluster routes by its slot).
    func send(_ args: [[UInt8]], key: [UInt8], _ completion: @escaping (Result<RedisReply, StoreError>) -> Void) {
        switch route {
        case .single(let connection): connection.send(args, completion)
        case .cluster(let router): router.send(args, key: key, completion)
        }
    }

    func close() {
        switch route {
        case .single(let connection): connection.close()
        case .cluster(let router): router.close()
        }
    }
}
