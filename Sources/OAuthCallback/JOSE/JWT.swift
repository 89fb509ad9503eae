/// A JWT in JWS compact serialization (RFC 7519 §3, RFC 7515 §7.1), parsed but NOT verified.
/// Nothing in `claims` may be trusted until `JWTVerifier` has checked the signature.
public struct JWT: Sendable {
    /// ID tokens are a few KiB; anything larger is refused before decoding.
    public static let maximumSize = 16 * 1024

    public let header: JOSEHeader
    public let claims: [String: JSONValue]
    /// ASCII(BASE64URL(header) ‖ '.' ‖ BASE64URL(payload)): the bytes the signature covers.
    let signingInput: [UInt8]
    let signature: [UInt8]

    public init(compact: String) throws(JOSEError) {
        guard compact.utf8.count <= Self.maximumSize else {
            throw JOSEError(.tokenTooLarge, "token exceeds \(Self.maximumSize) bytes")
        }
        let bytes = Array(compact.utf8)
        var dots: [Int] = []
        for (i, b) in bytes.enumerated() where b == UInt8(ascii: ".") {
            dots.append(i)
            guard dots.count <= 2 else { break }
        }
        guard dots.count == 2 else {
            throw JOSEError(.malformedToken, "token does not have exactly three parts")
        }
        let headerPart = bytes[..<dots[0]]
        let payloadPart = bytes[(dots[0] + 1)..<dots[1]]
        let signaturePart = bytes[(dots[1] + 1)...]
        guard !headerPart.isEmpty, !payloadPart.isEmpty, !signaturePart.isEmpty else {
            throw JOSEError(.malformedToken, "token has an empty part")
        }
        guard let headerBytes = Base64URL.decode(headerPart),
              let payloadBytes = Base64URL.decode(payloadPart),
              let signature = Base64URL.decode(signaturePart) else {
            throw JOSEError(.malformedToken, "token part is not canonical base64url")
        }
        header = try JOSEHeader(Self.object(headerBytes, part: "header"))
        claims = try Self.object(payloadBytes, part: "payload")
        signingInput = Array(bytes[..<dots[1]])
        self.signature = signature
    }

    /// Parses one part as a JSON object.
    static func object(_ bytes: [UInt8], part: StaticString) throws(JOSEError) -> [String: JSONValue] {
        let value: JSONValue
        do {
            value = try JSONParser.parse(bytes)
        } catch {
            switch error.reason {
            case .duplicateKey: throw JOSEError(.duplicateJSONKey, "\(part) has a duplicate member name")
            case .syntax, .invalidUTF8, .tooDeep: throw JOSEError(.invalidJSON, "\(part) is not valid JSON")
            }
        }
        guard case .object(let members) = value else {
            throw JOSEError(.invalidJSON, "\(part) is not a JSON object")
        }
        return members
    }
}

extension JWT {
    /// The clients the token names, its `azp` first, then its `aud` (a string or an array):
    /// unverified, so only for choosing among configured clients.
    var audienceCandidates: [String] {
        var out: [String] = []
        if let azp = claims["azp"]?.stringValue { out.append(azp) }
        if let aud = claims["aud"]?.stringValue { out.append(aud) }
        out += claims["aud"]?.arrayValue?.compactMap(\.stringValue) ?? []
        return out
    }
}
