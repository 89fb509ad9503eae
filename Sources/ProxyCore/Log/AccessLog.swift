#if canImport(Glibc)
import Glibc
#endif

/// One JSON line per request. Each loop formats into its own buffer (no locks on the request
/// path) and writes the batch once per loop iteration. Only the path is logged, never the
/// query: `/_oauth_callback` carries codes and verifiers in its query string.
public final class AccessLog: @unchecked Sendable {
    let fd: Int32
    /// The file it appends to; nil for stdout and stderr. What `reopen` opens again.
    public let path: String?
    /// JSON lines, or (with `log.format: text`) one plain line per request:
    /// `<time> <remote> "<METHOD> <path>" <status> upstream=<status> in=<bytes> out=<bytes> ms=<ms> upstream_ms=<ms> id=<request id>`
    let format: Logger.Format
    // buffers[i] belongs to loop i.
    private var buffers: [ByteBuffer]

    public init(fd: Int32, loops: Int, format: Logger.Format = .json, path: String? = nil) {
        self.fd = fd
        self.path = path
        self.format = format
        buffers = Array(repeating: ByteBuffer(), count: loops)
    }

    /// Opens `stdout`, `stderr` or a file path (appending).
    public static func open(_ destination: String, loops: Int, format: Logger.Format = .json) -> AccessLog?? {
        switch destination {
        case "off": return .some(nil)
        case "stdout", "-": return AccessLog(fd: 1, loops: loops, format: format)
        case "stderr": return AccessLog(fd: 2, loops: loops, format: format)
        default:
            let fd = openFile(destination)
            return fd < 0 ? nil : AccessLog(fd: fd, loops: loops, format: format, path: destination)
        }
    }

    /// Appending, created readable by the group (a log reader) and no one else.
    private static func openFile(_ path: String) -> Int32 {
        Glibc.open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o640)
    }

    /// Opens the file again under its name (after logrotate renamed it: SIGUSR1, as nginx's
    /// USR1) and puts it under the same descriptor. `dup2` swaps atomically, so a loop writing
    /// meanwhile writes whole batches to the old file or the new one, never to a closed
    /// descriptor, and no loop needs telling. On failure the old file stays in use.
    public func reopen() throws(SystemError) {
        guard let path else { return }
        let fresh = try syscallValue("open(access_log)") { Self.openFile(path) }
        defer { Glibc.close(fresh) }
        _ = try syscallValue("dup2(access_log)") { dup2(fresh, fd) }
        // dup2 clears close-on-exec on the target.
        _ = try syscallValue("fcntl(access_log, FD_CLOEXEC)") { fcntl(fd, F_SETFD, FD_CLOEXEC) }
    }

    func write(_ r: AccessRecord, hasHead: Bool, loop: EventLoop) {
        if format == .text { return writeText(r, hasHead: hasHead, loop: loop) }
        let i = loop.index
        var out = buffers[i]
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        out.append("{\"time\":\"")
        Clock.appendISO(&out, seconds: Int(ts.tv_sec), millis: Int(ts.tv_nsec / 1_000_000))
        out.append("\",\"type\":\"access\",\"remote\":\"")
        r.request.connection.peerText.withUnsafeBytes { out.append($0) }
        if hasHead {
            let c = r.request.connection
            let bytes = c.headBytes
            out.append("\",\"method\":\"")
            out.append(bytes.baseAddress! + c.head.methodRange.start, count: c.head.methodRange.count)
            out.append("\",\"path\":\"")
            r.request.withPath { appendEscaped(&out, $0.baseAddress!, $0.count) }
        } else {
            out.append("\",\"method\":\"\",\"path\":\"")
        }
        // As ALPN names them (nginx's $server_protocol would say HTTP/2.0).
        out.append("\",\"protocol\":\"")
        out.append(r.request.connection.downstream.protocolName(http10: hasHead && r.request.connection.head.version == .http10))
        out.append("\",\"request_id\":\"")
        r.request.connection.appendRequestID(to: &out)
        out.append("\",\"status\":")
        out.append(decimal: UInt64(r.status))
        out.append(",\"upstream_status\":")
        out.append(decimal: UInt64(r.upstreamStatus))
        out.append(",\"bytes_in\":")
        out.append(decimal: r.bytesIn)
        out.append(",\"bytes_out\":")
        out.append(decimal: r.bytesOut)
        out.append(",\"duration_ms\":")
        appendMillis(&out, r.durationNanos)
        out.append(",\"upstream_ms\":")
        appendMillis(&out, r.upstreamNanos)
        if let error = r.error {
            out.append(",\"error\":\"")
            out.append(error.name)
            out.append("\",\"error_source\":\"")
            out.append(error.source.name)
            out.append("\"")
        }
        out.append("}\n")
        buffers[i] = out
    }

    private func writeText(_ r: AccessRecord, hasHead: Bool, loop: EventLoop) {
        let i = loop.index
        var out = buffers[i]
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        Clock.appendISO(&out, seconds: Int(ts.tv_sec), millis: Int(ts.tv_nsec / 1_000_000))
        out.append(byte: 0x20)
        let c = r.request.connection
        c.peerText.withUnsafeBytes { out.append($0) }
        out.append(" \"")
        if hasHead {
            let bytes = c.headBytes
            out.append(bytes.baseAddress! + c.head.methodRange.start, count: c.head.methodRange.count)
            out.append(byte: 0x20)
            r.request.withPath { appendEscaped(&out, $0.baseAddress!, $0.count) }
        } else {
            out.append("-")
        }
        out.append("\" ")
        out.append(decimal: UInt64(r.status))
        out.append(" upstream=")
        out.append(decimal: UInt64(r.upstreamStatus))
        out.append(" in=")
        out.append(decimal: r.bytesIn)
        out.append(" out=")
        out.append(decimal: r.bytesOut)
        out.append(" ms=")
        appendMillis(&out, r.durationNanos)
        out.append(" upstream_ms=")
        appendMillis(&out, r.upstreamNanos)
        out.append(" id=")
        c.appendRequestID(to: &out)
        if let error = r.error {
            out.append(" error=")
            out.append(error.name)
        }
        out.append(byte: 0x0A)
        buffers[i] = out
    }

    /// Writes loop `i`'s pending lines.
    func flush(loopIndex i: Int) {
        var out = buffers[i]
        if out.isEmpty { return }
        while !out.isEmpty {
            let n = Glibc.write(fd, out.base! + out.reader, out.readable)
            if n <= 0 { break }
            out.moveReader(n)
        }
        out.clear()
        if out.capacity > 1 << 20 { out.free() }
        buffers[i] = out
    }

    private func appendEscaped(_ out: inout ByteBuffer, _ p: UnsafeRawPointer, _ n: Int) {
        // Targets are visible ASCII (the parser refuses the rest); only `"` and `\` need escaping.
        for i in 0..<n {
            let b = p.load(fromByteOffset: i, as: UInt8.self)
            if b == 0x22 || b == 0x5C { out.append(byte: 0x5C) }
            out.append(byte: b)
        }
    }

    private func appendMillis(_ out: inout ByteBuffer, _ nanos: UInt64) {
        let micros = nanos / 1000
        out.append(decimal: micros / 1000)
        out.append(byte: 0x2E)
        let frac = micros % 1000
        out.append(byte: UInt8(0x30 + frac / 100))
        out.append(byte: UInt8(0x30 + frac / 10 % 10))
        out.append(byte: UInt8(0x30 + frac % 10))
    }
}
