import COpenSSL

/// AES-256-GCM (NIST SP 800-38D) with a fresh 96-bit random nonce per message and a
/// 128-bit tag. A sealed box is `nonce ‖ ciphertext ‖ tag`, so it is self-contained.
///
/// Random 96-bit nonces are safe for up to 2^32 messages per key (SP 800-38D §8.3); rotate
/// the key well before that.
public struct AES256GCM: Sendable {
    public static let keySize = 32
    public static let nonceSize = 12
    public static let tagSize = 16
    /// Bytes a sealed box adds to its plaintext.
    public static let overhead = nonceSize + tagSize

    private let key: SecretBytes

    public init(key: [UInt8]) throws(CryptoError) {
        guard key.count == Self.keySize else {
            throw CryptoError(.invalidKey, "AES-256-GCM key must be 32 bytes")
        }
        self.key = SecretBytes(key)
    }

    /// Encrypts and authenticates `plaintext`; `associatedData` is authenticated, not sent.
    public func seal(_ plaintext: [UInt8], authenticating associatedData: [UInt8] = []) throws(CryptoError) -> [UInt8] {
        let nonce = try SecureRandom.bytes(Self.nonceSize)
        let (ciphertext, tag) = try seal(plaintext, nonce: nonce, authenticating: associatedData)
        return nonce + ciphertext + tag
    }

    /// Checks and decrypts a box made by `seal`. Any alteration of the box or a different
    /// `associatedData` yields `.authenticationFailed` and no plaintext.
    public func open(_ box: [UInt8], authenticating associatedData: [UInt8] = []) throws(CryptoError) -> [UInt8] {
        guard box.count >= Self.overhead else {
            throw CryptoError(.invalidInput, "AES-256-GCM box is shorter than nonce and tag")
        }
        let nonce = Array(box[0..<Self.nonceSize])
        let ciphertext = Array(box[Self.nonceSize..<(box.count - Self.tagSize)])
        let tag = Array(box[(box.count - Self.tagSize)...])
        return try open(ciphertext, nonce: nonce, tag: tag, authenticating: associatedData)
    }

    /// Encryption with a caller-chosen nonce, for known-answer tests. Never reuse a nonce
    /// with the same key: GCM then leaks the plaintexts' XOR and the authentication key.
    func seal(_ plaintext: [UInt8], nonce: [UInt8],
              authenticating associatedData: [UInt8]) throws(CryptoError) -> (ciphertext: [UInt8], tag: [UInt8]) {
        guard nonce.count == Self.nonceSize else { throw CryptoError(.invalidInput, "AES-256-GCM nonce must be 12 bytes") }
        guard plaintext.count < Int(Int32.max), associatedData.count < Int(Int32.max) else {
            throw CryptoError(.invalidInput, "AES-256-GCM input too large")
        }
        let ctx = try Self.cipherContext()
        let initialised = key.withUnsafeBytes { k in
            nonce.withUnsafeBytes { n in
                EVP_EncryptInit_ex2(ctx.pointer, OpenSSLAlgorithms.shared.aes256GCM,
                                    k.baseAddress?.assumingMemoryBound(to: UInt8.self),
                                    n.baseAddress?.assumingMemoryBound(to: UInt8.self), nil)
            }
        }
        guard initialised == 1 else { throw .openSSL(.internalFailure, "EVP_EncryptInit_ex2") }
        try Self.addAssociatedData(associatedData, ctx, decrypting: false)

        var ciphertext = [UInt8](repeating: 0, count: plaintext.count)
        var written: Int32 = 0
        if !plaintext.isEmpty {
            let ok = ciphertext.withUnsafeMutableBufferPointer { out in
                plaintext.withUnsafeBufferPointer { input in
                    EVP_EncryptUpdate(ctx.pointer, out.baseAddress, &written, input.baseAddress, Int32(input.count))
                }
            }
            guard ok == 1, written == Int32(plaintext.count) else { throw .openSSL(.internalFailure, "EVP_EncryptUpdate") }
        }
        var finalBytes: Int32 = 0
        var scratch = [UInt8](repeating: 0, count: 16)
        let finished = scratch.withUnsafeMutableBufferPointer { EVP_EncryptFinal_ex(ctx.pointer, $0.baseAddress, &finalBytes) }
        guard finished == 1, finalBytes == 0 else { throw .openSSL(.internalFailure, "EVP_EncryptFinal_ex") }

        var tag = [UInt8](repeating: 0, count: Self.tagSize)
        let gotTag = tag.withUnsafeMutableBytes {
            EVP_CIPHER_CTX_ctrl(ctx.pointer, EVP_CTRL_AEAD_GET_TAG, Int32(Self.tagSize), $0.baseAddress)
        }
        guard gotTag == 1 else { throw .openSSL(.internalFailure, "EVP_CIPHER_CTX_ctrl(GET_TAG)") }
        return (ciphertext, tag)
    }

    func open(_ ciphertext: [UInt8], nonce: [UInt8], tag: [UInt8],
              authenticating associatedData: [UInt8]) throws(CryptoError) -> [UInt8] {
        guard nonce.count == Self.nonceSize, tag.count == Self.tagSize else {
            throw CryptoError(.invalidInput, "AES-256-GCM nonce or tag has the wrong length")
        }
        guard ciphertext.count < Int(Int32.max), associatedData.count < Int(Int32.max) else {
            throw CryptoError(.invalidInput, "AES-256-GCM input too large")
        }
        let ctx = try Self.cipherContext()
        let initialised = key.withUnsafeBytes { k in
            nonce.withUnsafeBytes { n in
                EVP_DecryptInit_ex2(ctx.pointer, OpenSSLAlgorithms.shared.aes256GCM,
                                    k.baseAddress?.assumingMemoryBound(to: UInt8.self),
                                    n.baseAddress?.assumingMemoryBound(to: UInt8.self), nil)
            }
        }
        guard initialised == 1 else { throw .openSSL(.internalFailure, "EVP_DecryptInit_ex2") }
        try Self.addAssociatedData(associatedData, ctx, decrypting: true)

        var plaintext = [UInt8](repeating: 0, count: ciphertext.count)
        var written: Int32 = 0
        if !ciphertext.isEmpty {
            let ok = plaintext.withUnsafeMutableBufferPointer { out in
                ciphertext.withUnsafeBufferPointer { input in
                    EVP_DecryptUpdate(ctx.pointer, out.baseAddress, &written, input.baseAddress, Int32(input.count))
                }
            }
            guard ok == 1, written == Int32(ciphertext.count) else { throw .openSSL(.internalFailure, "EVP_DecryptUpdate") }
        }
        var expectedTag = tag
        let setTag = expectedTag.withUnsafeMutableBytes {
            EVP_CIPHER_CTX_ctrl(ctx.pointer, EVP_CTRL_AEAD_SET_TAG, Int32(Self.tagSize), $0.baseAddress)
        }
        guard setTag == 1 else { throw .openSSL(.internalFailure, "EVP_CIPHER_CTX_ctrl(SET_TAG)") }
        var finalBytes: Int32 = 0
        var scratch = [UInt8](repeating: 0, count: 16)
        let verified = scratch.withUnsafeMutableBufferPointer { EVP_DecryptFinal_ex(ctx.pointer, $0.baseAddress, &finalBytes) }
        guard verified > 0 else {
            // Wipe what was decrypted before the tag check failed; the caller gets nothing.
            plaintext.withUnsafeMutableBytes { OPENSSL_cleanse($0.baseAddress, $0.count) }
            OpenSSLErrorQueue.drain()
            throw CryptoError(.authenticationFailed, "AES-256-GCM tag mismatch")
        }
        return plaintext
    }

    private static func cipherContext() throws(CryptoError) -> OpenSSLPointer {
        guard let ctx = OpenSSLPointer(EVP_CIPHER_CTX_new(), free: { EVP_CIPHER_CTX_free($0) }) else {
            throw CryptoError(.internalFailure, "EVP_CIPHER_CTX_new failed")
        }
        return ctx
    }

    private static func addAssociatedData(_ aad: [UInt8], _ ctx: OpenSSLPointer, decrypting: Bool) throws(CryptoError) {
        guard !aad.isEmpty else { return }
        var written: Int32 = 0
        let ok = aad.withUnsafeBufferPointer { a in
            decrypting
                ? EVP_DecryptUpdate(ctx.pointer, nil, &written, a.baseAddress, Int32(a.count))
                : EVP_EncryptUpdate(ctx.pointer, nil, &written, a.baseAddress, Int32(a.count))
        }
        guard ok == 1 else { throw .openSSL(.internalFailure, "EVP_CipherUpdate(AAD)") }
    }
}
