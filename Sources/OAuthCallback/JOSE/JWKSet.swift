/// A JSON Web Key Set (RFC 7517 §5) reduced to the keys we can verify with.
public struct JWKSet: Sendable {
    /// Real JWKS documents are a few KiB.
    public static let maximumSize = 128 * 1024
    /// Each key is parsed into an OpenSSL key; bound the work one document can cause.
    public static let maximumKeys = 64

    public let keys: [JWK]
    /// Members skipped as unsupported (other kty/crv/use) or invalid (bad encoding, weak RSA).
    /// Worth logging: a provider that rotates to a key type we skip would fail every login.
    public let ignoredKeyCount: Int

    public init(keys: [JWK]) {
        self.keys = keys
        ignoredKeyCount = 0
    }

    public init(json: String) throws(JOSEError) {
        try self.init(json: Array(json.utf8))
    }

    /// Parses a JWKS document. Refuses the whole document when it is not a JWKS or holds no
    /// usable key — the caller should then keep its previous keys rather than cache nothing.
    public init(json: [UInt8]) throws(JOSEError) {
        guard json.count <= Self.maximumSize else { throw JOSEError(.invalidKeySet, "JWKS exceeds \(Self.maximumSize) bytes") }
        let document: [String: JSONValue]
        do {
            document = try JWT.object(json, part: "JWKS")
        } catch {
            throw JOSEError(.invalidKeySet, error.description)
        }
        guard let members = document["keys"]?.arrayValue else { throw JOSEError(.invalidKeySet, "JWKS has no keys array") }
        guard members.count <= Self.maximumKeys else { throw JOSEError(.invalidKeySet, "JWKS has more than \(Self.maximumKeys) keys") }
        var keys: [JWK] = []
        var ignored = 0
        for member in members {
            guard let object = member.objectValue, let key = try? JWK(object) else {
                ignored += 1
                continue
            }
            keys.append(key)
        }
        guard !keys.isEmpty else { throw JOSEError(.invalidKeySet, "JWKS has no usable signing key") }
        self.keys = keys
        ignoredKeyCount = ignored
    }

    /// The key that must verify a token with this header, following RFC 7515 §4.1.4 and
    /// OIDC Core §10.1: by `kid` when there is one; without `kid`, only when exactly one key
    /// can verify `alg`.
    func key(for alg: JWSAlgorithm, keyID: String?) throws(JOSEError) -> JWK {
        if let keyID {
            let named = keys.filter { $0.keyID == keyID }
            guard !named.isEmpty else { throw JOSEError(.unknownKeyID, "kid is not in the key set") }
            let usable = named.filter { $0.canVerify(alg) }
            guard !usable.isEmpty else { throw JOSEError(.keyAlgorithmMismatch, "key for kid does not match alg") }
            guard usable.count == 1 else { throw JOSEError(.ambiguousKey, "several keys share the kid") }
            return usable[0]
        }
        let usable = keys.filter { $0.canVerify(alg) }
        switch usable.count {
        case 1: return usable[0]
        case 0: throw JOSEError(.unknownKeyID, "no kid and no key for alg")
        default: throw JOSEError(.ambiguousKey, "no kid and several keys for alg")
        }
    }
}
