import ProxyCore

/// What the store is, as the configuration says it (`store`, `store_*`): parsed once, by the
/// configuration loader, into the values the store is built from. A reload compares the old
/// spec with the new one: equal specs keep the running store (the memory store's entries live
/// on; a Redis store keeps its connections); anything else builds a new one.
public enum StoreSpec: Sendable, Equatable {
    /// In-process (one instance only), bounded at `maxBytes` (`store_max_memory`).
    case memory(maxBytes: UInt64)
    /// Redis, shared by several instances.
    case redis(RedisSpec)

    /// `store_max_memory`'s default: 128 MiB.
    public static let defaultMaxMemory: UInt64 = 128 << 20
    /// The embedded default: `store: memory`.
    public static let defaultMemory = StoreSpec.memory(maxBytes: defaultMaxMemory)

    public var redis: RedisSpec? {
        if case .redis(let spec) = self { spec } else { nil }
    }

    /// `memory` or `redis`, as metrics label the store.
    public var kind: String {
        switch self {
        case .memory: "memory"
        case .redis: "redis"
        }
    }
}

/// A Redis store: where its servers are, how to log in and speak TLS to them, and how many
/// replicas a replay-guard write must reach.
public struct RedisSpec: Sendable, Equatable {
    /// Where the servers are. The URLs carry no credentials (`auth` has them), so that a
    /// password given outside the URL (`store_password_*`) and one inside it are one value.
    public enum Topology: Sendable, Equatable {
        /// `redis://` or `rediss://`: one server.
        case single(RedisURL)
        /// `redis+sentinel://` or `rediss+sentinel://`: the master found through sentinels,
        /// which have their own password and may speak TLS themselves.
        case sentinel(RedisSentinelURL, Sentinels)
        /// `redis+cluster://` or `rediss+cluster://`: a Redis Cluster found through seed nodes.
        case cluster(RedisClusterURL)
    }

    /// The sentinels' own settings (`store_sentinel_*`), apart from the master's.
    public struct Sentinels: Sendable, Equatable {
        /// `requirepass` in sentinel.conf, if they have one.
        public var password: Secret?
        /// They speak TLS too, with `RedisSpec.tls`'s trust and client certificate
        /// (`rediss+sentinel://` only).
        public var tls: Bool

        public init(password: Secret? = nil, tls: Bool = false) {
            self.password = password
            self.tls = tls
        }
    }

    /// Replicas a replay-guard write must reach (`WAIT`; 0: none) and how long to wait for them.
    public struct Wait: Sendable, Equatable {
        public var replicas: Int
        public var timeoutMS: Int

        public init(replicas: Int = 0, timeoutMS: Int = 100) {
            self.replicas = replicas
            self.timeoutMS = timeoutMS
        }
    }

    public var topology: Topology
    /// The data nodes' credentials (with Sentinel, the master's; with Cluster, every node's).
    public var auth: RedisAuth
    /// Trust and client certificate when the topology speaks TLS (`store_tls_*`); the name
    /// checked is never configured here. The default when it does not.
    public var tls: UpstreamTLSSettings
    public var wait: Wait

    public init(_ topology: Topology, auth: RedisAuth = RedisAuth(), tls: UpstreamTLSSettings = UpstreamTLSSettings(),
                wait: Wait = Wait()) {
        self.topology = topology
        self.auth = auth
        self.tls = tls
        self.wait = wait
    }

    /// Whether the data nodes are spoken to over TLS (`rediss…://`).
    public var usesTLS: Bool {
        switch topology {
        case .single(let url): url.tls
        case .sentinel(let url, _): url.tls
        case .cluster(let url): url.tls
        }
    }
}

/// A Redis login: `AUTH password`, or `AUTH username password` for an ACL user.
public struct RedisAuth: Sendable, Equatable {
    public var username: String?
    public var password: Secret?

    public init(username: String? = nil, password: Secret? = nil) {
        self.username = username
        self.password = password
    }
}
