import Synchronization

/// Open connections per client address, for every loop at once and without a lock
/// (`limits.max_connections_per_client`). A slot holds `(client, count)`; a count of 0 frees it.
final class ConnectionCounts: Sendable {
    enum Verdict: Equatable {
        /// Counted: `closed` must follow.
        case counted
        /// Past the limit: refused, not counted. `count` is the client's open connections.
        case over(count: Int)
        /// No room in the table for this client: allowed, not counted (and so never uncounted:
        /// `PeerAddress.countedPerClient` stays false).
        case untracked
    }

    private let slots: AtomicSlots

    init(clients: Int) {
        slots = AtomicSlots(capacity: clients)
    }

    /// A connection from `client` opens: counted unless it would be more than `limit` (≥ 1; with
    /// `force`, counted anyway — a dry run counts what it would have refused, so its numbers
    /// stay true — and reported `.over`).
    func opened(_ client: ClientKey, limit: Int, force: Bool = false) -> Verdict {
        let key = client.hash
        for _ in 0..<4 {
            switch slots.lookup(client, isFree: { $0.second == 0 }) {
            case .found(let i, var held):
                while held.first == key {
                    let n = Int(held.second)
                    if n >= limit && !force { return .over(count: n) }
                    let r = slots.exchange(i, held, WordPair(first: key, second: held.second + 1))
                    if r.exchanged { return n >= limit ? .over(count: n) : .counted }
                    held = r.original
                }
            case .free(let i, let held):
                // (Two loops may claim two slots for one new client at the same instant; its count
                // is then split in two and it may reach twice the limit. Rare, and only generous.)
                if slots.exchange(i, held, WordPair(first: key, second: 1)).exchanged { return .counted }
            case .full:
                return .untracked
            }
        }
        return .untracked
    }

    /// A connection counted by `opened` closed.
    func closed(_ client: ClientKey) {
        guard case .found(let i, var held) = slots.lookup(client, isFree: { _ in false }) else { return }
        while held.first == client.hash && held.second > 0 {
            let r = slots.exchange(i, held, WordPair(first: client.hash, second: held.second - 1))
            if r.exchanged { return }
            held = r.original
        }
    }

    /// The client's open connections (tests).
    func count(_ client: ClientKey) -> Int {
        guard case .found(_, let held) = slots.lookup(client, isFree: { _ in false }) else { return 0 }
        return Int(held.second)
    }
}
