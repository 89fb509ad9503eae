import CProxyLinux
#if canImport(Glibc)
import Glibc
#endif

/// An open static file being answered: its descriptor (this object's alone: closed by
/// `close()` or, at the latest, when the exchange lets go of it), what `fstat` said, and the
/// bytes of it still to send (`offset` up to `end`). One per request; the exchange holds it
/// while the body goes out (`ClientExchange.staticFile`) and drops it on every end path.
final class StaticFile {
    private(set) var fd: Int32
    let size: UInt64
    /// Seconds since the epoch.
    let mtime: Int
    var offset: UInt64 = 0
    var end: UInt64 = 0

    private init(fd: Int32, size: UInt64, mtime: Int) {
        self.fd = fd
        self.size = size
        self.mtime = mtime
    }

    deinit { close() }

    func close() {
        guard fd >= 0 else { return }
        _ = Glibc.close(fd)
        fd = -1
    }

    var remaining: UInt64 { end - offset }

    /// The regular file at `relative` (`StaticPath`) under the directory `root`, or nil — no
    /// such file, not a regular file (a directory, a FIFO, a device), or a symlink that leaves
    /// `root` while `beneath` (the kernel checks every component: `RESOLVE_BENEATH`). Nothing
    /// stays open when it is nil.
    static func open(_ relative: [UInt8], suffix: StaticString = "", under root: Int32, beneath: Bool) -> StaticFile? {
        var path = relative
        path.append(contentsOf: UnsafeBufferPointer(start: suffix.utf8Start, count: suffix.utf8CodeUnitCount))
        path.append(0)
        let fd = path.withUnsafeBufferPointer {
            $0.withMemoryRebound(to: CChar.self) { CProxyLinux_open_beneath(root, $0.baseAddress!, beneath ? 1 : 0) }
        }
        guard fd >= 0 else { return nil }
        var st = stat()
        guard fstat(fd, &st) == 0, st.st_mode & S_IFMT == S_IFREG else {
            _ = Glibc.close(fd)
            return nil
        }
        return StaticFile(fd: fd, size: UInt64(st.st_size), mtime: Int(st.st_mtim.tv_sec))
    }
}

/// One loop's descriptor of the static root, the directory files are opened under. Opened
/// again once a second, so that a deploy that points the root's path at a new release
/// (Capistrano's `current` symlink) is served from within a second, without a reload and
/// without a path walk to the root on every request. Loop-confined (`ListenerContext.PerLoop`).
final class StaticRoot {
    let path: String
    private var fd: Int32 = -1
    private var openedAt: UInt64 = 0
    static let refresh: UInt64 = 1_000_000_000

    init(path: String) { self.path = path }

    deinit { if fd >= 0 { _ = Glibc.close(fd) } }

    /// The root's descriptor now (`now`: the loop's clock), or nil if it cannot be opened (it
    /// was removed since the configuration was checked: every request goes upstream).
    func descriptor(now: UInt64) -> Int32? {
        if fd < 0 || now &- openedAt >= StaticRoot.refresh {
            let opened = CProxyLinux_open_directory(path)
            if opened >= 0 || fd < 0 {
                if fd >= 0 { _ = Glibc.close(fd) }
                fd = opened
            }
            openedAt = now
        }
        return fd >= 0 ? fd : nil
    }

    /// What is wrong with `path` as a static root, for `check`: nil when it is an absolute path
    /// to a directory this process can open files under.
    static func problem(_ path: String) -> String? {
        guard path.hasPrefix("/") else { return "'\(path)' is not an absolute path" }
        let fd = CProxyLinux_open_directory(path)
        guard fd >= 0 else {
            let e = CProxyLinux_errno()
            return e == ENOTDIR ? "'\(path)' is not a directory" : "cannot open '\(path)': \(SystemError(call: "open", errno: e).reason)"
        }
        defer { _ = Glibc.close(fd) }
        let probe = CProxyLinux_open_beneath(fd, ".", 1)
        guard probe >= 0 else {
            let e = CProxyLinux_errno()
            if e == ENOSYS { return "static files need Linux 5.6 or later (openat2)" }
            return "cannot read '\(path)': \(SystemError(call: "openat2", errno: e).reason)"
        }
        _ = Glibc.close(probe)
        return nil
    }
}
