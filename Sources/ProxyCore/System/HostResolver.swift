import CProxyLinux
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Keeps the addresses of a host name current: the upstream's (`http://app:3000`) and the
/// Redis store's (`redis://redis:6379/0`).
///
/// Resolved once when built, at set-up, so the first connection has addresses; then again
/// every `interval` on a thread of its own (`getaddrinfo` blocks, so never on a loop). A failed
/// lookup keeps the last good addresses: a DNS hiccup must not take the site down. While the
/// name has never resolved, it is retried every second (requests get 502, store calls
/// `.unavailable`) — a container started before its dependency's name exists catches up alone.
///
/// Loops read the addresses when they open a *new* connection (pooled connections are reused
/// without asking). When the set changes, each loop's upstream pool closes its idle
/// connections the next time it is used (see `UpstreamPool.take`), so traffic moves to the
/// new addresses without cutting a request in flight.
public final class HostResolver: Sendable {
    public typealias Lookup = @Sendable (_ name: String, _ port: UInt16) -> Result<[SocketAddress], LookupError>

    public let name: String
    public let port: UInt16
    /// What the name is for, in log lines: `upstream`, `redis`.
    public let role: String
    /// Nanoseconds between lookups; 0: only when built (and on a reload).
    public let interval: UInt64
    private let lookup: Lookup
    private let log: Logger?
    private let state = Mutex(State())
    private let changes = Atomic<UInt64>(0)
    private let cursor = Atomic<UInt>(0)
    private let stopped = Atomic<Bool>(false)
    /// Wakes the refresh thread early when stopping.
    private let wake: Int32

    private struct State {
        var addresses: [SocketAddress] = []
        var problem: LookupError?
        var threadStarted = false
        /// Addresses whose connection just failed, and until when (monotonic ns) they are
        /// passed over.
        var failedUntil: [SocketAddress: UInt64] = [:]
    }

    /// How long an address whose connection was refused or timed out is passed over (nginx's
    /// `fail_timeout`, 10 s by default). A dead replica behind a name then costs one failed
    /// attempt per 10 s, not one in every N requests.
    public static let failTimeout: UInt64 = 10_000_000_000

    /// Resolves `name` right away (blocking); a failure is logged and kept in `problem`.
    public init(name: String, port: UInt16, interval: UInt64, log: Logger?, role: String = "upstream",
                lookup: @escaping Lookup = { NameLookup.addresses(of: $0, port: $1) }) {
        self.name = name
        self.port = port
        self.role = role
        self.interval = interval
        self.lookup = lookup
        self.log = log
        wake = eventfd(0, Int32(EFD_CLOEXEC))
        refresh()
    }

    deinit {
        if wake >= 0 { close(wake) }
    }

    /// The current addresses, in the resolver's order (empty until the name resolves).
    public var addresses: [SocketAddress] { state.withLock { $0.addresses } }

    /// Why the last lookup failed; nil once one succeeded after it.
    public var problem: LookupError? { state.withLock { $0.problem } }

    /// Counts changes of the address set; pools compare it to drop connections to old addresses.
    var generation: UInt64 { changes.load(ordering: .relaxed) }

    /// The address for a new connection. `after` nil: the next one in round-robin order
    /// (spreads connections over all addresses); else the one following it (the next try
    /// after a connection to `after` failed). Addresses that failed within `failTimeout` are
    /// passed over while another is left; if every one failed, the round goes on regardless
    /// (trying beats refusing). Nil when the name has no address.
    public func address(after previous: SocketAddress?, now: UInt64 = 0) -> SocketAddress? {
        state.withLock { s in
            let count = s.addresses.count
            guard count > 0 else { return nil }
            let first: Int
            if let previous, let i = s.addresses.firstIndex(of: previous) {
                first = i + 1
            } else {
                first = Int(cursor.wrappingAdd(1, ordering: .relaxed).oldValue % UInt(count))
            }
            if !s.failedUntil.isEmpty {
                for k in 0..<count {
                    let candidate = s.addresses[(first + k) % count]
                    if (s.failedUntil[candidate] ?? 0) <= now { return candidate }
                }
            }
            return s.addresses[first % count]
        }
    }

    /// A connection to `address` was refused or timed out: pass it over for `failTimeout`.
    /// Returns whether it was not passed over already (log it then, not on every request).
    @discardableResult
    public func markFailed(_ address: SocketAddress, now: UInt64) -> Bool {
        state.withLock { s in
            guard s.addresses.contains(address) else { return false }
            let fresh = (s.failedUntil[address] ?? 0) <= now
            s.failedUntil[address] = now + Self.failTimeout
            return fresh
        }
    }

    /// How many addresses there are (the most connection attempts one request makes).
    var count: Int { state.withLock { $0.addresses.count } }

    /// Looks the name up now (blocking) and applies the answer. Returns the failure, if any.
    @discardableResult
    public func refresh() -> LookupError? {
        let answer = lookup(name, port)
        let (changed, recovered, addresses, failure): (Bool, Bool, [SocketAddress], LookupError?) = state.withLock { s in
            switch answer {
            case .success(let found):
                let changed = found != s.addresses
                let recovered = s.problem != nil
                s.addresses = found
                if changed { s.failedUntil = s.failedUntil.filter { found.contains($0.key) } }
                s.problem = nil
                return (changed, recovered, found, nil)
            case .failure(let error):
                let first = s.problem == nil
                s.problem = error
                return (false, false, s.addresses, first ? error : nil)
            }
        }
        let list = addresses.map(\.description).joined(separator: ",")
        if changed {
            changes.add(1, ordering: .relaxed)
            log?.info("\(role) addresses", ["name": name, "addresses": list])
        } else if recovered {
            log?.info("\(role) name resolves again", ["name": name, "addresses": list])
        }
        if let failure {
            // Logged when it starts failing, not on every retry.
            log?.warn("\(role) name does not resolve", [
                "name": name, "reason": failure.reason,
                "keeping": list.isEmpty ? "none" : list,
            ])
        }
        if case .failure(let error) = answer { return error }
        return nil
    }

    /// Starts the thread that looks the name up every `interval` (nothing when it is 0).
    public func start() throws(SystemError) {
        guard interval > 0, !state.withLock({ s in defer { s.threadStarted = true }; return s.threadStarted }) else { return }
        _ = try startThread { [self] in
            while !stopped.load(ordering: .relaxed) {
                // Unresolved: try again soon. Resolved: at the configured pace.
                let unresolved = state.withLock { $0.addresses.isEmpty }
                let wait = unresolved ? min(interval, 1_000_000_000) : interval
                var pfd = pollfd(fd: wake, events: Int16(POLLIN), revents: 0)
                _ = poll(&pfd, 1, Int32(clamping: wait / 1_000_000))
                if stopped.load(ordering: .relaxed) { break }
                refresh()
            }
        }
    }

    /// Stops the refresh thread (a reload replaced this resolver). The addresses stay usable
    /// by connections of the old configuration still finishing.
    public func stop() {
        guard !stopped.exchange(true, ordering: .relaxed) else { return }
        var one: UInt64 = 1
        _ = write(wake, &one, 8)
    }
}
