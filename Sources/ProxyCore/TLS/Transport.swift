import CProxyLinux
#if canImport(Glibc)
import Glibc
#endif

/// How a connection's bytes cross its socket: in the clear, or through the TLS session bound
/// to the same file descriptor. The connection state machines read and write only through
/// this, so they have one shape for both.
///
/// The plain path must cost what the bare system call cost before TLS existed (measured with
/// `bench/instructions`): it is inlined, tests the session pointer without retaining it, keeps
/// the system call's error type (a TLS failure is reported as `EPROTO`, its reason kept on
/// the session for `describe`), and the TLS calls sit out of line.
struct Transport {
    let fd: Int32
    /// nil = plain socket.
    let tls: TLSSession?

    init(fd: Int32, tls: TLSSession? = nil) {
        self.fd = fd
        self.tls = tls
    }

    /// Reads into `buffer`'s free space (at least `reserve` bytes are made free first) and
    /// returns the outcome; the caller advances `buffer.writer`. `.done(0)` = the peer closed.
    @inline(__always)
    func read(into buffer: inout ByteBuffer, reserve: Int) throws(SystemError) -> IOResult {
        if _slowPath(tls != nil) {
            guard let r = readTLS(into: &buffer) else { throw SystemError(call: "TLS", errno: EPROTO) }
            return r
        }
        buffer.reserveWritable(reserve)
        return try Socket.read(fd, into: buffer.writePointer, count: buffer.writable)
    }

    /// Writes as much of `buffer` as the socket takes now; returns the bytes written, or nil
    /// when the session failed (`describe` says why).
    ///
    /// Callers test `isPlain` first and run their own loop of `Socket.write` for plain
    /// sockets: a TLS call inside that loop, even one never taken, costs the plain path
    /// register spills on every write (measured: +60 instructions per proxied request). For
    /// the same reason the TLS calls do not throw: a throwing call reserves the error register
    /// in every caller.
    @inline(never)
    func drainTLS(_ buffer: inout ByteBuffer) -> Int? {
        let session = tls!
        var total = 0
        while !buffer.isEmpty {
            let r: IOResult
            do {
                r = try session.write(from: buffer.base! + buffer.reader, count: buffer.readable)
            } catch {
                return nil
            }
            guard case .done(let n) = r else { break }
            buffer.moveReader(n)
            total += n
        }
        return total
    }

    /// No TLS: read and write the socket directly.
    @inline(__always) var isPlain: Bool { _fastPath(tls == nil) }

    /// A read or write error as text for logs: the TLS failure when there was one.
    func describe(_ error: SystemError) -> String {
        if let reason = tls?.lastFailure { return "TLS: \(reason)" }
        return error.description
    }

    /// Why `drainTLS` returned nil, for logs.
    var tlsFailure: String { "TLS: \(tls?.lastFailure ?? "failed")" }

    /// Reads what the session can give now. A server session reads ahead, so one socket read
    /// may bring several records (pipelined requests, HTTP/2 frames, an upload's next record);
    /// all the whole ones come out here, because OpenSSL's buffer is invisible to epoll and a
    /// record left in it would wait for bytes that may never come. What stays is at most the
    /// start of a record whose rest is still in the kernel, where epoll sees it. Only the
    /// first read touches the socket: one call takes at most what one socket read brought
    /// (~17 KiB of records), however fast the peer sends, and the caller's interest in
    /// reading keeps its meaning.
    @inline(never)
    private func readTLS(into buffer: inout ByteBuffer) -> IOResult? {
        let session = tls!
        // A whole record must fit, or decrypted bytes would wait inside OpenSSL.
        buffer.reserveWritable(TLSSession.recordSize)
        guard let first = try? session.read(into: buffer.writePointer, count: buffer.writable) else { return nil }
        guard case .done(let n) = first, n > 0, session.hasPending else { return first }
        // The caller advances the writer by what this returns: advance it meanwhile so each
        // record lands after the last, and hand it back at the end (`reserveWritable` may move
        // the bytes, never reorder them, so the last `total` bytes are ours).
        var total = n
        buffer.writer += n
        defer { buffer.writer -= total }
        while session.hasPending {
            buffer.reserveWritable(TLSSession.recordSize)
            // A failure here fails the connection now, even with bytes read: no event
            // would come to report it later.
            guard let next = try? session.readBuffered(into: buffer.writePointer, count: buffer.writable) else { return nil }
            // Would block: the rest of a record is still in the kernel. 0: the peer's
            // close_notify after the data, seen again by the next read (OpenSSL keeps it), which
            // the peer's FIN brings.
            guard case .done(let more) = next, more > 0 else { break }
            buffer.writer += more
            total += more
        }
        return .done(total)
    }

    /// Ends our sending side: close_notify (TLS), then a TCP half-close.
    @inline(never)
    func shutdownWrite() {
        tls?.closeNotify()
        shutdown(fd, Int32(SHUT_WR))
    }

    /// Before close(2): a TLS peer is owed a close_notify (best effort, never waited for).
    /// (Out of line: closing is rare, and inlined TLS code would cost register saves in the
    /// event handlers that can close.)
    @inline(never)
    func prepareClose() {
        tls?.closeNotify()
    }
}
