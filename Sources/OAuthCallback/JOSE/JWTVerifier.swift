/// Verifies ID tokens for one provider and one native client (OIDC Core §3.1.3.7, RFC 8725).
///
/// Order: parse → algorithm policy → key selection → signature → claims. Claims are only
/// looked at once the signature holds, so an attacker learns nothing from which claim check
/// a forged token would have failed.
public struct JWTVerifier: Sendable {
    public static let defaultLeeway: Int64 = 300

    public let allowedAlgorithms: Set<JWSAlgorithm>
    public let issuers: Set<String>
    public let audience: String
    /// Clock skew tolerated on `exp`, `iat` and `nbf`, in seconds.
    public let leeway: Int64

    /// - Parameters:
    ///   - allowedAlgorithms: e.g. `[.rs256]` for Google and Apple.
    ///   - issuers: accepted `iss` values (Google uses both `accounts.google.com` and
    ///     `https://accounts.google.com`).
    ///   - audience: our client id; `aud` must contain it.
    public init(allowedAlgorithms: Set<JWSAlgorithm>, issuers: Set<String>, audience: String,
                leeway: Int64 = defaultLeeway) {
        self.allowedAlgorithms = allowedAlgorithms
        self.issuers = issuers
        self.audience = audience
        self.leeway = max(0, leeway)
    }

    /// - Parameters:
    ///   - now: current time in seconds since the epoch.
    ///   - expectedNonce: the nonce sent in the authorization request; when given, the
    ///     token's `nonce` must equal it.
    /// - Throws: `JOSEError`; `.unknownKeyID` means refetching the JWKS may help.
    public func verify(_ token: String, keys: JWKSet, now: Int64,
                       expectedNonce: String? = nil) throws(JOSEError) -> VerifiedClaims {
        let jwt = try JWT(compact: token)
        return try verify(jwt, keys: keys, now: now, expectedNonce: expectedNonce)
    }

    public func verify(_ jwt: JWT, keys: JWKSet, now: Int64,
                       expectedNonce: String? = nil) throws(JOSEError) -> VerifiedClaims {
        let alg = try JWSAlgorithm.fromHeader(jwt.header.algorithm)
        guard allowedAlgorithms.contains(alg) else {
            throw JOSEError(.algorithmNotAllowed, "alg \(alg.rawValue) is not allowed for this provider")
        }
        let key = try keys.key(for: alg, keyID: jwt.header.keyID)
        guard key.verify(alg, signature: jwt.signature, message: jwt.signingInput) else {
            throw JOSEError(.badSignature, "signature does not verify")
        }
        return try checkClaims(jwt.claims, alg: alg, keyID: jwt.header.keyID, now: now, expectedNonce: expectedNonce)
    }

    private func checkClaims(_ claims: [String: JSONValue], alg: JWSAlgorithm, keyID: String?,
                             now: Int64, expectedNonce: String?) throws(JOSEError) -> VerifiedClaims {
        guard let iss = try string(claims, "iss") else { throw JOSEError(.missingClaim, "iss is missing") }
        guard issuers.contains(iss) else { throw JOSEError(.invalidIssuer, "iss is not an expected issuer") }

        let audience = try audienceList(claims)
        guard !self.audience.isEmpty, audience.contains(self.audience) else {
            throw JOSEError(.invalidAudience, "aud does not contain our client id")
        }
        // OIDC Core §3.1.3.7 items 4–5: with several audiences azp must be present; when
        // present it must be us. (Checked whenever present: a token issued to another
        // party that merely lists us is not ours to accept.)
        let azp = try string(claims, "azp")
        if audience.count > 1 && azp == nil {
            throw JOSEError(.invalidAuthorizedParty, "azp is missing with several audiences")
        }
        if let azp, azp != self.audience {
            throw JOSEError(.invalidAuthorizedParty, "azp is not our client id")
        }

        guard let exp = try time(claims, "exp") else { throw JOSEError(.missingClaim, "exp is missing") }
        guard let iat = try time(claims, "iat") else { throw JOSEError(.missingClaim, "iat is missing") }
        // Saturating: leeway and timestamps come from config and the token; neither may trap.
        guard now < exp.saturatingAdd(leeway) else {
            throw JOSEError(.expired, "token expired")
        }
        guard iat <= now.saturatingAdd(leeway) else {
            throw JOSEError(.issuedInFuture, "iat is in the future")
        }
        if let nbf = try time(claims, "nbf"), nbf > now.saturatingAdd(leeway) {
            throw JOSEError(.notYetValid, "nbf is in the future")
        }

        guard let sub = try string(claims, "sub"), !sub.isEmpty else { throw JOSEError(.missingClaim, "sub is missing") }

        if let expectedNonce {
            guard let nonce = try string(claims, "nonce") else { throw JOSEError(.nonceMismatch, "nonce is missing") }
            guard ConstantTime.equals(nonce, expectedNonce) else { throw JOSEError(.nonceMismatch, "nonce does not match") }
        }

        return VerifiedClaims(claims: claims, issuer: iss, subject: sub, audience: audience,
                              expiresAt: exp, issuedAt: iat, algorithm: alg, keyID: keyID)
    }

    private func string(_ claims: [String: JSONValue], _ name: StaticString) throws(JOSEError) -> String? {
        guard let value = claims["\(name)"] else { return nil }
        guard let s = value.stringValue else { throw JOSEError(.invalidClaim, "\(name) is not a string") }
        return s
    }

    private func time(_ claims: [String: JSONValue], _ name: StaticString) throws(JOSEError) -> Int64? {
        guard let value = claims["\(name)"] else { return nil }
        guard let t = value.int64Value else { throw JOSEError(.invalidClaim, "\(name) is not a NumericDate") }
        return t
    }

    /// RFC 7519 §4.1.3: a single string or an array of strings.
    private func audienceList(_ claims: [String: JSONValue]) throws(JOSEError) -> [String] {
        switch claims["aud"] {
        case nil: throw JOSEError(.missingClaim, "aud is missing")
        case .string(let s)?: return [s]
        case .array(let elements)?:
            var list: [String] = []
            for element in elements {
                guard let s = element.stringValue else { throw JOSEError(.invalidClaim, "aud holds a non-string") }
                list.append(s)
            }
            return list
        default: throw JOSEError(.invalidClaim, "aud is neither a string nor an array")
        }
    }
}

private extension Int64 {
    /// `self + other`, clamped to the representable range instead of trapping.
    func saturatingAdd(_ other: Int64) -> Int64 {
        let (sum, overflow) = addingReportingOverflow(other)
        guard overflow else { return sum }
        return other > 0 ? .max : .min
    }
}
