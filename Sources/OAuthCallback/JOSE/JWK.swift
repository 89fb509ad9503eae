/// One public signing key from a JWKS (RFC 7517), already turned into an OpenSSL key.
public struct JWK: Sendable {
    public enum KeyMaterial: Sendable {
        case rsa(RSAPublicKey)
        case p256(P256PublicKey)
    }

    public let keyID: String?
    /// The key's `alg` as published, if any. When present, it must equal the token's `alg`.
    public let algorithm: String?
    public let material: KeyMaterial

    public init(keyID: String?, algorithm: String?, material: KeyMaterial) {
        self.keyID = keyID
        self.algorithm = algorithm
        self.material = material
    }

    /// Parses one member of a JWKS `keys` array. Throws `.unsupportedKey` for keys that are
    /// well-formed but not for us (other `kty`/`crv`, `use` other than `sig`, `key_ops`
    /// without `verify`) and `.invalidKey` for broken or weak ones.
    public init(_ object: [String: JSONValue]) throws(JOSEError) {
        guard let kty = object["kty"]?.stringValue else { throw JOSEError(.invalidKey, "JWK has no kty string") }
        if let use = object["use"] {
            guard use.stringValue == "sig" else { throw JOSEError(.unsupportedKey, "JWK use is not sig") }
        }
        if let ops = object["key_ops"] {
            guard let list = ops.arrayValue, list.contains(.string("verify")) else {
                throw JOSEError(.unsupportedKey, "JWK key_ops does not include verify")
            }
        }
        let kid = object["kid"]
        if kid != nil && kid?.stringValue == nil { throw JOSEError(.invalidKey, "JWK kid is not a string") }
        let alg = object["alg"]
        if alg != nil && alg?.stringValue == nil { throw JOSEError(.invalidKey, "JWK alg is not a string") }

        switch kty {
        case "RSA":
            guard let n = Self.bytes(object, "n"), let e = Self.bytes(object, "e") else {
                throw JOSEError(.invalidKey, "RSA JWK n or e is missing or not base64url")
            }
            do { material = .rsa(try RSAPublicKey(modulus: n, exponent: e)) } catch {
                throw JOSEError(.invalidKey, "RSA JWK refused: \(error.description)")
            }
        case "EC":
            guard object["crv"]?.stringValue == "P-256" else { throw JOSEError(.unsupportedKey, "EC JWK curve is not P-256") }
            guard let x = Self.bytes(object, "x"), let y = Self.bytes(object, "y") else {
                throw JOSEError(.invalidKey, "EC JWK x or y is missing or not base64url")
            }
            do { material = .p256(try P256PublicKey(x: x, y: y)) } catch {
                throw JOSEError(.invalidKey, "EC JWK refused: \(error.description)")
            }
        default:
            throw JOSEError(.unsupportedKey, "JWK kty is not RSA or EC")
        }
        keyID = kid?.stringValue
        algorithm = alg?.stringValue
    }

    private static func bytes(_ object: [String: JSONValue], _ name: String) -> [UInt8]? {
        object[name]?.stringValue.flatMap(Base64URL.decode)
    }

    /// True when this key may verify `alg`: the key type fits and the key does not name a
    /// different `alg` (RFC 7517 §4.4).
    func canVerify(_ alg: JWSAlgorithm) -> Bool {
        guard algorithm == nil || algorithm == alg.rawValue else { return false }
        switch (material, alg) {
        case (.rsa, .rs256), (.p256, .es256): return true
        default: return false
        }
    }

    func verify(_ alg: JWSAlgorithm, signature: [UInt8], message: [UInt8]) -> Bool {
        switch (material, alg) {
        case (.rsa(let key), .rs256): return key.verifyRS256(signature: signature, message: message)
        case (.p256(let key), .es256): return key.verifyES256(signature: signature, message: message)
        default: return false
        }
    }
}
