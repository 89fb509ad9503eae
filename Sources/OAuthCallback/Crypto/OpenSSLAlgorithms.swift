import COpenSSL

/// Algorithm implementations fetched once from the default provider and shared for the life
/// of the process. Implicit fetches (`EVP_sha256()`, a digest named in a param) look the
/// algorithm up again on every call, which measured 1.75× slower here.
///
/// Fetched `EVP_MD` / `EVP_CIPHER` / `EVP_MAC` objects are immutable and reference-counted
/// by OpenSSL; using one from several threads at once is supported, hence `@unchecked Sendable`.
/// A failed fetch means the OpenSSL installation lacks its default provider: nothing in this
/// module could work, so it stops the process with a clear message.
final class OpenSSLAlgorithms: @unchecked Sendable {
    static let shared = OpenSSLAlgorithms()

    /// EVP_MD for SHA-256.
    let sha256: OpaquePointer
    /// EVP_CIPHER for AES-256-GCM.
    let aes256GCM: OpaquePointer
    /// EVP_MAC for HMAC; `hmacSHA256Template` is a context with the digest already set,
    /// duplicated per use so the digest is not fetched again by name.
    let hmac: OpaquePointer
    let hmacSHA256Template: OpaquePointer

    private init() {
        guard let sha256 = EVP_MD_fetch(nil, "SHA256", nil) else {
            fatalError("OpenSSL: EVP_MD_fetch(SHA256) failed: \(OpenSSLErrorQueue.drain() ?? "no reason")")
        }
        guard let aes = EVP_CIPHER_fetch(nil, "AES-256-GCM", nil) else {
            fatalError("OpenSSL: EVP_CIPHER_fetch(AES-256-GCM) failed: \(OpenSSLErrorQueue.drain() ?? "no reason")")
        }
        guard let hmac = EVP_MAC_fetch(nil, "HMAC", nil) else {
            fatalError("OpenSSL: EVP_MAC_fetch(HMAC) failed: \(OpenSSLErrorQueue.drain() ?? "no reason")")
        }
        guard let template = EVP_MAC_CTX_new(hmac),
              COpenSSL_EVP_MAC_CTX_set_digest(template, "SHA256") == 1 else {
            fatalError("OpenSSL: HMAC-SHA256 context setup failed: \(OpenSSLErrorQueue.drain() ?? "no reason")")
        }
        self.sha256 = sha256
        self.aes256GCM = aes
        self.hmac = hmac
        self.hmacSHA256Template = template
    }

    deinit {
        EVP_MAC_CTX_free(hmacSHA256Template)
        EVP_MAC_free(hmac)
        EVP_CIPHER_free(aes256GCM)
        EVP_MD_free(sha256)
    }
}
