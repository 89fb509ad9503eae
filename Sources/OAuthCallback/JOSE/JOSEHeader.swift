/// The protected header of a JWS, with the members we act on pulled out.
public struct JOSEHeader: Sendable, Equatable {
    /// `alg` exactly as sent (validated against policy by `JWTVerifier`, not here).
    public let algorithm: String
    public let keyID: String?
    public let type: String?
    /// Every member, for callers that need something we do not interpret.
    public let raw: [String: JSONValue]

    init(_ object: [String: JSONValue]) throws(JOSEError) {
        guard let alg = object["alg"]?.stringValue, !alg.isEmpty else {
            throw JOSEError(.malformedToken, "header has no alg string")
        }
        let kid = object["kid"]
        if kid != nil && kid?.stringValue == nil { throw JOSEError(.malformedToken, "header kid is not a string") }
        let typ = object["typ"]
        if typ != nil && typ?.stringValue == nil { throw JOSEError(.malformedToken, "header typ is not a string") }
        // RFC 7515 §4.1.9: "JWT" and "application/jwt" name the same media type, compared
        // case-insensitively. Anything else ("at+jwt", "logout+jwt", …) is a different kind
        // of token that must not be accepted as an ID token.
        if let t = typ?.stringValue?.lowercased(), t != "jwt", t != "application/jwt" {
            throw JOSEError(.unsupportedType, "header typ is not JWT")
        }
        // Nested JWTs (cty: JWT) are not something an IdP sends as an ID token.
        if let cty = object["cty"]?.stringValue?.lowercased(), cty == "jwt" || cty == "application/jwt" {
            throw JOSEError(.unsupportedType, "nested JWT (cty) is not supported")
        }
        // RFC 7515 §4.1.11: extensions listed in crit MUST be understood; we understand none.
        if object["crit"] != nil {
            throw JOSEError(.unsupportedCriticalHeader, "header crit names extensions we do not implement")
        }
        algorithm = alg
        keyID = kid?.stringValue
        type = typ?.stringValue
        raw = object
    }
}
