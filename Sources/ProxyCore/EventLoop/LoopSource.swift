/// Something an event loop wakes and times that is not a descriptor — what QUIC needs: many
/// connections share one UDP socket, so a connection is no `Channel` (those are indexed by
/// descriptor), and its loss-recovery and ACK-delay timers are milliseconds, which the 100 ms
/// deadline sweep cannot serve. Subclasses override `onWake` and `onTimer`; every call is on
/// the owning loop's thread (from another thread, `loop.execute { source.wake() }`).
///
/// - `wake()` asks for `onWake` once after the current batch of events, however many times it
///   is asked (a socket's datagrams for one connection are handled, then it sends once).
/// - `arm(at:)` runs `onTimer` at a monotonic deadline, to the loop's millisecond (epoll's
///   resolution), through the loop's timer heap. Re-arming is cheap either way: an earlier
///   deadline pushes one entry; a later one changes a field, and the entry already in the heap,
///   when it comes due, moves itself on (timers that are pushed back on nearly every packet —
///   QUIC's idle and ACK timers — do not fill the heap).
class LoopSource {
    unowned(unsafe) let loop: EventLoop
    /// When `onTimer` is due (0: not armed).
    private(set) var deadline: UInt64 = 0
    /// The deadline of this source's entry in the loop's heap (0: none). Entries with another
    /// deadline are stale and ignored when they come due.
    private var queued: UInt64 = 0
    /// `onWake` is due after this batch.
    private var wakePending = false

    init(loop: EventLoop) {
        self.loop = loop
    }

    /// Woken (`wake`): runs once after the batch in which it was woken.
    func onWake() {}
    /// The deadline passed.
    func onTimer() {}

    /// `onWake` after the current batch of events (once, however often asked).
    final func wake() {
        loop.assertOnLoop()
        guard !wakePending else { return }
        wakePending = true
        loop.afterThisBatch { [self] in
            wakePending = false
            onWake()
        }
    }

    /// `onTimer` at `deadline` (monotonic nanoseconds, the loop's clock: `loop.now`).
    final func arm(at deadline: UInt64) {
        loop.assertOnLoop()
        self.deadline = deadline
        if queued == 0 || deadline < queued { enqueue(deadline) }
    }

    /// `onTimer` no more (until armed again).
    final func disarm() {
        deadline = 0
    }

    private func enqueue(_ at: UInt64) {
        queued = at
        loop.scheduleEntry(at: at) { [weak self] in self?.entryDue(at) }
    }

    /// An entry of ours came due: the timer fires if it is due now; a deadline pushed back
    /// since moves the entry on; a stale entry (an earlier one took its place) does nothing.
    private func entryDue(_ at: UInt64) {
        guard at == queued else { return }
        queued = 0
        guard deadline != 0 else { return }
        if deadline > loop.now {
            enqueue(deadline)
            return
        }
        deadline = 0
        onTimer()
    }
}
