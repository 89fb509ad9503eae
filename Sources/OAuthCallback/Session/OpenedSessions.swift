import ProxyCore

/// Session cookies already opened, per event loop: in session mode every request of a
/// signed-in user carries the same cookie, and opening it (Base64, AES-256-GCM, JSON) was
/// most of what session mode cost a request (bench/session).
///
/// Caching changes nothing a request can observe: the key is the exact cookie text (names and
/// values: a value opens only under the name it was sealed for), whose
/// content is sealed and never changes (a new session is a new cookie), the expiry is still
/// checked on every use, and a cookie that does not open is never cached (junk cannot push
/// real sessions out). A new configuration (another secret) builds a new layer and so a new
/// cache. Each loop touches only its own table, on its own thread: no lock.
final class OpenedSessions: @unchecked Sendable {
    /// Entries per loop; a full table is emptied (cheaper than tracking use, and refilled
    /// at one open per active user).
    static let capacity = 4_096

    private final class Table {
        var sessions: [String: ProxySession] = [:]
    }

    /// One table per possible loop (`loops` is at most 256), made up front so that no loop
    /// ever writes to the array itself.
    private let tables: [Table] = (0..<256).map { _ in Table() }

    /// The session for `key` (a request's session cookie text), opening it with `open` on a
    /// miss. Call on `loop`'s thread.
    func session(for key: String, on loop: EventLoop, now: Int64, open: () -> ProxySession?) -> ProxySession? {
        let table = tables[loop.index & 255]
        if let cached = table.sessions[key] {
            if now < cached.expiresAt { return cached }
            table.sessions[key] = nil
            return nil
        }
        guard let opened = open() else { return nil }
        if table.sessions.count >= Self.capacity { table.sessions.removeAll(keepingCapacity: true) }
        table.sessions[key] = opened
        return opened
    }

    /// Sessions held for `loop` (tests).
    func count(on loop: EventLoop) -> Int { tables[loop.index & 255].sessions.count }
}
