import CProxyLinux

/// Something registered with an event loop: a listener, a client connection, an upstream
/// connection. Subclasses override the event hooks; all calls happen on the owning loop's thread.
class Channel {
    let fd: Int32
    unowned(unsafe) let loop: EventLoop
    /// The epoll interest currently registered (0 = not registered).
    var interest: UInt32 = 0
    /// Monotonic nanoseconds after which `onTimeout` runs; 0 = no deadline.
    var deadline: UInt64 = 0
    /// While not reading, still be told when the peer shuts its side (a client that leaves
    /// while its request is in flight).
    var watchHangup = false
    /// Out of the epoll set for now (`EventLoop.mute`): the next interest re-adds it.
    var muted = false

    init(fd: Int32, loop: EventLoop) {
        self.fd = fd
        self.loop = loop
    }

    /// Readiness from epoll (`EPOLLIN`, `EPOLLOUT`, `EPOLLERR`, `EPOLLHUP` bits).
    func onEvent(_ events: UInt32) {}

    /// The deadline passed.
    func onTimeout() {}

    /// The loop is draining for shutdown: finish what is in flight, take nothing new.
    func onDrain() {}
    /// A reload replaced the listener contexts (see ProxyServer.reload).
    func onReload() {}

    /// Sets the interest set, touching epoll only when it changes.
    @inline(__always)
    final func want(read: Bool, write: Bool) {
        var events: UInt32 = 0
        if read { events |= EventLoop.readable } else if watchHangup { events |= CProxyLinux_EPOLLRDHUP }
        if write { events |= EventLoop.writable }
        if events != interest { loop.updateInterest(self, events) }
    }
}
