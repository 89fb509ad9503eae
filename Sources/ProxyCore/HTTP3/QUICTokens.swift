import CNgtcp2
#if canImport(Glibc)
import Glibc
#endif

/// Address validation (RFC 9000 §8.1) and stateless resets (§10.3), on ngtcp2's own token
/// formats: AEAD-sealed under keys derived from one secret, bound to the client's address, with
/// the time they were made (wall clock: a token outlives nothing but this secret).
///
/// - A Retry token answers a client's first Initial when the server asks for proof of address
///   (`QUICRetryPolicy`); it carries the Initial's connection ID back (§7.3's
///   `original_destination_connection_id`) and is good for `retryLifetime`.
/// - A regular token (NEW_TOKEN) lets a returning client skip that round trip; good for
///   `regularLifetime`.
/// - A stateless reset token is derived from a connection ID alone, so that a loop that lost
///   the connection (closed and forgotten) can still end it for the client.
struct QUICTokens: Sendable {
    static let retryLifetime: UInt64 = 10 * 1_000_000_000
    static let regularLifetime: UInt64 = 3_600 * 1_000_000_000

    /// 32 random bytes: the process's (a restart makes every outstanding token invalid, which
    /// costs a returning client one Retry).
    let secret: [UInt8]

    init(secret: [UInt8]) {
        precondition(secret.count >= 16)
        self.secret = secret
    }

    /// The token for a Retry to `client`, whose Initial was sent to `originalDCID`; the Retry's
    /// own source connection ID is `retrySCID`. `now`: wall-clock nanoseconds.
    func retryToken(client: SocketAddress, originalDCID: [UInt8], retrySCID: [UInt8], version: UInt32, now: UInt64) -> [UInt8]? {
        var token = [UInt8](repeating: 0, count: CNgtcp2_max_retry_tokenlen())
        var odcid = Self.cid(originalDCID), scid = Self.cid(retrySCID)
        let n = client.withSockAddr { address, length in
            ngtcp2_crypto_generate_retry_token(&token, secret, secret.count, version, address, ngtcp2_socklen(length), &scid, &odcid, now)
        }
        return n < 0 ? nil : Array(token[0..<n])
    }

    /// The connection ID of the Initial a valid Retry token answered; nil when the token is
    /// not one of ours, not for `client`, not for `dcid` (the Retry's source ID, which the
    /// client now sends to), or older than `retryLifetime`.
    func validateRetryToken(_ token: [UInt8], client: SocketAddress, dcid: [UInt8], version: UInt32, now: UInt64) -> [UInt8]? {
        guard token.first == UInt8(NGTCP2_CRYPTO_TOKEN_MAGIC_RETRY) else { return nil }
        var odcid = ngtcp2_cid()
        var id = Self.cid(dcid)
        let rv = client.withSockAddr { address, length in
            ngtcp2_crypto_verify_retry_token(&odcid, token, token.count, secret, secret.count, version, address,
                                             ngtcp2_socklen(length), &id, Self.retryLifetime, now)
        }
        return rv == 0 ? Self.bytes(odcid) : nil
    }

    /// A token for NEW_TOKEN, for `client`'s next connection.
    func regularToken(client: SocketAddress, now: UInt64) -> [UInt8]? {
        var token = [UInt8](repeating: 0, count: CNgtcp2_max_regular_tokenlen())
        let n = client.withSockAddr { address, length in
            ngtcp2_crypto_generate_regular_token(&token, secret, secret.count, address, ngtcp2_socklen(length), now)
        }
        return n < 0 ? nil : Array(token[0..<n])
    }

    /// Whether a NEW_TOKEN token is ours, for `client`, and younger than `regularLifetime`.
    func validateRegularToken(_ token: [UInt8], client: SocketAddress, now: UInt64) -> Bool {
        guard token.first == UInt8(NGTCP2_CRYPTO_TOKEN_MAGIC_REGULAR) else { return false }
        return client.withSockAddr { address, length in
            ngtcp2_crypto_verify_regular_token(token, token.count, secret, secret.count, address, ngtcp2_socklen(length),
                                               Self.regularLifetime, now)
        } == 0
    }

    /// The stateless reset token of a connection ID (16 bytes).
    func statelessResetToken(for id: [UInt8]) -> [UInt8] {
        var token = [UInt8](repeating: 0, count: Int(NGTCP2_STATELESS_RESET_TOKENLEN))
        var cid = Self.cid(id)
        precondition(ngtcp2_crypto_generate_stateless_reset_token(&token, secret, secret.count, &cid) == 0)
        return token
    }

    static func cid(_ bytes: [UInt8]) -> ngtcp2_cid {
        var cid = ngtcp2_cid()
        bytes.withUnsafeBufferPointer { ngtcp2_cid_init(&cid, $0.baseAddress, $0.count) }
        return cid
    }

    static func bytes(_ cid: ngtcp2_cid) -> [UInt8] {
        withUnsafeBytes(of: cid.data) { Array($0.prefix(cid.datalen)) }
    }
}

/// When a client's first Initial is answered with a Retry (proof of address, one round trip)
/// instead of a handshake: always, or while more handshakes are in progress than `threshold`
/// (a flood of Initials from spoofed addresses: each handshake costs the server a signature),
/// never for a client that already proved its address (a valid token in its Initial).
public struct QUICRetryPolicy: Sendable, Equatable {
    public enum Mode: Sendable, Equatable {
        case always
        case aboveHandshakes(Int)
    }

    public var mode = Mode.aboveHandshakes(512)

    public init(mode: Mode = .aboveHandshakes(512)) { self.mode = mode }

    func asksForRetry(handshakesInProgress: Int, addressValidated: Bool) -> Bool {
        if addressValidated { return false }
        switch mode {
        case .always: return true
        case .aboveHandshakes(let threshold): return handshakesInProgress >= threshold
        }
    }
}
