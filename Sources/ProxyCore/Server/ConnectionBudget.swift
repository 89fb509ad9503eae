import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// How many client connections may be open at once, across all loops.
///
/// Accepting until `accept` fails with EMFILE starves the wrong side: the connections are in,
/// but the upstream `socket()` each request needs then fails (502), and so do the IdP and
/// store calls. So a listener stops accepting at its budget, leaving room for every accepted
/// client to have its one outbound connection (upstream, IdP or store) at the same moment, and
/// resumes as connections close. Connections wait in the kernel's backlog meanwhile. An
/// HTTP/2 connection may have many requests in flight: each stream beyond one takes a unit of
/// its own while it runs, and waits for one when none is left (`StreamAdmitting`).
///
/// The internal listener has a budget of its own, never taken by the public side: `/healthz`
/// and `/readyz` answer in milliseconds while a flood saturates the public listener (a liveness
/// probe that times out restarts a healthy process).
public final class ConnectionBudget: Sendable {
    public let limit: Int
    private let open = Atomic<Int>(0)

    public init(limit: Int) {
        self.limit = max(1, limit)
    }

    @inline(__always) var hasRoom: Bool { open.load(ordering: .relaxed) < limit }
    @inline(__always) func opened() { open.wrappingAdd(1, ordering: .relaxed) }
    @inline(__always) func closed() { open.wrappingSubtract(1, ordering: .relaxed) }
    var current: Int { open.load(ordering: .relaxed) }

    /// Descriptors kept out of every budget: epoll and eventfd per loop, listeners, log files,
    /// the resolver, the store's and libcurl's own.
    public static let fixedReserve = 64
    /// Connections the internal listener may hold (probes, scrapes, the app's relay token calls).
    public static let internalConnections = 128

    /// Descriptors per loop kept out of the client budget for upstream connections: the
    /// reserve the idle pools had when they were capped at 128 per loop, kept so that the
    /// derived `limits.max_connections` did not change when the cap went.
    public static let upstreamReservePerLoop = 128

    /// The public budget for `descriptors` (RLIMIT_NOFILE): what is left after the fixed
    /// reserve, the internal listener's and the loops' upstream reserve, halved (each unit —
    /// a client connection, or an HTTP/2 stream beyond its connection's first — may hold one
    /// outbound connection; idle pooled ones never outnumber the requests that were once in
    /// flight together, see `ProxyConfig.upstreamIdleConnections`).
    /// `configured` (`limits.max_connections`) can only lower it.
    public static func clientLimit(descriptors: Int, loops: Int, configured: Int?) -> Int {
        let spare = descriptors - fixedReserve - internalConnections - loops * upstreamReservePerLoop
        let derived = max(16, spare / 2)
        return configured.map { min($0, derived) } ?? derived
    }

    /// The soft RLIMIT_NOFILE, raised to the hard limit first (as Go's runtime does): the soft
    /// default of 1,024 is a relic of select(2), which nothing here uses.
    public static func raiseDescriptorLimit() -> Int {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 1024 }
        if limit.rlim_cur < limit.rlim_max {
            var raised = limit
            raised.rlim_cur = min(limit.rlim_max, 1 << 20)
            if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 { limit = raised }
        }
        return Int(min(limit.rlim_cur, 1 << 30))
    }
}
