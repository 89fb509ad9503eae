#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// Whether the maintenance file is there, and its page, as one loop sees it: `stat(2)` at
/// most once per `MaintenanceSettings.checkInterval` (on the first request after it), the file
/// read again only when its inode, size or modification time changed. Nothing per request
/// but a comparison of the loop's clock. Touched by its loop only.
final class MaintenanceWatch {
    let path: String
    private let shared: MaintenanceSwitch
    private var nextCheck: UInt64 = 0
    private var stamp: Stamp? = nil
    /// The page while the file exists (its bytes, or empty if it could not be read or is too
    /// large: the proxy's own page is sent then); nil while it does not.
    private(set) var page: [UInt8]? = nil

    struct Stamp: Equatable {
        var inode: UInt64
        var size: Int64
        var modified: Int
        var modifiedNanos: Int
    }

    init(path: String, shared: MaintenanceSwitch) {
        self.path = path
        self.shared = shared
    }

    /// The page if maintenance is on at `now` (the loop's clock), else nil.
    @inline(__always)
    func current(now: UInt64) -> [UInt8]? {
        if now >= nextCheck { check(now: now) }
        return page
    }

    private func check(now: UInt64) {
        nextCheck = now + MaintenanceSettings.checkInterval
        var info = stat()
        guard stat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
            if page != nil {
                page = nil
                stamp = nil
                shared.turned(on: false, path: path)
            }
            return
        }
        let seen = Stamp(inode: UInt64(info.st_ino), size: Int64(info.st_size), modified: info.st_mtim.tv_sec,
                         modifiedNanos: info.st_mtim.tv_nsec)
        guard seen != stamp else { return }
        stamp = seen
        let wasOn = page != nil
        page = Self.contents(path, size: Int(info.st_size))
        if !wasOn { shared.turned(on: true, path: path) }
    }

    /// The file's bytes; empty when it cannot be read whole or is larger than the limit.
    static func contents(_ path: String, size: Int) -> [UInt8] {
        guard size <= MaintenanceSettings.maxPageBytes else { return [] }
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { return [] }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: size)
        var got = 0
        while got < size {
            let n = bytes.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress! + got, size - got) }
            if n <= 0 { break }
            got += n
        }
        return got == size ? bytes : []
    }
}

/// Maintenance as the whole listener sees it, across its loops: one log line when it turns on
/// and one when it turns off (each loop notices on its own), and the gauge.
final class MaintenanceSwitch: Sendable {
    private let on = Atomic<Bool>(false)
    private let log: Logger
    private let gauge: Gauge

    init(log: Logger, gauge: Gauge) {
        self.log = log
        self.gauge = gauge
    }

    func turned(on now: Bool, path: String) {
        guard on.exchange(now, ordering: .relaxed) != now else { return }
        gauge.set(now ? 1 : 0)
        if now {
            log.warn("maintenance page on: answering 503 until the file is gone", ["file": path, "setting": "maintenance.file"])
        } else {
            log.info("maintenance page off: serving as usual", ["file": path])
        }
    }
}
