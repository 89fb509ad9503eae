import COpenSSL

/// The single owner of an `EVP_PKEY`, plus the sign/verify calls shared by the key types.
///
/// OpenSSL 3 allows concurrent use of one `EVP_PKEY` for signing and verification (each
/// operation gets its own `EVP_MD_CTX`/`EVP_PKEY_CTX`), and nothing here mutates the key
/// after construction, hence `@unchecked Sendable`.
final class EVPKey: @unchecked Sendable {
    let pointer: OpaquePointer

    init(taking pointer: OpaquePointer) { self.pointer = pointer }

    deinit { EVP_PKEY_free(pointer) }

    var bitCount: Int { Int(EVP_PKEY_get_bits(pointer)) }

    func isA(_ name: String) -> Bool { EVP_PKEY_is_a(pointer, name) == 1 }

    /// Builds a public key from OSSL_PARAMs made by `build`, which receives an
    /// `OSSL_PARAM_BLD`. Everything `build` pushes must stay valid until this returns: the
    /// builder keeps the pointers, not copies, until `OSSL_PARAM_BLD_to_param`.
    /// `type` is a `StaticString` because the `EVP_PKEY_CTX` keeps the name pointer.
    static func fromPublicParameters(type: StaticString,
                                     build: (OpaquePointer) -> Bool) throws(CryptoError) -> EVPKey {
        guard let builder = OpenSSLPointer(OSSL_PARAM_BLD_new(), free: { OSSL_PARAM_BLD_free($0) }) else {
            throw CryptoError(.internalFailure, "OSSL_PARAM_BLD_new failed")
        }
        guard build(builder.pointer) else { throw .openSSL(.invalidKey, "OSSL_PARAM_BLD_push") }
        guard let params = OSSL_PARAM_BLD_to_param(builder.pointer) else {
            throw .openSSL(.internalFailure, "OSSL_PARAM_BLD_to_param")
        }
        defer { OSSL_PARAM_free(params) }
        let typeName = UnsafeRawPointer(type.utf8Start).assumingMemoryBound(to: CChar.self)
        guard let ctx = OpenSSLPointer(EVP_PKEY_CTX_new_from_name(nil, typeName, nil),
                                       free: { EVP_PKEY_CTX_free($0) }) else {
            throw CryptoError(.internalFailure, "EVP_PKEY_CTX_new_from_name failed")
        }
        guard EVP_PKEY_fromdata_init(ctx.pointer) == 1 else { throw .openSSL(.internalFailure, "EVP_PKEY_fromdata_init") }
        var key: OpaquePointer?
        guard EVP_PKEY_fromdata(ctx.pointer, &key, COpenSSL_EVP_PKEY_PUBLIC_KEY, params) == 1, let key else {
            throw .openSSL(.invalidKey, "EVP_PKEY_fromdata")
        }
        return EVPKey(taking: key)
    }

    /// Full public-key validation (for EC: the point is on the curve, not at infinity, and
    /// of the right order).
    func checkPublicKey() -> Bool {
        guard let ctx = OpenSSLPointer(EVP_PKEY_CTX_new_from_pkey(nil, pointer, nil),
                                       free: { EVP_PKEY_CTX_free($0) }) else { return false }
        let ok = EVP_PKEY_public_check(ctx.pointer) == 1
        if !ok { OpenSSLErrorQueue.drain() }
        return ok
    }

    /// The EC public point as `0x04 ‖ x ‖ y` (P-256: 65 bytes), or nil for other keys.
    func uncompressedPublicPoint() -> [UInt8]? {
        var point = [UInt8](repeating: 0, count: 65)
        var length = 0
        let ok = point.withUnsafeMutableBufferPointer {
            EVP_PKEY_get_octet_string_param(pointer, "pub", $0.baseAddress, $0.count, &length)
        }
        guard ok == 1, length == 65, point[0] == 0x04 else {
            OpenSSLErrorQueue.drain()
            return nil
        }
        return point
    }

    /// Verifies `signature` (in OpenSSL's encoding: PKCS#1 v1.5 block or DER ECDSA-Sig-Value)
    /// over SHA-256(`message`). Any failure is a plain `false`.
    func verifySHA256(signature: [UInt8], message: [UInt8]) -> Bool {
        guard let ctx = try? OpenSSLPointer.digestContext() else { return false }
        guard EVP_DigestVerifyInit(ctx.pointer, nil, OpenSSLAlgorithms.shared.sha256, nil, pointer) == 1 else {
            OpenSSLErrorQueue.drain()
            return false
        }
        let result = signature.withUnsafeBufferPointer { sig in
            message.withUnsafeBufferPointer { msg in
                EVP_DigestVerify(ctx.pointer, sig.baseAddress, sig.count, msg.baseAddress, msg.count)
            }
        }
        if result != 1 { OpenSSLErrorQueue.drain() }
        return result == 1
    }

    /// Signs SHA-256(`message`); returns OpenSSL's encoding of the signature.
    func signSHA256(_ message: [UInt8]) throws(CryptoError) -> [UInt8] {
        let ctx = try OpenSSLPointer.digestContext()
        guard EVP_DigestSignInit(ctx.pointer, nil, OpenSSLAlgorithms.shared.sha256, nil, pointer) == 1 else {
            throw .openSSL(.invalidKey, "EVP_DigestSignInit")
        }
        var length = 0
        let sized = message.withUnsafeBufferPointer {
            EVP_DigestSign(ctx.pointer, nil, &length, $0.baseAddress, $0.count)
        }
        guard sized == 1 else { throw .openSSL(.internalFailure, "EVP_DigestSign") }
        var signature = [UInt8](repeating: 0, count: length)
        let signed = signature.withUnsafeMutableBufferPointer { out in
            message.withUnsafeBufferPointer { msg in
                EVP_DigestSign(ctx.pointer, out.baseAddress, &length, msg.baseAddress, msg.count)
            }
        }
        guard signed == 1 else { throw .openSSL(.internalFailure, "EVP_DigestSign") }
        signature.removeLast(signature.count - length)
        return signature
    }
}
