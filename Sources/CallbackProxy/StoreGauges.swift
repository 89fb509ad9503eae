import OAuthCallback
import ProxyCore
import Synchronization

/// The store's state, computed at scrape time. How full the in-memory store is: when it is
/// full every callback is refused (503, it never evicts a live entry), so operators alert on
/// the ratio before that. With Sentinel, how often the master moved and where it is now; with
/// Cluster, the redirections followed, the slot-map refreshes and what the last map said.
/// Registered once; a reload points it at the store of the new generation (all 0 when the
/// store is of the other kind or there are no providers).
final class StoreGauges: Sendable {
    private let current = Mutex<MemoryStore?>(nil)
    private let sentinel = Mutex<RedisSentinel?>(nil)
    private let cluster = Mutex<RedisCluster?>(nil)

    init(registry: MetricsRegistry) {
        registry.gauge("callback_proxy_memory_store_entries", "Entries in the in-memory store (live, and expired ones not yet swept).") {
            [self] in Double(current.withLock { $0?.entryCount ?? 0 })
        }
        registry.gauge("callback_proxy_memory_store_bytes", "Bytes the in-memory store accounts to its entries.") {
            [self] in Double(current.withLock { $0?.byteCount ?? 0 })
        }
        registry.gauge("callback_proxy_memory_store_limit_bytes", "The in-memory store's bound (store_max_memory).") {
            [self] in Double(current.withLock { $0?.limits.maxBytes ?? 0 })
        }
        registry.counter("callback_proxy_store_failovers_total",
                         "Changes of the Redis master's address seen through the sentinels (redis+sentinel:// only).") {
            [self] in Double(sentinel.withLock { $0?.failovers ?? 0 })
        }
        registry.info("callback_proxy_store_master_info", "The Redis master last verified (redis+sentinel:// only).",
                      label: "address") { [self] in sentinel.withLock { $0?.master } }
        // Registered (at 0) whatever the store, like the others.
        _ = Self.clusterCounters(registry)
        registry.gauge("callback_proxy_store_cluster_primaries",
                       "Primaries in the last Redis Cluster slot map fetched (redis+cluster:// only).") {
            [self] in Double(cluster.withLock { $0?.primaries ?? 0 })
        }
        registry.gauge("callback_proxy_store_cluster_slots_covered",
                       "Hash slots with a primary in the last Redis Cluster slot map fetched; 16384 when whole (redis+cluster:// only).") {
            [self] in Double(cluster.withLock { $0?.slotsCovered ?? 0 })
        }
    }

    /// The cluster's counters, kept in the registry (the same series for every store built,
    /// so a reload does not reset them).
    static func clusterCounters(_ registry: MetricsRegistry) -> RedisCluster.Counters {
        let redirects = registry.counter("callback_proxy_store_redirects_total",
                                         "Redis Cluster redirections followed, by kind (redis+cluster:// only).", labels: ["kind"])
        let refreshes = registry.counter("callback_proxy_store_cluster_refreshes_total",
                                         "Redis Cluster slot-map fetches started, by every loop (redis+cluster:// only).")
        return RedisCluster.Counters(moved: redirects.labels("moved"), ask: redirects.labels("ask"), refreshes: refreshes.labels())
    }

    func watch(_ store: MemoryStore?, sentinel: RedisSentinel? = nil, cluster: RedisCluster? = nil) {
        current.withLock { $0 = store }
        self.sentinel.withLock { $0 = sentinel }
        self.cluster.withLock { $0 = cluster }
    }
}
