import COpenSSL

/// The connection IDs this server gives its QUIC connections (RFC 9000 §5.1), and the loop each
/// one belongs to. Every loop has a UDP socket of its own on the same port (`SO_REUSEPORT`), and
/// the kernel picks the socket by the packet's addresses — so a client whose address changes (NAT
/// rebinding, Wi-Fi to cellular) lands on another loop. The connection ID says which loop owns
/// the connection: that loop gets the datagram, as the acceptor hands a descriptor over.
///
/// An ID is one AES-128 block (16 bytes: the longest RFC 9000 allows is 20) encrypting the loop's
/// number, two fixed bytes and 13 random ones under a key only this process knows (QUIC-LB's
/// block-cipher form): an observer can neither read the loop nor link two IDs of one connection.
/// A client's own first IDs (its Initial packets') decrypt to garbage: the fixed bytes fail to
/// match (but for one in 65,536, which another loop then answers as a new connection).
///
/// One per loop (the cipher contexts are not shared between threads); `key` is the process's.
final class QUICConnectionIDs {
    static let length = 16
    private static let marker: (UInt8, UInt8) = (0x51, 0x33)

    private let encrypt: OpaquePointer
    private let decrypt: OpaquePointer

    /// `key`: 16 bytes, the same for every loop of the process.
    init(key: [UInt8]) {
        precondition(key.count == 16)
        encrypt = EVP_CIPHER_CTX_new()
        decrypt = EVP_CIPHER_CTX_new()
        precondition(EVP_EncryptInit_ex(encrypt, EVP_aes_128_ecb(), nil, key, nil) == 1
                     && EVP_DecryptInit_ex(decrypt, EVP_aes_128_ecb(), nil, key, nil) == 1)
        EVP_CIPHER_CTX_set_padding(encrypt, 0)
        EVP_CIPHER_CTX_set_padding(decrypt, 0)
    }

    deinit {
        EVP_CIPHER_CTX_free(encrypt)
        EVP_CIPHER_CTX_free(decrypt)
    }

    /// A new ID for a connection of `loop` (0–255); `random`: 13 fresh random bytes.
    func make(loop: Int, random: [UInt8]) -> [UInt8] {
        precondition((0..<256).contains(loop) && random.count == 13)
        let plain = [UInt8(loop), Self.marker.0, Self.marker.1] + random
        return crypt(encrypt, plain)!
    }

    /// The loop an ID of ours belongs to; nil for any other ID (a client's, or not 16 bytes).
    /// Runs for every datagram: decrypted into a stack buffer, nothing allocated.
    func loop(of id: UnsafeRawBufferPointer) -> Int? {
        guard id.count == Self.length else { return nil }
        var plain: (UInt64, UInt64) = (0, 0)
        var length: Int32 = 0
        let decrypted = withUnsafeMutableBytes(of: &plain) { out in
            EVP_CipherUpdate(decrypt, out.baseAddress!.assumingMemoryBound(to: UInt8.self), &length,
                             id.baseAddress!.assumingMemoryBound(to: UInt8.self), 16) == 1 && length == 16
        }
        guard decrypted else { return nil }
        return withUnsafeBytes(of: &plain) { p in
            p[1] == Self.marker.0 && p[2] == Self.marker.1 ? Int(p[0]) : nil
        }
    }

    private func crypt(_ context: OpaquePointer, _ block: [UInt8]) -> [UInt8]? {
        var out = [UInt8](repeating: 0, count: 16)
        var length: Int32 = 0
        guard EVP_CipherUpdate(context, &out, &length, block, 16) == 1, length == 16 else { return nil }
        return out
    }
}

/// Where a datagram goes, from its first packet's header alone (RFC 9000 §17; RFC 8999's
/// invariants, so any version's packets route the same way).
enum QUICDatagramRoute: Equatable {
    /// Not a QUIC packet this server can use: dropped.
    case drop
    /// A connection ID of ours: the loop that owns it.
    case loop(Int)
    /// Any other: this loop (a client's first packets, a version to negotiate, a stray short
    /// packet that may earn a stateless reset).
    case here

    /// `ids`: the receiving loop's codec; `loops`: how many run.
    static func of(_ datagram: UnsafeRawBufferPointer, ids: QUICConnectionIDs, loops: Int) -> QUICDatagramRoute {
        guard let first = datagram.first else { return .drop }
        let id: UnsafeRawBufferPointer
        if first & 0x80 != 0 {
            // Long header: flags, version (4), DCID length, DCID.
            guard datagram.count >= 7 else { return .drop }
            let length = Int(datagram[5])
            // RFC 9000 §17.2 (and RFC 9369 for version 2): 20 bytes at most; a longer one is
            // dropped unless it asks for version negotiation (a version this server does not speak).
            let version = UInt32(datagram[1]) << 24 | UInt32(datagram[2]) << 16 | UInt32(datagram[3]) << 8 | UInt32(datagram[4])
            let known = version == 0x0000_0001 || version == 0x6b33_43cf
            guard datagram.count >= 6 + length, !(known && length > 20) else { return .drop }
            id = UnsafeRawBufferPointer(rebasing: datagram[6..<(6 + length)])
        } else {
            // Short header: the DCID is ours, so its length is ours.
            guard datagram.count >= 1 + QUICConnectionIDs.length else { return .drop }
            id = UnsafeRawBufferPointer(rebasing: datagram[1..<(1 + QUICConnectionIDs.length)])
        }
        guard let loop = ids.loop(of: id), loop < loops else { return .here }
        return .loop(loop)
    }
}
