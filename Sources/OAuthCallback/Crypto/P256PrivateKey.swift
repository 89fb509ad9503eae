import COpenSSL

/// A P-256 private key for ES256 signing — Apple's Sign in with Apple client secret is an
/// ES256 JWT signed with the `.p8` key from the developer portal (PKCS#8 PEM,
/// `-----BEGIN PRIVATE KEY-----`).
public final class P256PrivateKey: Sendable {
    let key: EVPKey

    /// Loads a PEM private key (PKCS#8 `PRIVATE KEY`, or SEC 1 `EC PRIVATE KEY`). Encrypted
    /// PEM is refused rather than prompting for a passphrase on the terminal, which is what
    /// OpenSSL does when no password callback is given. The key must be on P-256.
    public init(pem: String) throws(CryptoError) {
        var pem = pem
        let loaded = pem.withUTF8 { text -> OpaquePointer? in
            // A read-only memory BIO over our bytes: valid only inside this closure.
            guard let bio = OpenSSLPointer(BIO_new_mem_buf(text.baseAddress, Int32(text.count)),
                                           free: { BIO_free($0) }) else { return nil }
            return PEM_read_bio_PrivateKey(bio.pointer, nil, { _, _, _, _ in -1 }, nil)
        }
        guard let loaded else { throw .openSSL(.invalidKey, "PEM_read_bio_PrivateKey") }
        key = try Self.requireP256(EVPKey(taking: loaded))
    }

    /// Loads a DER private key: PKCS#8 `PrivateKeyInfo` (the body of a `.p8` file) or SEC 1.
    public init(der: [UInt8]) throws(CryptoError) {
        let loaded = der.withUnsafeBufferPointer { buffer -> OpaquePointer? in
            var cursor = buffer.baseAddress
            return d2i_AutoPrivateKey(nil, &cursor, buffer.count)
        }
        guard let loaded else { throw .openSSL(.invalidKey, "d2i_AutoPrivateKey") }
        key = try Self.requireP256(EVPKey(taking: loaded))
    }

    /// A fresh random key (tests, ephemeral keys).
    public static func generate() throws(CryptoError) -> P256PrivateKey {
        guard let generated = COpenSSL_EVP_PKEY_Q_keygen_EC("prime256v1") else {
            throw .openSSL(.internalFailure, "EVP_PKEY_Q_keygen(EC)")
        }
        return P256PrivateKey(validated: try requireP256(EVPKey(taking: generated)))
    }

    private init(validated key: EVPKey) { self.key = key }

    private static func requireP256(_ key: EVPKey) throws(CryptoError) -> EVPKey {
        guard key.isA("EC") else { throw CryptoError(.invalidKey, "private key is not an EC key") }
        var name = [CChar](repeating: 0, count: 64)
        var length = 0
        let gotGroup = name.withUnsafeMutableBufferPointer {
            EVP_PKEY_get_group_name(key.pointer, $0.baseAddress, $0.count, &length)
        }
        guard gotGroup == 1, name.withUnsafeBufferPointer({ String(cString: $0.baseAddress!) }) == "prime256v1" else {
            OpenSSLErrorQueue.drain()
            throw CryptoError(.invalidKey, "EC private key is not on P-256")
        }
        return key
    }

    /// The matching public key.
    public var publicKey: P256PublicKey {
        guard let point = key.uncompressedPublicPoint(),
              let pub = try? P256PublicKey(x: Array(point[1...32]), y: Array(point[33...64])) else {
            // OpenSSL derives the point when a PKCS#8 file omits it; a key without one
            // could not have been loaded.
            preconditionFailure("P-256 private key has no usable public point")
        }
        return pub
    }

    /// Signs `message` with ES256 and returns the JOSE form `r ‖ s` (64 bytes).
    public func signES256(_ message: [UInt8]) throws(CryptoError) -> [UInt8] {
        let der = try key.signSHA256(message)
        guard let raw = P256PublicKey.rawSignature(fromDER: der) else {
            throw CryptoError(.internalFailure, "ECDSA signature could not be converted to r‖s")
        }
        return raw
    }
}
