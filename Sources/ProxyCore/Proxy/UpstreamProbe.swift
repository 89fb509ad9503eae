#if canImport(Glibc)
import Glibc
#endif

/// Whether an address accepts a TCP (or unix-socket) connection, asked without blocking the
/// loop: for readiness checks. The connection is closed as soon as it is established; nothing
/// is sent on it.
public enum UpstreamProbe {
    /// Call on `loop`'s thread. `completion` runs on `loop`, once, never inside this call:
    /// nil when the connection was accepted, else why not.
    public static func connect(to address: SocketAddress, on loop: EventLoop, timeout: UInt64,
                               _ completion: @escaping (String?) -> Void) {
        // Runs on `loop` and so does the completion: queued on the loop, never another thread.
        nonisolated(unsafe) let completion = completion
        let fd: Int32
        do {
            fd = try Socket.startConnect(address)
        } catch {
            let reason = error.description
            loop.execute { completion(reason) }
            return
        }
        final class Attempt {
            var watch: FDWatch?
            var timer: TimerHandle?
            var done = false
        }
        let attempt = Attempt()
        func finish(_ reason: String?) {
            guard !attempt.done else { return }
            attempt.done = true
            attempt.watch?.cancel()
            attempt.timer?.cancel()
            Glibc.close(fd)
            completion(reason)
        }
        do {
            attempt.watch = try loop.watch(fd: fd, readable: false, writable: true) { _, _ in
                let err = Socket.pendingError(fd)
                finish(err == 0 ? nil : SystemError(call: "connect", errno: err).description)
            }
        } catch {
            Glibc.close(fd)
            let reason = error.description
            loop.execute { completion(reason) }
            return
        }
        attempt.timer = loop.scheduleTimer(after: timeout) { finish("connect timed out") }
    }
}
