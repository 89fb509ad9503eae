/// A failure of a cryptographic primitive. The description is safe to log: it names the
/// operation and, when OpenSSL reported one, its reason string — never key material, input
/// bytes or outputs.
public struct CryptoError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Code: Sendable, Equatable {
        /// Key material is malformed, of the wrong type or not on the curve.
        case invalidKey
        /// The key is valid but too weak for our policy (RSA below 2048 bits).
        case weakKey
        /// An input has the wrong length or shape (nonce, signature, sealed box).
        case invalidInput
        /// An AEAD tag did not match: the ciphertext or its associated data was altered.
        case authenticationFailed
        /// The system random generator could not deliver bytes.
        case randomUnavailable
        /// OpenSSL failed where it should not (allocation, missing provider).
        case internalFailure
    }

    public let code: Code
    public let description: String

    init(_ code: Code, _ description: String) {
        self.code = code
        self.description = description
    }

    /// Builds an error for a failed OpenSSL call and empties the thread's OpenSSL error queue,
    /// so that a later, unrelated check of that queue (TLS on the same loop thread) does not
    /// see our leftovers.
    static func openSSL(_ code: Code, _ call: StaticString) -> CryptoError {
        if let reason = OpenSSLErrorQueue.drain() {
            return CryptoError(code, "\(call) failed: \(reason)")
        }
        return CryptoError(code, "\(call) failed")
    }
}
