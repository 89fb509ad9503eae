import CNgtcp2
import Synchronization

/// The ClientHellos that brought early data (0-RTT) recently, for GnuTLS's anti-replay check
/// (RFC 8446 §8): a second ClientHello with the same binder within the window gets its early
/// data rejected, and its requests wait for the handshake. Per process and shared by the loops;
/// another instance behind the same balancer does not see these, which is why early data serves
/// only what is safe to replay anyway (`EarlyData`). Bounded: when full, early data is refused
/// (fail closed) until entries expire.
final class QUICReplayCache: Sendable {
    /// Entries kept at most.
    static let capacity = 65_536

    private let seen = Mutex<[[UInt8]: Int]>([:])

    /// Records `key` until `expires` (seconds since the epoch, GnuTLS's window); false if it is
    /// already there (a replay) or the cache is full.
    func add(_ key: [UInt8], expires: Int, now: Int) -> Bool {
        seen.withLock { entries -> Bool in
            if let until = entries[key], until > now { return false }
            if entries.count >= Self.capacity {
                entries = entries.filter { $0.value > now }
                if entries.count >= Self.capacity { return false }
            }
            entries[key] = expires
            return true
        }
    }

    var count: Int { seen.withLock { $0.count } }
}

/// GnuTLS's anti-replay context, its add function backed by a `QUICReplayCache`. Lives as long
/// as the server (never freed).
final class QUICAntiReplay: @unchecked Sendable {
    let handle: gnutls_anti_replay_t
    let cache = QUICReplayCache()

    init?() {
        var h: gnutls_anti_replay_t?
        guard gnutls_anti_replay_init(&h) == 0, let h else { return nil }
        handle = h
        gnutls_anti_replay_set_ptr(h, Unmanaged.passUnretained(cache).toOpaque())
        gnutls_anti_replay_set_add_function(h) { ptr, expires, key, _ in
            guard let ptr, let key, let data = key.pointee.data else { return GNUTLS_E_DB_ERROR }
            let cache = Unmanaged<QUICReplayCache>.fromOpaque(ptr).takeUnretainedValue()
            let bytes = [UInt8](UnsafeBufferPointer(start: data, count: Int(key.pointee.size)))
            return cache.add(bytes, expires: Int(expires), now: Int(time(nil))) ? 0 : GNUTLS_E_DB_ENTRY_EXISTS
        }
    }
}
