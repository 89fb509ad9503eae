import CProxyLinux
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Keeps the process's resident memory near what its heap really holds.
///
/// Measured in a mixed soak (keep-alive, `Connection: close`, large uploads), the heap *in use*
/// was flat while RSS grew 7–10 %: glibc keeps freed memory in each thread's arena (one per
/// thread that ever allocated, up to 8 per core) and returns it to the kernel only from the top
/// of the main heap. Two measures, both glibc-only:
/// - fewer arenas (`M_ARENA_MAX`: the loops plus two, for the main and helper threads), so
///   free memory is shared rather than stranded per thread — unless the operator set
///   `MALLOC_ARENA_MAX` (glibc reads it; it wins);
/// - a trim (`malloc_trim(0)`, which also releases free pages inside the heaps) from a thread of
///   its own every few seconds, when more than `trimThreshold` bytes are held free. It takes the
///   arenas' locks for a moment: at most once per interval, and only when there is something to
///   give back (after a busy period), never on the serving path.
public final class HeapHousekeeping: Sendable {
    public static let interval: UInt64 = 5_000_000_000
    /// Free bytes held before a trim is worth its locks.
    public static let trimThreshold = 4 << 20

    private let trims = Atomic<Int>(0)

    public init() {}

    /// Caps the arenas; call before the loops start (arenas are made as threads first allocate).
    public static func limitArenas(loops: Int) {
        guard getenv("MALLOC_ARENA_MAX") == nil else { return }
        _ = CProxyLinux_limit_arenas(Int32(max(2, loops + 2)))
    }

    /// Heap bytes in use and held free (glibc's `mallinfo2`: walks the arenas, so for scrapes
    /// and this thread only).
    public static func heap() -> (inUse: Int, free: Int) {
        var inUse = 0, free = 0
        CProxyLinux_heap(&inUse, &free)
        return (inUse, free)
    }

    public var trimCount: Int { trims.load(ordering: .relaxed) }

    public func start() throws(SystemError) {
        _ = try startThread { [self] in
            // For the life of the process: there is nothing to stop it for.
            while true {
                usleep(UInt32(Self.interval / 1_000))
                if Self.heap().free > Self.trimThreshold {
                    _ = CProxyLinux_trim_heap()
                    trims.wrappingAdd(1, ordering: .relaxed)
                }
            }
        }
    }
}
