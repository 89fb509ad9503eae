/// The JWS algorithms this proxy verifies. Deliberately small: the providers we support sign
/// ID tokens with RS256 (Google, Apple, most OIDC) or ES256. HMAC algorithms are not here at
/// all, so no configuration can enable them.
public enum JWSAlgorithm: String, Sendable, Hashable, CaseIterable {
    case rs256 = "RS256"
    case es256 = "ES256"

    /// Maps a header's `alg` to an algorithm we implement, or says precisely why not.
    static func fromHeader(_ alg: String) throws(JOSEError) -> JWSAlgorithm {
        if let known = JWSAlgorithm(rawValue: alg) { return known }
        if alg.lowercased() == "none" {
            throw JOSEError(.unsecuredAlgorithm, "alg none is refused")
        }
        if alg.uppercased().hasPrefix("HS") {
            throw JOSEError(.symmetricAlgorithm, "symmetric (HMAC) alg is refused")
        }
        throw JOSEError(.unsupportedAlgorithm, "alg is not supported")
    }

    /// The JWK `kty` whose keys can verify this algorithm.
    var keyType: String {
        switch self {
        case .rs256: return "RSA"
        case .es256: return "EC"
        }
    }
}
