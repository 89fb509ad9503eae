/// Why a token, key or key set was refused. `description` is short and safe to log: it names
/// the check (and, for claims, the claim's name) but never contains the token, a signature,
/// key material or claim values.
public struct JOSEError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Code: Sendable, Equatable {
        // Compact form and JSON
        case malformedToken
        case tokenTooLarge
        case invalidJSON
        case duplicateJSONKey
        case unsupportedType
        case unsupportedCriticalHeader
        // Algorithms
        /// `alg: none` (any spelling).
        case unsecuredAlgorithm
        /// HS256/384/512: a public-key verifier must never treat a public key as an HMAC secret.
        case symmetricAlgorithm
        /// Anything else we do not implement (PS256, ES384, EdDSA, …).
        case unsupportedAlgorithm
        /// Implemented, but not allowed for this provider.
        case algorithmNotAllowed
        // Keys
        /// The header's `kid` is not in the key set — a refetch of the JWKS may help.
        case unknownKeyID
        /// No `kid`, and the key set has no single usable key for the algorithm.
        case ambiguousKey
        /// The key found has a different type or a different `alg` than the header.
        case keyAlgorithmMismatch
        case invalidKey
        case unsupportedKey
        case invalidKeySet
        // Signature
        case badSignature
        // Claims
        case missingClaim
        case invalidClaim
        case invalidIssuer
        case invalidAudience
        case invalidAuthorizedParty
        case expired
        case issuedInFuture
        case notYetValid
        case nonceMismatch
        // Signing
        case signingFailed
    }

    public let code: Code
    public let description: String

    public init(_ code: Code, _ description: String) {
        self.code = code
        self.description = description
    }

    /// True when fetching the provider's JWKS again (subject to `JWKSCache`'s rate limit)
    /// could make the same token verify: the IdP rotated in a key we have not seen yet.
    public var refetchingKeysMayHelp: Bool { code == .unknownKeyID }
}
