import CProxyLinux
#if canImport(Glibc)
import Glibc
#endif

/// What other modules may do with a loop: watch a file descriptor they own (libcurl's
/// sockets), run timers, find out which loop they are on. Everything here must be
/// called on the loop's own thread, except `execute` (in EventLoop.swift).
extension EventLoop {
    /// Watches `fd` (which the caller keeps owning and closes itself, after `cancel()`).
    public func watch(fd: Int32, readable: Bool, writable: Bool,
                      _ handler: @escaping (_ readable: Bool, _ writable: Bool) -> Void) throws(SystemError) -> FDWatch {
        let w = FDWatch(fd: fd, loop: self, handler: handler)
        var events: UInt32 = 0
        if readable { events |= EventLoop.readable }
        if writable { events |= EventLoop.writable }
        try w.register(events)
        return w
    }

    /// Runs `task` on this loop after `nanoseconds`; the returned handle can cancel it.
    @discardableResult
    public func scheduleTimer(after nanoseconds: UInt64, _ task: @escaping () -> Void) -> TimerHandle {
        let handle = TimerHandle(loop: self)
        scheduleCancellable(after: nanoseconds, handle: handle) {
            if !handle.cancelled { task() }
        }
        return handle
    }

    /// Monotonic nanoseconds as of this loop iteration (cheap: no system call).
    /// Runs `task` once, on this loop, after the events of the current iteration: work that
    /// many events each ask for (sending what they queued on one connection) is done once.
    /// Call on the loop's thread.
    public func afterThisBatch(_ task: @escaping () -> Void) {
        assertOnLoop()
        onceAfterBatch.append(task)
    }

    public var nowNanoseconds: UInt64 { now }

    /// Whether the caller runs on this loop's thread (then it may skip `execute`).
    public var inLoopThread: Bool { isLoopThread }
}

/// A caller-owned file descriptor watched by a loop.
public final class FDWatch {
    private let channel: WatchChannel
    private var cancelled = false

    init(fd: Int32, loop: EventLoop, handler: @escaping (Bool, Bool) -> Void) {
        channel = WatchChannel(fd: fd, loop: loop, handler: handler)
    }

    func register(_ events: UInt32) throws(SystemError) { try channel.loop.register(channel, events) }

    public func update(readable: Bool, writable: Bool) {
        guard !cancelled else { return }
        channel.want(read: readable, write: writable)
    }

    /// Stops watching. The fd stays open: its owner closes it.
    public func cancel() {
        guard !cancelled else { return }
        cancelled = true
        channel.loop.unregister(channel)
    }
}

final class WatchChannel: Channel {
    private let handler: (Bool, Bool) -> Void

    init(fd: Int32, loop: EventLoop, handler: @escaping (Bool, Bool) -> Void) {
        self.handler = handler
        super.init(fd: fd, loop: loop)
    }

    override func onEvent(_ events: UInt32) {
        let failed = events & (CProxyLinux_EPOLLERR | CProxyLinux_EPOLLHUP) != 0
        // Errors and hang-ups are reported as readable: the owner's next read will see them.
        handler(events & CProxyLinux_EPOLLIN != 0 || failed, events & CProxyLinux_EPOLLOUT != 0)
    }
}

/// A scheduled timer. Cancel it on the loop's thread.
public final class TimerHandle {
    private unowned(unsafe) let loop: EventLoop
    private(set) var cancelled = false

    init(loop: EventLoop) { self.loop = loop }

    public func cancel() {
        guard !cancelled else { return }
        cancelled = true
        loop.timerCancelled()
    }

    /// Marks the handle cancelled without telling its loop (heap tests run off the loop thread).
    func markCancelledForTesting() { cancelled = true }
}
