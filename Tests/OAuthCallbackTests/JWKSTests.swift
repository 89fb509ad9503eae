import Testing
@testable import OAuthCallback

@Suite struct JWKSTests {
    func parseCode(_ json: String) -> JOSEError.Code? {
        do {
            _ = try JWKSet(json: json)
            return nil
        } catch {
            return error.code
        }
    }

    @Test func verifiesBothRFC7515ExamplesThroughAKeySet() throws {
        let set = try JWKSet(json: """
            {"keys":[
              {"kty":"RSA","kid":"2011-04-29","n":"\(RFC7515A2.n)","e":"\(RFC7515A2.e)"},
              {"kty":"EC","crv":"P-256","x":"\(RFC7515A3.x)","y":"\(RFC7515A3.y)"}
            ]}
            """)
        #expect(set.keys.count == 2)
        let rsa = try set.key(for: .rs256, keyID: nil)
        #expect(rsa.keyID == "2011-04-29")
        #expect(rsa.verify(.rs256, signature: Base64URL.decode(RFC7515A2.signature)!, message: Array(RFC7515A2.signingInput.utf8)))
        let ec = try set.key(for: .es256, keyID: nil)
        #expect(ec.verify(.es256, signature: Base64URL.decode(RFC7515A3.signature)!, message: Array(RFC7515A3.signingInput.utf8)))
        // A key never verifies for the other algorithm family.
        #expect(!ec.verify(.rs256, signature: Base64URL.decode(RFC7515A2.signature)!, message: Array(RFC7515A2.signingInput.utf8)))
    }

    @Test func keepsSigningKeysAndCountsTheOnesItSkips() throws {
        let weak = try RSAPrivateKey.generate(bits: 1024)
        let set = Mint.keySet([
            Mint.jwk(TestKeys.rsaA, kid: "rsa-a"),
            Mint.jwk(TestKeys.ecA, kid: "ec-a", alg: nil),
            .object(["kty": .string("OKP"), "crv": .string("Ed25519"), "x": .string("11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo")]),
            .object(["kty": .string("EC"), "crv": .string("P-384"), "x": .string("AA"), "y": .string("AA")]),
            .object(["kty": .string("oct"), "k": .string("c2VjcmV0")]),
            Mint.jwk(weak, kid: "weak"),
            .string("not an object"),
        ] + [JSONValue](arrayLiteral: encryptionKey(), keyOpsWithoutVerify(), brokenModulus()))
        #expect(set.keys.map(\.keyID) == ["rsa-a", "ec-a"])
        #expect(set.ignoredKeyCount == 8)
    }

    func encryptionKey() -> JSONValue {
        guard case .object(var o) = Mint.jwk(TestKeys.rsaB, kid: "enc") else { fatalError() }
        o["use"] = .string("enc")
        return .object(o)
    }

    func keyOpsWithoutVerify() -> JSONValue {
        guard case .object(var o) = Mint.jwk(TestKeys.ecB, kid: "ops") else { fatalError() }
        o["key_ops"] = .array([.string("sign")])
        return .object(o)
    }

    func brokenModulus() -> JSONValue {
        .object(["kty": .string("RSA"), "kid": .string("broken"), "n": .string("AQAB="), "e": .string("AQAB")])
    }

    @Test func acceptsKeysWithKeyOpsVerifyAndNoUse() throws {
        guard case .object(var o) = Mint.jwk(TestKeys.ecB, kid: "ops") else { fatalError() }
        o["key_ops"] = .array([.string("verify")])
        #expect(Mint.keySet([.object(o)]).keys.count == 1)
    }

    @Test(arguments: [
        ("not JSON", "keys"),
        ("not an object", "[]"),
        ("no keys member", "{}"),
        ("keys not an array", #"{"keys":{}}"#),
        ("empty keys", #"{"keys":[]}"#),
        ("only unusable keys", #"{"keys":[{"kty":"oct","k":"c2VjcmV0"}]}"#),
        ("duplicate member", #"{"keys":[],"keys":[]}"#),
    ])
    func refusesDocumentsThatAreNotUsableKeySets(name: String, json: String) {
        #expect(parseCode(json) == .invalidKeySet)
    }

    @Test func refusesOversizedDocuments() {
        let padding = String(repeating: " ", count: JWKSet.maximumSize)
        #expect(parseCode(#"{"keys":[]}"# + padding) == .invalidKeySet)
    }

    @Test func refusesSetsWithMoreKeysThanTheLimit() {
        let key = #"{"kty":"oct","k":"AA"}"#
        let json = #"{"keys":["# + Array(repeating: key, count: JWKSet.maximumKeys + 1).joined(separator: ",") + "]}"
        #expect(parseCode(json) == .invalidKeySet)
    }

    @Test func selectsByKidAndRefusesAmbiguousKids() throws {
        let set = Mint.keySet([Mint.jwk(TestKeys.rsaA, kid: "same"), Mint.jwk(TestKeys.rsaB, kid: "same"),
                               Mint.jwk(TestKeys.ecA, kid: "ec")])
        #expect(throws: JOSEError(.ambiguousKey, "several keys share the kid")) { try set.key(for: .rs256, keyID: "same") }
        #expect(try set.key(for: .es256, keyID: "ec").keyID == "ec")
        let error = #expect(throws: JOSEError.self) { try set.key(for: .es256, keyID: "missing") }
        #expect(error?.code == .unknownKeyID)
    }

    @Test func aKidSharedByKeysOfDifferentTypesSelectsByAlg() throws {
        let set = Mint.keySet([Mint.jwk(TestKeys.rsaA, kid: "k1"), Mint.jwk(TestKeys.ecA, kid: "k1")])
        guard case .p256 = try set.key(for: .es256, keyID: "k1").material else {
            Issue.record("expected the EC key")
            return
        }
    }
}
