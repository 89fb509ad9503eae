import COpenSSL

/// The single Swift owner of one OpenSSL object (context, BIO, BIGNUM, …): frees it exactly
/// once, in `deinit`. Use it for short-lived, call-scoped objects; long-lived keys have their
/// own final classes (`RSAPublicKey`, `P256PublicKey`, …).
///
/// Use `pointer` at each C call site rather than copying it into a local: Swift may release
/// the owner right after its last use, and a copied pointer would then dangle.
final class OpenSSLPointer {
    let pointer: OpaquePointer
    private let free: (OpaquePointer) -> Void

    /// Takes ownership of `pointer`; returns nil (and drains the error queue) when the
    /// allocating call returned NULL.
    init?(_ pointer: OpaquePointer?, free: @escaping (OpaquePointer) -> Void) {
        guard let pointer else {
            OpenSSLErrorQueue.drain()
            return nil
        }
        self.pointer = pointer
        self.free = free
    }

    deinit { free(pointer) }
}

extension OpenSSLPointer {
    static func digestContext() throws(CryptoError) -> OpenSSLPointer {
        guard let ctx = OpenSSLPointer(EVP_MD_CTX_new(), free: { EVP_MD_CTX_free($0) }) else {
            throw CryptoError(.internalFailure, "EVP_MD_CTX_new failed")
        }
        return ctx
    }

    static func bigNumber(_ bytes: UnsafeRawBufferPointer) throws(CryptoError) -> OpenSSLPointer {
        let bn = BN_bin2bn(bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), Int32(bytes.count), nil)
        guard let owner = OpenSSLPointer(bn, free: { BN_free($0) }) else {
            throw CryptoError(.internalFailure, "BN_bin2bn failed")
        }
        return owner
    }
}
