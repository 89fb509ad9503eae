import CProxyLinux
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// One epoll loop on one thread. It owns every channel registered with it: no locks on the
/// request path. Other threads talk to it only through `execute(_:)`, which queues a task
/// and wakes the loop through an eventfd.
///
/// `@unchecked Sendable` because a reference is handed to other threads for `execute`;
/// everything else asserts (in debug builds) that it runs on the loop's thread.
public final class EventLoop: @unchecked Sendable {
    static let readable = CProxyLinux_EPOLLIN | CProxyLinux_EPOLLRDHUP
    static let writable = CProxyLinux_EPOLLOUT

    public let index: Int
    let epfd: Int32
    let wakeFD: Int32
    private var channels: ContiguousArray<Channel?> = []
    private(set) var channelCount = 0
    private let tasks = Mutex<[@Sendable () -> Void]>([])
    private var timers = TimerHeap()
    private var threadID: pthread_t? = nil
    private(set) var running = true
    /// Monotonic nanoseconds, refreshed once per loop iteration.
    private(set) var now: UInt64 = EventLoop.monotonicNow()
    private var nextSweep: UInt64 = 0
    private var nextPoolTrim: UInt64 = 0
    /// Standard-size buffers shared by this loop's connections.
    let buffers = BufferPool()
    /// Empty pipes for spliced bodies (`PipePool`).
    let pipes = PipePool()
    /// Request states shared by this loop's connections (`RequestState`).
    let requestStates = RequestStatePool()
    let requestIDs = RequestIDGenerator()
    let httpDate = HTTPDateCache()
    /// Client connections on this loop, and those queued to it (`LoopPlacement`): read by
    /// every loop's acceptors, written by this loop's connections and by acceptors that queue
    /// a connection here.
    let clientConnections = Atomic<Int>(0)
    /// Runs after each batch of events, e.g. to flush buffered log lines in one write.
    var afterBatch: [() -> Void] = []
    /// Runs once, after the current batch (`afterThisBatch`).
    var onceAfterBatch: [() -> Void] = []

    static let sweepInterval: UInt64 = 100_000_000

    init(index: Int) throws(SystemError) {
        self.index = index
        epfd = try syscallValue("epoll_create1") { epoll_create1(Int32(EPOLL_CLOEXEC)) }
        wakeFD = try syscallValue("eventfd") { eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC)) }
        var ev = epoll_event(events: CProxyLinux_EPOLLIN, data: epoll_data_t(u64: UInt64(wakeFD)))
        try syscallValue("epoll_ctl(wake)") { epoll_ctl(epfd, EPOLL_CTL_ADD, wakeFD, &ev) }
    }

    deinit {
        Glibc.close(epfd)
        Glibc.close(wakeFD)
    }

    public static func monotonicNow() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }

    @inline(__always) func assertOnLoop() {
        assert(threadID == nil || pthread_equal(threadID!, pthread_self()) != 0, "called off its event loop")
    }

    // MARK: Cross-thread

    /// Queues `task` to run on this loop's thread. Safe from any thread.
    public func execute(_ task: @escaping @Sendable () -> Void) {
        let wasEmpty = tasks.withLock { queue -> Bool in
            queue.append(task)
            return queue.count == 1
        }
        if wasEmpty {
            var one: UInt64 = 1
            _ = write(wakeFD, &one, 8)
        }
    }

    // MARK: Channels

    func register(_ channel: Channel, _ events: UInt32) throws(SystemError) {
        assertOnLoop()
        let fd = Int(channel.fd)
        if fd >= channels.count {
            channels.append(contentsOf: repeatElement(nil, count: max(fd + 1 - channels.count, channels.count)))
        }
        var ev = epoll_event(events: events, data: epoll_data_t(u64: UInt64(fd)))
        try syscallValue("epoll_ctl(add)") { epoll_ctl(epfd, EPOLL_CTL_ADD, channel.fd, &ev) }
        channels[fd] = channel
        channel.interest = events
        channelCount += 1
    }

    func updateInterest(_ channel: Channel, _ events: UInt32) {
        var ev = epoll_event(events: events, data: epoll_data_t(u64: UInt64(channel.fd)))
        // It only fails for an fd we do not know, which would be a bug in our bookkeeping.
        let op = _slowPath(channel.muted) ? EPOLL_CTL_ADD : EPOLL_CTL_MOD
        channel.muted = false
        let r = epoll_ctl(epfd, op, channel.fd, &ev)
        assert(r == 0, "epoll_ctl(MOD or ADD) failed")
        channel.interest = events
    }

    /// Takes the channel out of the epoll set until its next interest (`updateInterest`
    /// re-adds it). For a socket that has hung up while we cannot read it yet: epoll reports
    /// EPOLLHUP and EPOLLERR whatever the interest, so an interest of 0 would have the loop
    /// spin on it meanwhile.
    func mute(_ channel: Channel) {
        guard !channel.muted else { return }
        var ev = epoll_event()
        _ = epoll_ctl(epfd, EPOLL_CTL_DEL, channel.fd, &ev)
        channel.interest = 0
        channel.muted = true
    }

    /// Gives `old`'s fd and epoll registration to `new` (same fd) without a system call: a
    /// TLS connection's handshake channel hands over to its request state machine this way.
    func handOver(_ old: Channel, to new: Channel) {
        let fd = Int(old.fd)
        precondition(new.fd == old.fd && fd < channels.count && channels[fd] === old, "hand-over of an unregistered channel")
        channels[fd] = new
        new.interest = old.interest
        old.interest = 0
    }

    /// Whether `channel` is registered here (not closed or handed over).
    func owns(_ channel: Channel) -> Bool {
        let fd = Int(channel.fd)
        return fd < channels.count && channels[fd] === channel
    }

    /// Unregisters the channel without closing its fd (the fd belongs to someone else).
    func unregister(_ channel: Channel) {
        let fd = Int(channel.fd)
        guard fd < channels.count, channels[fd] === channel else { return }
        channels[fd] = nil
        channelCount -= 1
        var ev = epoll_event()
        _ = epoll_ctl(epfd, EPOLL_CTL_DEL, channel.fd, &ev)
    }

    /// Unregisters and closes the channel's fd.
    func close(_ channel: Channel) {
        let fd = Int(channel.fd)
        guard fd < channels.count, channels[fd] === channel else { return }
        channels[fd] = nil
        channelCount -= 1
        // close(2) removes the fd from the epoll set.
        Glibc.close(channel.fd)
    }

    // MARK: Timers

    func scheduleCancellable(after delay: UInt64, handle: TimerHandle, _ task: @escaping () -> Void) {
        timers.push(deadline: now + delay, handle: handle, task)
    }

    /// Entries in the timer heap (cancelled and stale ones included until they come due).
    var pendingTimers: Int { timers.count }

    /// A timer heap entry at an absolute deadline (`LoopSource`, which tells stale entries
    /// apart itself).
    func scheduleEntry(at deadline: UInt64, _ task: @escaping () -> Void) {
        timers.push(deadline: deadline, task)
    }

    private var cancelledTimers = 0

    func timerCancelled() {
        cancelledTimers += 1
        if cancelledTimers > 256 && cancelledTimers * 2 > timers.count {
            timers.removeCancelled()
            cancelledTimers = 0
        }
    }

    var isLoopThread: Bool {
        guard let threadID else { return false }
        return pthread_equal(threadID, pthread_self()) != 0
    }

    // MARK: Running

    /// Runs until `stop()`. Call on the loop's own thread.
    func run() {
        threadID = pthread_self()
        let capacity = 256
        let events = UnsafeMutablePointer<epoll_event>.allocate(capacity: capacity)
        defer { events.deallocate() }
        while running {
            turn(events, capacity: capacity, longestWaitMS: .max)
        }
    }

    /// One turn by hand, waiting at most `longestWaitMS` for an event: for a loop with no
    /// thread of its own (`EmbeddedExchange`). Call from one thread only.
    func turn(longestWaitMS: Int32) {
        let capacity = 16
        let events = UnsafeMutablePointer<epoll_event>.allocate(capacity: capacity)
        defer { events.deallocate() }
        turn(events, capacity: capacity, longestWaitMS: longestWaitMS)
    }

    /// Waits for events (until the next sweep or timer at most), handles them, the expired
    /// timers, the deadline sweep when due, and the after-batch hooks.
    @inline(__always)
    private func turn(_ events: UnsafeMutablePointer<epoll_event>, capacity: Int, longestWaitMS: Int32) {
        now = EventLoop.monotonicNow()
        // Rounded up: a deadline 0.9 ms away must not become a 0 ms busy wait.
        var timeoutMS = Int32(((nextSweep > now ? nextSweep - now : 0) + 999_999) / 1_000_000)
        if let next = timers.nextDeadline {
            timeoutMS = min(timeoutMS, Int32(((next > now ? next - now : 0) + 999_999) / 1_000_000))
        }
        timeoutMS = min(timeoutMS, longestWaitMS)
        let n = epoll_wait(epfd, events, Int32(capacity), timeoutMS)
        now = EventLoop.monotonicNow()
        if n > 0 {
            for i in 0..<Int(n) {
                let fd = Int(events[i].data.u64)
                if fd == Int(wakeFD) {
                    runTasks()
                    continue
                }
                if fd < channels.count, let channel = channels[fd] {
                    channel.onEvent(events[i].events)
                }
            }
        }
        while let task = timers.popExpired(now: now) { task() }
        if now >= nextSweep {
            sweepDeadlines()
            nextSweep = now + EventLoop.sweepInterval
            if now >= nextPoolTrim {
                buffers.trim()
                pipes.trim()
                nextPoolTrim = now + BufferPool.trimInterval
            }
        }
        for hook in afterBatch { hook() }
        while !onceAfterBatch.isEmpty {
            let once = onceAfterBatch
            onceAfterBatch.removeAll(keepingCapacity: true)
            for task in once { task() }
        }
    }

    func stop() { running = false }

    private func runTasks() {
        var counter: UInt64 = 0
        _ = read(wakeFD, &counter, 8)
        let batch = tasks.withLock { queue -> [@Sendable () -> Void] in
            let b = queue
            queue.removeAll()
            return b
        }
        for task in batch { task() }
    }

    /// Timeouts are checked by a sweep rather than a timer per connection: 10,000 connections
    /// cost 10,000 comparisons ten times a second, and arming a timer per read costs more.
    private func sweepDeadlines() {
        for i in 0..<channels.count {
            if let channel = channels[i], channel.deadline != 0, channel.deadline <= now {
                channel.deadline = 0
                channel.onTimeout()
            }
        }
    }

    /// Calls `body` for every registered channel (draining, shutdown).
    func forEachChannel(_ body: (Channel) -> Void) {
        for i in 0..<channels.count {
            if let channel = channels[i] { body(channel) }
        }
    }
}
