import CProxyLinux
#if canImport(Glibc)
import Glibc
#endif

/// A failed system call: the call's name and its errno. Raw errno is read nowhere else.
public struct SystemError: Error, Sendable, CustomStringConvertible {
    public let call: String
    public let errno: Int32

    public var description: String { "\(call): \(reason)" }

    /// The errno's text alone ("No such file or directory").
    public var reason: String { strerror(errno).map { String(cString: $0) } ?? "errno \(errno)" }
}

/// Outcome of a non-blocking I/O call.
enum IOResult: Equatable {
    case done(Int)
    case wouldBlock
}

/// Runs a system call, retrying EINTR, mapping EAGAIN to `.wouldBlock`, throwing anything else.
@inline(__always)
func syscall(_ name: StaticString, _ body: () -> Int) throws(SystemError) -> IOResult {
    while true {
        let r = body()
        if r >= 0 { return .done(r) }
        let e = CProxyLinux_errno()
        if e == EINTR { continue }
        if e == EAGAIN || e == EWOULDBLOCK { return .wouldBlock }
        throw SystemError(call: "\(name)", errno: e)
    }
}

/// Like `syscall` for calls that never legitimately block.
@inline(__always)
@discardableResult
func syscallValue(_ name: StaticString, _ body: () -> Int32) throws(SystemError) -> Int32 {
    while true {
        let r = body()
        if r >= 0 { return r }
        let e = CProxyLinux_errno()
        if e == EINTR { continue }
        throw SystemError(call: "\(name)", errno: e)
    }
}

/// The errno of the last failed call, for the few places (connect in progress) that branch on it.
@inline(__always)
func lastErrno() -> Int32 { CProxyLinux_errno() }
