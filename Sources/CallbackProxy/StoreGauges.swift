import OAuthCallback
import ProxyCore
import Synchronization

/// The store's state, computed at scrape time. How full the in-memory store is: when it is
/// full every callback is refused (503, it never evicts a live entry), so operators alert on
/// the ratio before that. With Sentinel, how often the master moved and where it is now.
/// Registered once; a reload points it at the store of the new generation (all 0 when the
/// store is of the other kind or there are no providers).
final class StoreGauges: Sendable {
    private let current = Mutex<MemoryStore?>(nil)
    private let sentinel = Mutex<RedisSentinel?>(nil)

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
    }

    func watch(_ store: MemoryStore?, sentinel: RedisSentinel? = nil) {
        current.withLock { $0 = store }
        self.sentinel.withLock { $0 = sentinel }
    }
}
