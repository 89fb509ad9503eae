import OAuthCallback
import ProxyCore
import Synchronization

/// How full the in-memory store is, computed at scrape time. When it is full every callback
/// is refused (503, it never evicts a live entry), so operators alert on the ratio before that.
/// Registered once; a reload points it at the store of the new generation (all 0 when the
/// store is Redis or there are no providers).
final class MemoryStoreGauges: Sendable {
    private let current = Mutex<MemoryStore?>(nil)

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
    }

    func watch(_ store: MemoryStore?) {
        current.withLock { $0 = store }
    }
}
