import CProxyLinux
#if canImport(Glibc)
import Glibc
#endif

/// Process signals are taken synchronously by the main thread (sigwait), never by handlers
/// running on a loop thread.
enum Signals {
    /// SIGHUP reloads, SIGUSR1 reopens the access log file (logrotate), SIGTERM and SIGINT stop.
    static let handled: [Int32] = [SIGTERM, SIGINT, SIGHUP, SIGUSR1]

    static func block() {
        signal(SIGPIPE, SIG_IGN)
        _ = handled.withUnsafeBufferPointer { CProxyLinux_block_signals($0.baseAddress, Int32($0.count)) }
    }

    static func wait() -> Int32 {
        handled.withUnsafeBufferPointer { CProxyLinux_wait_signals($0.baseAddress, Int32($0.count)) }
    }
}
