import ProxyCore
#if canImport(Glibc)
import Glibc
#endif

/// The `process_*` metrics every Prometheus client library exports, under their standard names
/// so that dashboards and alerts written for any exporter read them. Read at scrape time from
/// the kernel (/proc, getrlimit, getrusage); a value that cannot be read is reported as 0.
enum ProcessMetrics {
    static func register(_ registry: MetricsRegistry, startTime: Double) {
        registry.gauge("process_resident_memory_bytes", "Resident memory size in bytes.") { Double(statm().resident) }
        registry.gauge("process_virtual_memory_bytes", "Virtual memory size in bytes.") { Double(statm().size) }
        registry.gauge("process_open_fds", "Number of open file descriptors.") { Double(openDescriptors()) }
        registry.gauge("process_max_fds", "Maximum number of open file descriptors.") { Double(maxDescriptors()) }
        registry.counter("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.") { cpuSeconds() }
        registry.gauge("process_start_time_seconds", "Start time of the process since unix epoch in seconds.") { startTime }
    }

    /// /proc/self/statm's first two fields (pages), in bytes.
    static func statm() -> (size: Int, resident: Int) {
        let fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return (0, 0) }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 128)
        let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard n > 0 else { return (0, 0) }
        let fields = buffer[0..<n].split(separator: UInt8(ascii: " "), maxSplits: 2)
        guard fields.count >= 2, let size = Int(String(decoding: fields[0], as: UTF8.self)),
              let resident = Int(String(decoding: fields[1], as: UTF8.self)) else { return (0, 0) }
        let page = sysconf(Int32(_SC_PAGESIZE))
        return (size * page, resident * page)
    }

    /// Entries of /proc/self/fd, less the one the listing itself holds open.
    static func openDescriptors() -> Int {
        guard let dir = opendir("/proc/self/fd") else { return 0 }
        defer { closedir(dir) }
        var count = 0
        while let entry = readdir(dir) {
            let dot = withUnsafeBytes(of: entry.pointee.d_name) { $0[0] == UInt8(ascii: ".") }
            if !dot { count += 1 }
        }
        return max(count - 1, 0)
    }

    /// The soft RLIMIT_NOFILE, which the proxy raised to the hard limit at start.
    static func maxDescriptors() -> UInt64 {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 0 }
        return UInt64(limit.rlim_cur)
    }

    /// User and system time of every thread, live and ended.
    static func cpuSeconds() -> Double {
        var usage = rusage()
        guard getrusage(RUSAGE_SELF.rawValue, &usage) == 0 else { return 0 }
        func seconds(_ t: timeval) -> Double { Double(t.tv_sec) + Double(t.tv_usec) / 1_000_000 }
        return seconds(usage.ru_utime) + seconds(usage.ru_stime)
    }
}
