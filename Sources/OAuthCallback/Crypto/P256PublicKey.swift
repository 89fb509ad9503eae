import COpenSSL

/// An EC public key on P-256 (secp256r1 / prime256v1), built from a JWK's `x` and `y`, used
/// to verify ES256 (ECDSA with SHA-256, RFC 7518 §3.4).
public final class P256PublicKey: Sendable {
    public static let coordinateSize = 32
    /// JOSE signatures are the raw `r ‖ s`, each left-padded to 32 bytes.
    public static let signatureSize = 64

    let key: EVPKey

    /// `x` and `y` must be exactly 32 bytes each (RFC 7518 §6.2.1.2 forbids shortening), and
    /// the point must lie on the curve.
    public init(x: [UInt8], y: [UInt8]) throws(CryptoError) {
        guard x.count == Self.coordinateSize, y.count == Self.coordinateSize else {
            throw CryptoError(.invalidKey, "P-256 coordinates must be 32 bytes each")
        }
        // SEC 1 §2.3.3 uncompressed point: 0x04 ‖ x ‖ y.
        let point = [0x04] + x + y
        // The builder keeps pointers to the group name and point until the key is built,
        // so both calls stay inside these closures.
        let built = point.withUnsafeBytes { pub in
            "prime256v1".withCString { group in
                Result { () throws(CryptoError) in
                    try EVPKey.fromPublicParameters(type: "EC") { builder in
                        OSSL_PARAM_BLD_push_utf8_string(builder, COpenSSL_PARAM_GROUP_NAME(), group, 0) == 1
                            && OSSL_PARAM_BLD_push_octet_string(builder, COpenSSL_PARAM_PUB_KEY(),
                                                                pub.baseAddress, pub.count) == 1
                    }
                }
            }
        }
        let key = try built.get()
        guard key.checkPublicKey() else {
            throw CryptoError(.invalidKey, "P-256 point is not a valid public key")
        }
        self.key = key
    }

    /// The coordinates, for publishing the key as a JWK.
    public var coordinates: (x: [UInt8], y: [UInt8]) {
        // A key that passed construction always has its uncompressed 65-byte point.
        guard let point = key.uncompressedPublicPoint() else { preconditionFailure("P-256 key without a public point") }
        return (Array(point[1...32]), Array(point[33...64]))
    }

    /// Verifies an ES256 signature in JOSE form (`r ‖ s`, 64 bytes) over `message`.
    public func verifyES256(signature: [UInt8], message: [UInt8]) -> Bool {
        guard signature.count == Self.signatureSize,
              let der = Self.derSignature(fromRaw: signature) else { return false }
        return key.verifySHA256(signature: der, message: message)
    }

    /// JOSE `r ‖ s` → DER `ECDSA-Sig-Value` (what OpenSSL verifies).
    static func derSignature(fromRaw raw: [UInt8]) -> [UInt8]? {
        guard let sig = OpenSSLPointer(ECDSA_SIG_new(), free: { ECDSA_SIG_free($0) }) else { return nil }
        let half = raw.count / 2
        let r = raw[..<half].withUnsafeBytes { BN_bin2bn($0.baseAddress?.assumingMemoryBound(to: UInt8.self), Int32($0.count), nil) }
        let s = raw[half...].withUnsafeBytes { BN_bin2bn($0.baseAddress?.assumingMemoryBound(to: UInt8.self), Int32($0.count), nil) }
        // ECDSA_SIG_set0 takes ownership of r and s only when it succeeds.
        guard let r, let s, ECDSA_SIG_set0(sig.pointer, r, s) == 1 else {
            BN_free(r)
            BN_free(s)
            OpenSSLErrorQueue.drain()
            return nil
        }
        let length = i2d_ECDSA_SIG(sig.pointer, nil)
        guard length > 0 else { OpenSSLErrorQueue.drain(); return nil }
        var der = [UInt8](repeating: 0, count: Int(length))
        let written = der.withUnsafeMutableBufferPointer { buffer -> Int32 in
            var cursor = buffer.baseAddress
            return i2d_ECDSA_SIG(sig.pointer, &cursor)
        }
        guard written == length else { OpenSSLErrorQueue.drain(); return nil }
        return der
    }

    /// DER `ECDSA-Sig-Value` → JOSE `r ‖ s`, each left-padded to 32 bytes.
    static func rawSignature(fromDER der: [UInt8]) -> [UInt8]? {
        let decoded = der.withUnsafeBufferPointer { buffer -> OpaquePointer? in
            var cursor = buffer.baseAddress
            return d2i_ECDSA_SIG(nil, &cursor, buffer.count)
        }
        guard let sig = OpenSSLPointer(decoded, free: { ECDSA_SIG_free($0) }) else { return nil }
        var raw = [UInt8](repeating: 0, count: signatureSize)
        let ok = raw.withUnsafeMutableBufferPointer { out -> Bool in
            BN_bn2binpad(ECDSA_SIG_get0_r(sig.pointer), out.baseAddress, Int32(coordinateSize)) == Int32(coordinateSize)
                && BN_bn2binpad(ECDSA_SIG_get0_s(sig.pointer), out.baseAddress! + coordinateSize,
                                Int32(coordinateSize)) == Int32(coordinateSize)
        }
        guard ok else { OpenSSLErrorQueue.drain(); return nil }
        return raw
    }
}
