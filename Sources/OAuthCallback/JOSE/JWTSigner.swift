/// Makes compact ES256 JWTs — the only kind the proxy signs (Apple's client secret, the
/// session's `jwt_assertion`).
public enum JWTSigner {
    /// Signs `claims` with header `{"alg":"ES256","kid":keyID,"typ":type}` (kid and typ
    /// omitted when nil).
    public static func signES256(claims: [String: JSONValue], keyID: String?, key: P256PrivateKey,
                                 type: String? = nil) throws(JOSEError) -> String {
        var header: [String: JSONValue] = ["alg": .string(JWSAlgorithm.es256.rawValue)]
        if let keyID { header["kid"] = .string(keyID) }
        if let type { header["typ"] = .string(type) }
        let signingInput = Base64URL.encode(JSONValue.object(header).serialized()) + "."
            + Base64URL.encode(JSONValue.object(claims).serialized())
        let signature: [UInt8]
        do {
            signature = try key.signES256(Array(signingInput.utf8))
        } catch {
            throw JOSEError(.signingFailed, "ES256 signing failed: \(error.description)")
        }
        return signingInput + "." + Base64URL.encode(signature)
    }
}
