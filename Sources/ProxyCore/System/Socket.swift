import CProxyLinux
#if canImport(Glibc)
import Glibc
#endif

/// Socket set-up and the few non-blocking calls the loops make. All errno handling goes through `syscall`.
enum Socket {
    static func makeListener(_ address: SocketAddress, backlog: Int32 = 4096, reusePort: Bool) throws(SystemError) -> Int32 {
        let fd = try syscallValue("socket") {
            socket(address.family, CProxyLinux_SOCK_STREAM | CProxyLinux_SOCK_NONBLOCK | CProxyLinux_SOCK_CLOEXEC, 0)
        }
        var ok = false
        defer { if !ok { close(fd) } }
        var one: Int32 = 1
        let size = socklen_t(MemoryLayout<Int32>.size)
        if case .unix(let path) = address {
            // A stale socket file from a previous run would make bind fail with EADDRINUSE.
            if !reusePort { unlink(path) }
        } else {
            try syscallValue("setsockopt(SO_REUSEADDR)") { setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, size) }
            if reusePort {
                try syscallValue("setsockopt(SO_REUSEPORT)") { setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, size) }
            }
            // Linux copies TCP_NODELAY from the listener to every connection it accepts, so set
            // once here it saves a setsockopt per accepted connection (one of the eight system
            // calls a `Connection: close` request costs). `SocketTests` checks the inheritance.
            setNoDelay(fd)
        }
        let bound = address.withSockAddr { bind(fd, $0, $1) }
        if bound != 0 { throw SystemError(call: "bind(\(address))", errno: lastErrno()) }
        try syscallValue("listen") { listen(fd, backlog) }
        ok = true
        return fd
    }

    /// Starts a non-blocking connect. Returns the fd; completion is signalled by writability.
    static func startConnect(_ address: SocketAddress) throws(SystemError) -> Int32 {
        let fd = try syscallValue("socket") {
            socket(address.family, CProxyLinux_SOCK_STREAM | CProxyLinux_SOCK_NONBLOCK | CProxyLinux_SOCK_CLOEXEC, 0)
        }
        let r = address.withSockAddr { connect(fd, $0, $1) }
        if r != 0 {
            let e = lastErrno()
            if e != EINPROGRESS && e != EINTR {
                close(fd)
                throw SystemError(call: "connect(\(address))", errno: e)
            }
        }
        if address.family != AF_UNIX { setNoDelay(fd) }
        return fd
    }

    /// The pending error of a socket whose non-blocking connect finished (0 = connected).
    static func pendingError(_ fd: Int32) -> Int32 {
        var err: Int32 = 0
        var len = socklen_t(MemoryLayout<Int32>.size)
        if getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 { return lastErrno() }
        return err
    }

    static func setNoDelay(_ fd: Int32) {
        var one: Int32 = 1
        _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
    }

    /// Accepts one connection; `nil` when the queue is empty.
    static func accept(_ listener: Int32, peer: inout PeerAddress) throws(SystemError) -> Int32? {
        var storage = sockaddr_storage()
        var len = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let r = try withUnsafeMutablePointer(to: &storage) { ptr throws(SystemError) -> IOResult in
            try ptr.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa throws(SystemError) -> IOResult in
                try syscall("accept4") { Int(CProxyLinux_accept4(listener, sa, &len, CProxyLinux_SOCK_NONBLOCK | CProxyLinux_SOCK_CLOEXEC)) }
            }
        }
        guard case .done(let fd) = r else { return nil }
        peer = withUnsafeBytes(of: &storage) { PeerAddress(storage: $0.baseAddress!) }
        return Int32(fd)
    }

    /// `recv`, not `read`: on a socket they do the same, but `read` goes through the VFS layer
    /// first (`vfs_read`: 1.7 % of the proxy's CPU in a profile of 64 KiB uploads, gone with
    /// `recv`; nginx and HAProxy use `recv`/`recvfrom` too).
    @inline(__always)
    static func read(_ fd: Int32, into pointer: UnsafeMutableRawPointer, count: Int) throws(SystemError) -> IOResult {
        try syscall("recv") { Glibc.recv(fd, pointer, count, 0) }
    }

    /// `more`: more bytes follow at once (MSG_MORE): TCP holds a partial segment back until
    /// a write without it, so that a body read in pieces leaves in full segments, and the
    /// peer is woken once for them rather than once per piece.
    @inline(__always)
    static func write(_ fd: Int32, from pointer: UnsafeRawPointer, count: Int, more: Bool = false) throws(SystemError) -> IOResult {
        // MSG_NOSIGNAL as well as the process-wide SIG_IGN: a closed peer must never kill us.
        try syscall("send") { Glibc.send(fd, pointer, count, Int32(MSG_NOSIGNAL) | (more ? Int32(MSG_MORE) : 0)) }
    }

    /// What a lingering close's read found (`discardInput`).
    enum Discarded { case nothing, some, closed }

    /// Lingering: drops what the peer has sent, until the socket is empty. TCP drops it in the
    /// kernel (`MSG_TRUNC`: nothing is copied, however much a flood sent); other sockets (Unix)
    /// are read into a scratch buffer on the stack, 16 KiB a read. `.closed` once the peer has closed or the socket failed.
    static func discardInput(_ fd: Int32) -> Discarded {
        var found = Discarded.nothing
        for _ in 0..<16 {
            var n = recv(fd, nil, 1 << 20, Int32(MSG_TRUNC | MSG_DONTWAIT))
            if n < 0 && CProxyLinux_errno() == EFAULT {
                // Not TCP: MSG_TRUNC without a buffer is TCP's alone.
                n = withUnsafeTemporaryAllocation(byteCount: 16 * 1024, alignment: 16) {
                    recv(fd, $0.baseAddress!, $0.count, Int32(MSG_DONTWAIT))
                }
            }
            if n > 0 { found = .some; continue }
            if n == 0 { return .closed }
            let e = CProxyLinux_errno()
            if e == EINTR { continue }
            return e == EAGAIN || e == EWOULDBLOCK ? found : .closed
        }
        return found
    }
}
