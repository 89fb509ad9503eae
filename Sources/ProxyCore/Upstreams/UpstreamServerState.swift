import Synchronization

/// What every loop (and the health checker) knows about one upstream server, in atomics: no
/// loop waits for another to pick a server or to count a failure.
final class UpstreamServerState: Sendable {
    let server: UpstreamServer
    /// `http://10.0.0.5:3000`: the metric label and the name in log lines and /readyz.
    let label: String
    /// Passive health: out until this moment (monotonic ns; 0: not out).
    let outUntil = Atomic<UInt64>(0)
    /// Failures counted since `windowStart`.
    let fails = Atomic<Int>(0)
    let windowStart = Atomic<UInt64>(0)
    /// Active health: the last check passed (true until a check says otherwise).
    let checkPassed = Atomic<Bool>(true)
    /// Requests in flight to it from every loop (counted for `least_conn` only: an upstream
    /// connection counts from the request it is given until it is parked or closed).
    let inFlight = Atomic<Int>(0)
    /// Why it is out, for /readyz and the log (written rarely: when a server goes out).
    let problem = Mutex<String?>(nil)

    init(_ server: UpstreamServer) {
        self.server = server
        if case .address(.unix) = server.target.endpoint {
            label = server.target.description
        } else {
            label = (server.target.tls ? "https://" : "http://") + server.target.description
        }
    }

    /// Whether it may get requests at `now`.
    @inline(__always) func available(_ now: UInt64) -> Bool {
        checkPassed.load(ordering: .relaxed) && outUntil.load(ordering: .relaxed) <= now
    }
}
