/// Sign in with Apple authenticates the client at its token endpoint with a JWT it signs
/// itself ("client secret"), ES256 with the `.p8` key from the developer portal.
/// See Apple's "Creating a client secret".
public enum AppleClientSecret {
    public static let audience = "https://appleid.apple.com"
    /// Apple refuses client secrets valid for more than 6 months (15 777 000 s).
    public static let maximumLifetime: Int64 = 15_777_000
    /// Short by default: the proxy can mint a new one whenever it needs to.
    public static let defaultLifetime: Int64 = 3_600

    /// - Parameters:
    ///   - teamID: the Apple developer team id (`iss`).
    ///   - clientID: the Services ID or bundle id the token is for (`sub`).
    ///   - keyID: the key's id from the developer portal (header `kid`).
    ///   - now: seconds since the epoch (`iat`); `exp` is `now + lifetime`.
    public static func make(teamID: String, clientID: String, keyID: String, key: P256PrivateKey,
                            now: Int64, lifetime: Int64 = defaultLifetime) throws(JOSEError) -> String {
        guard !teamID.isEmpty, !clientID.isEmpty, !keyID.isEmpty else {
            throw JOSEError(.signingFailed, "Apple client secret needs team id, client id and key id")
        }
        guard lifetime > 0, lifetime <= maximumLifetime else {
            throw JOSEError(.signingFailed, "Apple client secret lifetime must be 1 s to 6 months")
        }
        let (expiry, overflow) = now.addingReportingOverflow(lifetime)
        guard !overflow else { throw JOSEError(.signingFailed, "Apple client secret expiry overflows") }
        let claims: [String: JSONValue] = [
            "iss": .string(teamID),
            "iat": .number(now),
            "exp": .number(expiry),
            "aud": .string(audience),
            "sub": .string(clientID),
        ]
        return try JWTSigner.signES256(claims: claims, keyID: keyID, key: key)
    }
}
