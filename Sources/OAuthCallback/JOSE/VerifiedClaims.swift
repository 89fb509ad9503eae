/// The claims of an ID token whose signature, issuer, audience, lifetime and nonce have been
/// checked by `JWTVerifier`.
public struct VerifiedClaims: Sendable {
    public let issuer: String
    public let subject: String
    /// `aud` as a list (a single string becomes one element).
    public let audience: [String]
    public let authorizedParty: String?
    public let expiresAt: Int64
    public let issuedAt: Int64
    public let email: String?
    /// `email_verified` as a Bool; Apple sends the strings "true"/"false". Nil when absent or
    /// of any other form — treat nil as "not verified".
    public let emailVerified: Bool?
    public let name: String?
    public let nonce: String?
    public let algorithm: JWSAlgorithm
    /// The `kid` of the key that verified the token (nil when the header had none).
    public let keyID: String?
    /// Every claim, for provider-specific ones (`hd`, `is_private_email`, …).
    public let raw: [String: JSONValue]

    init(claims: [String: JSONValue], issuer: String, subject: String, audience: [String],
         expiresAt: Int64, issuedAt: Int64, algorithm: JWSAlgorithm, keyID: String?) {
        self.issuer = issuer
        self.subject = subject
        self.audience = audience
        authorizedParty = claims["azp"]?.stringValue
        self.expiresAt = expiresAt
        self.issuedAt = issuedAt
        email = claims["email"]?.stringValue
        switch claims["email_verified"] {
        case .bool(let b)?: emailVerified = b
        case .string("true")?: emailVerified = true
        case .string("false")?: emailVerified = false
        default: emailVerified = nil
        }
        name = claims["name"]?.stringValue
        nonce = claims["nonce"]?.stringValue
        self.algorithm = algorithm
        self.keyID = keyID
        raw = claims
    }
}
