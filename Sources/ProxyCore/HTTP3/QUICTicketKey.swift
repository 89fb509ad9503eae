import CNgtcp2
import COpenSSL

/// The key GnuTLS encrypts a loop's QUIC session tickets with, derived from the process's
/// secret and the limits a returning client may rely on.
///
/// With `http3.early_data`, a client sends its 0-RTT requests under the transport parameters
/// and HTTP/3 settings it remembers from the connection that gave it the ticket. A server that
/// accepts them must not have lowered any of those limits (RFC 9000 §7.4.1, RFC 9114 §7.2.4.2):
/// after a reload that lowered `http3.max_streams`, say, ngtcp2 ended such a connection with
/// STREAM_LIMIT_ERROR and its requests were lost. Every limit is in the key's derivation, so a
/// reload that changes one changes the key: tickets from before no longer decrypt, the client
/// gets a full handshake, and its early data is rejected and sent again at 1-RTT. A reload
/// that changes nothing of them keeps the key, and resumption with it.
///
/// One per listener and loop, used on that loop's thread. GnuTLS copies the key into each
/// session (`gnutls_session_ticket_enable_server`), so replacing it leaves sessions under way
/// alone.
final class QUICTicketKey {
    /// What a returning client's early data may rely on.
    struct Scope: Hashable {
        var maxStreams: Int
        var streamWindow: Int
        var connectionWindow: Int
        /// SETTINGS_MAX_FIELD_SECTION_SIZE.
        var headerListLimit: Int

        init(_ config: ProxyConfig) {
            maxStreams = config.http3.maxStreams
            streamWindow = config.http3.streamWindow
            connectionWindow = config.http3.connectionWindow
            headerListLimit = HTTP2Stream.headerListLimit(config.limits)
        }

        /// The values as bytes, for the derivation.
        var encoded: [UInt8] {
            [maxStreams, streamWindow, connectionWindow, headerListLimit].flatMap { v in
                (0..<8).map { UInt8(truncatingIfNeeded: UInt64(v) >> (8 * $0)) }
            }
        }
    }

    /// GnuTLS's ticket master key size (TICKET_MASTER_KEY_SIZE): an HMAC-SHA512.
    static let length = 64

    private let secret: [UInt8]
    private let bytes = UnsafeMutablePointer<UInt8>.allocate(capacity: QUICTicketKey.length)
    /// What `gnutls_session_ticket_enable_server` takes; its bytes are this object's.
    let datum = UnsafeMutablePointer<gnutls_datum_t>.allocate(capacity: 1)
    private(set) var scope: Scope?

    /// `secret`: the process's, the same for every loop.
    init(secret: [UInt8], config: ProxyConfig) {
        self.secret = secret
        datum.initialize(to: gnutls_datum_t(data: bytes, size: UInt32(Self.length)))
        use(config)
    }

    deinit {
        datum.deinitialize(count: 1)
        datum.deallocate()
        bytes.deallocate()
    }

    /// Derives the key for `config`'s limits, if they changed.
    func use(_ config: ProxyConfig) {
        let scope = Scope(config)
        guard scope != self.scope else { return }
        self.scope = scope
        let key = Self.derive(secret: secret, scope: scope)
        bytes.update(from: key, count: Self.length)
    }

    /// HMAC-SHA512(secret, scope).
    static func derive(secret: [UInt8], scope: Scope) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: length)
        var written = 0
        let data = scope.encoded
        let made = EVP_Q_mac(nil, "HMAC", nil, "SHA512", nil, secret, secret.count, data, data.count, &out, out.count, &written)
        precondition(made != nil && written == length, "HMAC-SHA512 failed")
        return out
    }
}
