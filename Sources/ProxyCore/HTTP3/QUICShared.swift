import CNgtcp2
import COpenSSL
#if canImport(Glibc)
import Glibc
#endif

/// What the loops' QUIC sockets share: the loops (to hand a datagram to its connection's),
/// the token secret, and each loop's connection-ID codec. `@unchecked Sendable`: `ids(loop)` is
/// only used on that loop's thread (the cipher contexts are not shared between threads); the
/// rest is immutable.
final class QUICShared: @unchecked Sendable {
    let loops: [EventLoop]
    let tokens: QUICTokens
    private let perLoop: [QUICConnectionIDs]
    /// The secret the session-ticket keys are derived from (resumption: a returning client skips
    /// the certificate's signature; `QUICTicketKey`). The process's: a restart means a full
    /// handshake, as a new TCP ticket key does.
    let ticketSecret = QUICShared.random(QUICTicketKey.length)
    /// The TLS priorities every QUIC handshake uses (TLS 1.3 only, no middlebox compatibility
    /// mode, RFC 9001 §8.4), parsed once: a priority set per session costs 8 KiB of heap for as
    /// long as the connection lives (measured with massif; `gnutls_priority_set` shares one,
    /// reference-counted, between sessions and threads).
    let priority: gnutls_priority_t = {
        var made: gnutls_priority_t?
        precondition(gnutls_priority_init(&made, "%DISABLE_TLS13_COMPAT_MODE:NORMAL:-VERS-ALL:+VERS-TLS1.3", nil) == 0 && made != nil,
                     "GnuTLS refuses the QUIC priority string")
        return made!
    }()
    /// The anti-replay check for early data (`http3.early_data`; nil: GnuTLS could not make one,
    /// and early data stays off).
    let antiReplay = QUICAntiReplay()

    init(loops: [EventLoop]) {
        self.loops = loops
        // Per process: a restart invalidates outstanding tokens and IDs, which costs a
        // returning client one Retry; a connection of the old process gets no answer (its IDs
        // decrypt to nothing of ours) and times out or falls back to TCP.
        tokens = QUICTokens(secret: Self.random(32))
        let key = Self.random(16)
        perLoop = loops.map { _ in QUICConnectionIDs(key: key) }
    }

    /// Sessions under way hold references of their own to the priority cache.
    deinit { gnutls_priority_deinit(priority) }

    @inline(__always) func ids(_ loop: EventLoop) -> QUICConnectionIDs { perLoop[loop.index] }

    static func random(_ count: Int) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        precondition(RAND_bytes(&bytes, Int32(count)) == 1, "RAND_bytes failed")
        return bytes
    }

    /// Wall-clock nanoseconds (tokens carry their time of issue across restarts).
    static func wallClock() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }
}
