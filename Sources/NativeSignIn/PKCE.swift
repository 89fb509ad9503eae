import Foundation
#if canImport(CryptoKit)
import CryptoKit
#else
import COpenSSL
#endif

/// A PKCE pair (RFC 7636) with the S256 method, the only one this library sends: `plain` would
/// hand the verifier to anyone who sees the authorization URL.
///
/// This file is the one place SHA-256 is computed: CryptoKit where it exists (iOS, macOS),
/// OpenSSL elsewhere (Linux, where the tests run).
public struct PKCE: Sendable, Equatable {
    public static let method = "S256"
    /// RFC 7636 §4.1: 43 to 128 characters.
    public static let lengths = 43...128
    /// 64 characters of a 66-character alphabet: about 387 bits, well above the RFC's 256.
    public static let defaultLength = 64

    public let verifier: String
    /// BASE64URL(SHA256(ASCII(verifier))), without padding (RFC 7636 §4.2).
    public let challenge: String

    /// A pair for a verifier received from elsewhere (tests, a restored request). Throws when
    /// the verifier is outside RFC 7636's length or alphabet: a provider would refuse it later,
    /// far from the cause.
    public init(verifier: String) throws {
        guard Self.lengths.contains(verifier.utf8.count) else {
            throw NativeSignInError(.configuration, key: "code_verifier",
                                    "a PKCE verifier has 43 to 128 characters, not \(verifier.utf8.count)")
        }
        guard verifier.utf8.allSatisfy(QueryString.isUnreserved) else {
            throw NativeSignInError(.configuration, key: "code_verifier",
                                    "a PKCE verifier uses only A-Z a-z 0-9 - . _ ~")
        }
        self.verifier = verifier
        self.challenge = Self.base64URL(Self.sha256(Array(verifier.utf8)))
    }

    /// A fresh pair. `SystemRandomNumberGenerator` is the system CSPRNG on every platform Swift
    /// supports (arc4random_buf on Apple, getrandom on Linux), and `randomElement(using:)` draws
    /// without modulo bias.
    public static func generate(length: Int = defaultLength) -> PKCE {
        precondition(lengths.contains(length), "PKCE.generate: length outside 43...128")
        var rng = SystemRandomNumberGenerator()
        let verifier = String((0..<length).map { _ in alphabet.randomElement(using: &rng)! })
        // The verifier is built from the alphabet and a valid length: init cannot throw.
        return try! PKCE(verifier: verifier)
    }

    static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")

    static func sha256(_ bytes: [UInt8]) -> [UInt8] {
        #if canImport(CryptoKit)
        return Array(SHA256.hash(data: bytes))
        #else
        // EVP_Q_digest fetches the algorithm on each call; that is fine here (once per sign-in,
        // not per request) and keeps this file free of a cached OpenSSL pointer to own.
        var digest = [UInt8](repeating: 0, count: 32)
        var length = 0
        let ok = bytes.withUnsafeBytes { input in
            EVP_Q_digest(nil, "SHA256", nil, input.baseAddress, input.count, &digest, &length)
        }
        // Only an allocation failure or a libcrypto without SHA-256 gets here; neither can be
        // worked around by the caller, and a wrong challenge would fail much later.
        precondition(ok == 1 && length == 32, "EVP_Q_digest(SHA256) failed")
        return digest
        #endif
    }

    static func base64URL(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}
