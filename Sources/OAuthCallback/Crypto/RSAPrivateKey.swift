import COpenSSL

/// An RSA private key for RS256 signing. The proxy itself only verifies RS256; this exists
/// so tests can mint tokens the way an IdP would (and for `private_key_jwt` client
/// authentication should a provider need it).
final class RSAPrivateKey: Sendable {
    let key: EVPKey

    /// A fresh random key. `bits` below 2048 are allowed here so tests can show that weak
    /// keys are refused on the verifying side.
    static func generate(bits: Int) throws(CryptoError) -> RSAPrivateKey {
        guard let generated = COpenSSL_EVP_PKEY_Q_keygen_RSA(bits) else {
            throw .openSSL(.internalFailure, "EVP_PKEY_Q_keygen(RSA)")
        }
        return RSAPrivateKey(key: EVPKey(taking: generated))
    }

    private init(key: EVPKey) { self.key = key }

    /// Big-endian `n` and `e`, as a JWK publishes them.
    var publicComponents: (modulus: [UInt8], exponent: [UInt8]) {
        (bigNumberParameter("n"), bigNumberParameter("e"))
    }

    /// Signs `message` with RS256 (RSASSA-PKCS1-v1_5, SHA-256).
    func signRS256(_ message: [UInt8]) throws(CryptoError) -> [UInt8] {
        try key.signSHA256(message)
    }

    private func bigNumberParameter(_ name: String) -> [UInt8] {
        var bn: OpaquePointer?
        guard EVP_PKEY_get_bn_param(key.pointer, name, &bn) == 1, let bn else {
            preconditionFailure("RSA key without parameter \(name)")
        }
        defer { BN_free(bn) }
        var bytes = [UInt8](repeating: 0, count: Int((BN_num_bits(bn) + 7) / 8))
        _ = bytes.withUnsafeMutableBufferPointer { BN_bn2bin(bn, $0.baseAddress) }
        return bytes
    }
}
