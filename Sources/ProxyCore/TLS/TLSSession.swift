import COpenSSL
#if canImport(Glibc)
import Glibc
#endif

/// One connection's TLS state: the single Swift owner of its `SSL *`, which reads and writes
/// the connection's non-blocking socket itself (`SSL_set_fd`).
///
/// OpenSSL's "want read / want write" answers become `.wouldBlock` here and readiness
/// interest in the channel that drives the session. A server session reads ahead (one
/// `read(2)` takes what the socket holds, up to OpenSSL's ~17 KiB buffer, instead of a
/// record's 5-byte header and then its body): whatever OpenSSL holds epoll cannot see, so
/// `Transport` takes every whole record out (`readBuffered`) before it goes back to epoll, and
/// callers give `read` room for a whole record (`recordSize`) so no decrypted bytes stay behind.
final class TLSSession {
    let ssl: OpaquePointer
    /// A fatal error happened: OpenSSL forbids a close_notify after one.
    private(set) var failed = false
    /// Why the session failed, for logs.
    private(set) var lastFailure: String?
    private var closeNotifySent = false

    /// Largest plaintext in one TLS record (2^14).
    static let recordSize = 16 * 1024

    /// Takes ownership of `ssl`, already bound to its socket.
    init(ssl: OpaquePointer) { self.ssl = ssl }

    deinit { SSL_free(ssl) }

    /// The handshake chose `h2` in ALPN (`TLSServerContext` picks it only where allowed).
    var negotiatedHTTP2: Bool {
        var p: UnsafePointer<UInt8>? = nil
        var length: UInt32 = 0
        SSL_get0_alpn_selected(ssl, &p, &length)
        guard let p, length == 2 else { return false }
        return p[0] == 0x68 && p[1] == 0x32
    }

    /// OpenSSL holds bytes read from the socket and not yet handed out: whole records to
    /// decrypt, or the start of one whose rest is still in the kernel.
    var hasPending: Bool { SSL_has_pending(ssl) == 1 }

    /// The finished handshake resumed a session (a ticket) rather than making a new one.
    var resumed: Bool { SSL_session_reused(ssl) == 1 }

    enum HandshakeStep {
        case done
        case wantRead
        case wantWrite
        case failed(TLSFailure)
    }

    /// Advances the handshake as far as the socket allows.
    func handshake() -> HandshakeStep {
        TLSErrorQueue.clear()
        let r = SSL_do_handshake(ssl)
        if r == 1 { return .done }
        switch SSL_get_error(ssl, r) {
        case SSL_ERROR_WANT_READ: return .wantRead
        case SSL_ERROR_WANT_WRITE: return .wantWrite
        case let code: return .failed(failure(code))
        }
    }

    /// Decrypts into `pointer`: `.done(0)` at the peer's close (close_notify or EOF).
    @inline(__always)
    func read(into pointer: UnsafeMutableRawPointer, count: Int) throws(SystemError) -> IOResult {
        TLSErrorQueue.clear()
        var n = 0
        if SSL_read_ex(ssl, pointer, count, &n) == 1 { return .done(n) }
        switch SSL_get_error(ssl, 0) {
        case SSL_ERROR_WANT_READ:
            return .wouldBlock
        case SSL_ERROR_WANT_WRITE:
            // A post-handshake message (a TLS 1.3 key update) needs an answer the socket cannot
            // take now; OpenSSL keeps it and sends it on the next SSL_read or SSL_write.
            return .wouldBlock
        case SSL_ERROR_ZERO_RETURN:
            return .done(0)
        case let code:
            throw fatal(failure(code).reason)
        }
    }

    /// Decrypts the next record OpenSSL already holds into `pointer`, without reading the
    /// socket: `.wouldBlock` when no whole record is buffered, `.done(0)` at close_notify.
    func readBuffered(into pointer: UnsafeMutableRawPointer, count: Int) throws(SystemError) -> IOResult {
        TLSErrorQueue.clear()
        let r = COpenSSL_SSL_read_buffered(ssl, pointer, count)
        if r > 0 { return .done(r) }
        if r == 0 { return .wouldBlock }
        if r == -1 { return .done(0) }
        throw fatal(failure(SSL_ERROR_SSL).reason)
    }

    /// Encrypts and sends from `pointer`; partial writes report what was taken. A retry after
    /// `.wouldBlock` may come from a moved buffer (SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER) with at
    /// least as many bytes, which is how connection output buffers behave.
    @inline(__always)
    func write(from pointer: UnsafeRawPointer, count: Int) throws(SystemError) -> IOResult {
        TLSErrorQueue.clear()
        var n = 0
        if SSL_write_ex(ssl, pointer, count, &n) == 1 { return .done(n) }
        switch SSL_get_error(ssl, 0) {
        case SSL_ERROR_WANT_WRITE:
            return .wouldBlock
        case SSL_ERROR_WANT_READ:
            // Only a renegotiation makes a write wait for input, and renegotiation is off: a
            // peer that gets here is misbehaving.
            TLSErrorQueue.clear()
            throw fatal("write blocked on a read (renegotiation attempt)")
        case let code:
            throw fatal(failure(code).reason)
        }
    }

    /// Sends close_notify once, if the socket takes it now; never waits for the peer's.
    func closeNotify() {
        guard !failed, !closeNotifySent else { return }
        closeNotifySent = true
        TLSErrorQueue.clear()
        _ = SSL_shutdown(ssl)
        TLSErrorQueue.clear()
    }

    /// The negotiated protocol version ("TLSv1.3").
    var version: String { String(cString: SSL_get_version(ssl)) }

    /// Marks the session failed and returns the error its read or write throws.
    private func fatal(_ reason: String) -> SystemError {
        failed = true
        lastFailure = reason
        return SystemError(call: "TLS", errno: EPROTO)
    }

    private func failure(_ code: Int32) -> TLSFailure {
        failed = true
        let packed = ERR_peek_error()
        let plaintext = ERR_GET_LIB(packed) == ERR_LIB_SSL && (ERR_GET_REASON(packed) == SSL_R_HTTP_REQUEST || ERR_GET_REASON(packed) == SSL_R_HTTPS_PROXY_REQUEST)
        var reason: String
        switch code {
        case SSL_ERROR_SYSCALL:
            let e = lastErrno()
            TLSErrorQueue.clear()
            reason = e == 0 ? "connection closed during TLS" : SystemError(call: "TLS", errno: e).reason
        default:
            reason = TLSErrorQueue.drain() ?? "TLS error \(code)"
        }
        let verify = SSL_get_verify_result(ssl)
        if verify != Int(X509_V_OK), let text = X509_verify_cert_error_string(verify) {
            reason += " (\(String(cString: text)))"
        }
        return TLSFailure(reason: reason, plaintextHTTP: plaintext)
    }
}

/// Why a TLS connection failed, for logs.
struct TLSFailure: Error {
    let reason: String
    /// The peer spoke plain HTTP to a TLS port.
    let plaintextHTTP: Bool
}
