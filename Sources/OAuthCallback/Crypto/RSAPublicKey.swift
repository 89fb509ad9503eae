import COpenSSL

/// An RSA public key built from a JWK's `n` and `e` (big-endian unsigned integers), used to
/// verify RS256 (RSASSA-PKCS1-v1_5 with SHA-256, RFC 7518 §3.3).
public final class RSAPublicKey: Sendable {
    /// RFC 7518 §3.3: keys of 2048 bits or larger MUST be used.
    public static let minimumBits = 2048
    /// Verification cost grows with the modulus; nobody publishes signing keys above this.
    public static let maximumBits = 8192

    let key: EVPKey

    public var bitCount: Int { key.bitCount }

    public init(modulus: [UInt8], exponent: [UInt8]) throws(CryptoError) {
        let n = modulus.drop(while: { $0 == 0 })
        let e = exponent.drop(while: { $0 == 0 })
        guard !n.isEmpty, !e.isEmpty else { throw CryptoError(.invalidKey, "RSA modulus or exponent is empty") }
        guard n.count * 8 <= Self.maximumBits else { throw CryptoError(.invalidKey, "RSA modulus is larger than 8192 bits") }
        // Public exponents are small odd numbers (3, 65537); anything past 64 bits is junk
        // and even values are never valid.
        guard e.count <= 8, e.last! & 1 == 1, !(e.count == 1 && e.first! == 1) else {
            throw CryptoError(.invalidKey, "RSA public exponent is invalid")
        }
        let nBN = try n.withUnsafeBytes { bytes in Result { () throws(CryptoError) in try OpenSSLPointer.bigNumber(bytes) } }.get()
        let eBN = try e.withUnsafeBytes { bytes in Result { () throws(CryptoError) in try OpenSSLPointer.bigNumber(bytes) } }.get()
        // The BIGNUMs and the static key names stay alive until fromPublicParameters returns.
        let key = try withExtendedLifetime((nBN, eBN)) { () throws(CryptoError) -> EVPKey in
            try EVPKey.fromPublicParameters(type: "RSA") { builder in
                OSSL_PARAM_BLD_push_BN(builder, COpenSSL_PARAM_RSA_N(), nBN.pointer) == 1
                    && OSSL_PARAM_BLD_push_BN(builder, COpenSSL_PARAM_RSA_E(), eBN.pointer) == 1
            }
        }
        guard key.bitCount >= Self.minimumBits else {
            throw CryptoError(.weakKey, "RSA key has \(key.bitCount) bits; at least 2048 are required")
        }
        self.key = key
    }

    /// Verifies an RS256 signature over `message` (the JWS signing input). The signature
    /// must be exactly as long as the modulus (RFC 8017 §8.2.2).
    public func verifyRS256(signature: [UInt8], message: [UInt8]) -> Bool {
        guard signature.count == (bitCount + 7) / 8 else { return false }
        return key.verifySHA256(signature: signature, message: message)
    }
}
