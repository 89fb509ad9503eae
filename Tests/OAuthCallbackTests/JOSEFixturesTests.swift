// Shared fixtures for the Crypto/JOSE/JWKS tests: hex helpers, keys generated once per test
// run, and a token minter that signs whatever header and claims a test needs — including
// ones a real IdP never would.
import Testing
@testable import OAuthCallback

func hex(_ text: String) -> [UInt8] {
    let digits = Array(text.utf8).filter { $0 != UInt8(ascii: " ") && $0 != UInt8(ascii: "\n") }
    precondition(digits.count % 2 == 0, "odd hex length")
    func nibble(_ c: UInt8) -> UInt8 {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
        default: preconditionFailure("bad hex digit")
        }
    }
    return stride(from: 0, to: digits.count, by: 2).map { nibble(digits[$0]) << 4 | nibble(digits[$0 + 1]) }
}

func hexString(_ bytes: [UInt8]) -> String {
    let digits = Array("0123456789abcdef".utf8)
    var out: [UInt8] = []
    for b in bytes { out.append(digits[Int(b >> 4)]); out.append(digits[Int(b & 15)]) }
    return String(decoding: out, as: UTF8.self)
}

/// Keys generated once per test process (RSA generation is the slow part).
enum TestKeys {
    static let rsaA = try! RSAPrivateKey.generate(bits: 2048)
    static let rsaB = try! RSAPrivateKey.generate(bits: 2048)
    static let ecA = try! P256PrivateKey.generate()
    static let ecB = try! P256PrivateKey.generate()
}

enum Mint {
    static let issuer = "https://accounts.example.com"
    static let clientID = "123-ios.apps.example.com"
    static let now: Int64 = 1_700_000_000

    /// Claims a well-behaved IdP would send for our client; tests override single members.
    static func claims(_ overrides: [String: JSONValue?] = [:]) -> [String: JSONValue] {
        var claims: [String: JSONValue] = [
            "iss": .string(issuer),
            "aud": .string(clientID),
            "sub": .string("110169484474386276334"),
            "iat": .number(now - 10),
            "exp": .number(now + 3_590),
            "email": .string("jane@example.com"),
            "email_verified": .bool(true),
            "name": .string("Jane Doe"),
            "nonce": .string("n-0S6_WzA2Mj"),
        ]
        for (key, value) in overrides { claims[key] = value }
        return claims
    }

    static func encoded(_ object: [String: JSONValue]) -> String {
        Base64URL.encode(JSONValue.object(object).serialized())
    }

    /// A compact token with exactly this header and these claims, signed by `sign`.
    static func token(header: [String: JSONValue], claims: [String: JSONValue],
                      sign: ([UInt8]) -> [UInt8]) -> String {
        let input = encoded(header) + "." + encoded(claims)
        return input + "." + Base64URL.encode(sign(Array(input.utf8)))
    }

    static func rs256(_ claims: [String: JSONValue] = claims(), kid: String? = "rsa-a",
                      key: RSAPrivateKey = TestKeys.rsaA, extraHeader: [String: JSONValue] = [:]) -> String {
        var header: [String: JSONValue] = ["alg": .string("RS256")]
        if let kid { header["kid"] = .string(kid) }
        header.merge(extraHeader) { $1 }
        return token(header: header, claims: claims) { try! key.signRS256($0) }
    }

    static func es256(_ claims: [String: JSONValue] = claims(), kid: String? = "ec-a",
                      key: P256PrivateKey = TestKeys.ecA) -> String {
        var header: [String: JSONValue] = ["alg": .string("ES256")]
        if let kid { header["kid"] = .string(kid) }
        return token(header: header, claims: claims) { try! key.signES256($0) }
    }

    /// A JWK object for a test key, as an IdP would publish it.
    static func jwk(_ key: RSAPrivateKey, kid: String?, alg: String? = "RS256") -> JSONValue {
        let (n, e) = key.publicComponents
        var object: [String: JSONValue] = ["kty": .string("RSA"), "use": .string("sig"),
                                           "n": .string(Base64URL.encode(n)), "e": .string(Base64URL.encode(e))]
        if let kid { object["kid"] = .string(kid) }
        if let alg { object["alg"] = .string(alg) }
        return .object(object)
    }

    static func jwk(_ key: P256PrivateKey, kid: String?, alg: String? = "ES256") -> JSONValue {
        let (x, y) = key.publicKey.coordinates
        var object: [String: JSONValue] = ["kty": .string("EC"), "crv": .string("P-256"),
                                           "x": .string(Base64URL.encode(x)), "y": .string(Base64URL.encode(y))]
        if let kid { object["kid"] = .string(kid) }
        if let alg { object["alg"] = .string(alg) }
        return .object(object)
    }

    /// A key set parsed from JSON, the way fetched keys arrive.
    static func keySet(_ keys: [JSONValue]) -> JWKSet {
        try! JWKSet(json: JSONValue.object(["keys": .array(keys)]).serialized())
    }

    /// rsa-a, rsa-b, ec-a — the provider's normal key set in these tests.
    static let standardKeys = keySet([jwk(TestKeys.rsaA, kid: "rsa-a"), jwk(TestKeys.rsaB, kid: "rsa-b"),
                                      jwk(TestKeys.ecA, kid: "ec-a")])
}

@Suite struct JOSEFixturesTests {
    @Test func mintedTokensHaveThreePartsAndTheClaimsWeAskedFor() throws {
        let jwt = try JWT(compact: Mint.rs256(Mint.claims(["sub": .string("someone")])))
        #expect(jwt.header.algorithm == "RS256")
        #expect(jwt.header.keyID == "rsa-a")
        #expect(jwt.claims["sub"] == .string("someone"))
    }

    @Test func hexHelpersRoundTrip() {
        #expect(hexString(hex("00ff10ab")) == "00ff10ab")
        #expect(hex("0a 0b") == [0x0a, 0x0b])
    }
}
