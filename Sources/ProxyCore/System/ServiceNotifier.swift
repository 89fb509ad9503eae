import CProxyLinux
#if canImport(Glibc)
import Glibc
#endif

/// The service manager's readiness protocol (systemd's `sd_notify`, `Type=notify`): one
/// datagram of `KEY=value` lines per state change, sent to the unix socket named by
/// `$NOTIFY_SOCKET`. Written here rather than linked from libsystemd: the protocol is a
/// single `sendto`, and the package then depends on no more than it did.
public final class ServiceNotifier {
    private var fd: Int32
    private var address = sockaddr_un()
    private let addressLength: socklen_t

    /// The notifier for `$NOTIFY_SOCKET`'s value; nil when it is unset (not started by a
    /// service manager that waits for readiness). A name that starts with `@` is in the
    /// abstract namespace (its first byte is NUL on the wire, and it has no terminator).
    public init?(socket name: String?) throws(SystemError) {
        guard let name, !name.isEmpty else { return nil }
        var path = Array(name.utf8)
        let abstract = path[0] == UInt8(ascii: "@")
        if abstract { path[0] = 0 }
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        // A path needs its NUL terminator inside sun_path; an abstract name does not.
        guard path.count + (abstract ? 0 : 1) <= capacity, abstract || path[0] == UInt8(ascii: "/") else {
            throw SystemError(call: "NOTIFY_SOCKET", errno: EINVAL)
        }
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { sunPath in
            sunPath.copyBytes(from: path)
        }
        addressLength = socklen_t(MemoryLayout<sockaddr_un>.offset(of: \.sun_path)! + path.count + (abstract ? 0 : 1))
        fd = try syscallValue("socket(AF_UNIX, SOCK_DGRAM)") {
            socket(AF_UNIX, CProxyLinux_SOCK_DGRAM | CProxyLinux_SOCK_CLOEXEC, 0)
        }
    }

    deinit { close() }

    /// Idempotent.
    public func close() {
        if fd >= 0 { _ = Glibc.close(fd) }
        fd = -1
    }

    /// The listeners are bound and serving (and after a reload: serving with whichever
    /// configuration it left running).
    public func ready() throws(SystemError) { try send("READY=1") }

    /// A reload has begun. systemd 253 and later want the CLOCK_MONOTONIC time with it, to
    /// tell this reload's READY=1 from an earlier one's.
    public func reloading(monotonicNanoseconds: UInt64) throws(SystemError) {
        try send("RELOADING=1\nMONOTONIC_USEC=\(monotonicNanoseconds / 1000)")
    }

    /// The process is draining and will exit.
    public func stopping() throws(SystemError) { try send("STOPPING=1") }

    /// One datagram. The socket is the manager's, which reads it at once; a full queue is
    /// reported rather than waited on (the main thread must not block here).
    public func send(_ state: String) throws(SystemError) {
        guard fd >= 0 else { return }
        let bytes = Array(state.utf8)
        let address = self.address, length = addressLength, fd = self.fd
        let result = try syscall("sendto(NOTIFY_SOCKET)") {
            withUnsafePointer(to: address) { a in
                a.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa in
                    bytes.withUnsafeBytes { sendto(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT | MSG_NOSIGNAL), sa, length) }
                }
            }
        }
        guard case .done(let sent) = result else { throw SystemError(call: "sendto(NOTIFY_SOCKET)", errno: EAGAIN) }
        if sent != bytes.count { throw SystemError(call: "sendto(NOTIFY_SOCKET)", errno: EMSGSIZE) }
    }
}
