#if canImport(Glibc)
import Glibc
#endif

/// An event loop running on its own pthread. The server runs one per core; tests and tools
/// that need a loop (the outbound HTTP client's tests) start one directly.
public final class EventLoopThread: Sendable {
    public let loop: EventLoop
    private let thread: pthread_t

    /// Starts the thread. `setup` runs on the loop's thread before the loop starts (register
    /// listeners there), `teardown` after it stops.
    public convenience init(index: Int = 0, setup: @escaping @Sendable (EventLoop) -> Void = { _ in },
                            teardown: @escaping @Sendable (EventLoop) -> Void = { _ in }) throws(SystemError) {
        try self.init(loop: try EventLoop(index: index), setup: setup, teardown: teardown)
    }

    init(loop: EventLoop, setup: @escaping @Sendable (EventLoop) -> Void,
         teardown: @escaping @Sendable (EventLoop) -> Void) throws(SystemError) {
        self.loop = loop
        thread = try startThread {
            setup(loop)
            loop.run()
            teardown(loop)
        }
    }

    /// Asks the loop to stop after its current iteration.
    public func stop() {
        let loop = self.loop
        loop.execute { loop.stop() }
    }

    /// Waits for the thread to end (after `stop()`, or after the loop stopped itself).
    public func join() {
        pthread_join(thread, nil)
    }
}

/// Starts a pthread that runs `body` once (event loops, the upstream resolver).
func startThread(_ body: @escaping () -> Void) throws(SystemError) -> pthread_t {
    let box = ThreadBox(body)
    var tid = pthread_t()
    let arg = Unmanaged.passRetained(box).toOpaque()
    let rc = pthread_create(&tid, nil, { raw in
        let box = Unmanaged<ThreadBox>.fromOpaque(raw!).takeRetainedValue()
        box.body()
        return nil
    }, arg)
    if rc != 0 {
        Unmanaged<ThreadBox>.fromOpaque(arg).release()
        throw SystemError(call: "pthread_create", errno: rc)
    }
    return tid
}

private final class ThreadBox: @unchecked Sendable {
    let body: () -> Void
    init(_ body: @escaping () -> Void) { self.body = body }
}
