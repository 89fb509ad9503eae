import CProxyLinux
#if canImport(Glibc)
import Glibc
#endif

/// What one non-blocking `splice(2)` between a socket and a pipe did, errno read at once (an
/// interrupted call is made again). The four loops that move spliced bodies
/// (`ClientExchange+Splice`, `ClientExchange+RequestSplice`) switch on it.
enum SpliceCall {
    /// Bytes moved.
    case moved(Int)
    /// The input's end: the peer sending into the pipe closed.
    case ended
    /// Nothing now: wait for readiness.
    case wouldBlock
    case failed(errno: Int32)

    /// Up to `count` bytes from `from` to `to`. `more`: more bytes follow at once into a
    /// socket (SPLICE_F_MORE: TCP holds a partial segment back, as MSG_MORE does).
    static func run(from: Int32, to: Int32, count: Int, more: Bool = false) -> SpliceCall {
        while true {
            let n = more ? CProxyLinux_splice_more(from, to, count) : CProxyLinux_splice(from, to, count)
            if n > 0 { return .moved(n) }
            if n == 0 { return .ended }
            let e = CProxyLinux_errno()
            if e == EINTR { continue }
            return e == EAGAIN || e == EWOULDBLOCK ? .wouldBlock : .failed(errno: e)
        }
    }
}
