import ProxyCore
#if canImport(Glibc)
import Glibc
#endif

/// Tells the service manager (systemd, `Type=notify`) when the proxy is ready, reloading and
/// stopping. Without `$NOTIFY_SOCKET` every call does nothing. A failed notification is logged
/// and otherwise ignored: the proxy serves either way, and systemd's own timeouts report a
/// readiness that never came.
final class ServiceManager {
    private let notifier: ServiceNotifier?
    private let log: Logger

    init(log: Logger) {
        self.log = log
        let name = getenv("NOTIFY_SOCKET").map { String(cString: $0) }
        do {
            notifier = try ServiceNotifier(socket: name)
        } catch {
            notifier = nil
            log.warn("cannot notify the service manager", ["socket": name ?? "", "error": error.description,
                                                            "setting": "NOTIFY_SOCKET (set by systemd for Type=notify)"])
        }
    }

    /// After the listeners are bound: systemd starts units ordered after this one only now.
    func ready() { send("READY=1") { (n) throws(SystemError) in try n.ready() } }

    /// Before a reload; `ready()` after it, whether it was applied or refused.
    func reloading() {
        send("RELOADING=1") { (n) throws(SystemError) in try n.reloading(monotonicNanoseconds: EventLoop.monotonicNow()) }
    }

    func stopping() { send("STOPPING=1") { (n) throws(SystemError) in try n.stopping() } }

    private func send(_ what: String, _ body: (ServiceNotifier) throws(SystemError) -> Void) {
        guard let notifier else { return }
        do {
            try body(notifier)
        } catch {
            log.warn("cannot notify the service manager", ["state": what, "error": error.description])
        }
    }
}
