import Testing
@testable import OAuthCallback

private let sampleHeader = Mint.encoded(["alg": .string("RS256")])
private let samplePayload = Mint.encoded(["sub": .string("x")])

@Suite struct JOSEJWTTests {
    func code(of token: String) -> JOSEError.Code? {
        do {
            _ = try JWT(compact: token)
            return nil
        } catch {
            return error.code
        }
    }

    @Test func parsesTheRFC7515AppendixA2Token() throws {
        let jwt = try JWT(compact: RFC7515A2.token)
        #expect(jwt.header.algorithm == "RS256")
        #expect(jwt.header.keyID == nil)
        #expect(jwt.claims["iss"] == .string("joe"))
        #expect(jwt.claims["exp"]?.int64Value == 1_300_819_380)
        #expect(jwt.claims["http://example.com/is_root"] == .bool(true))
        #expect(jwt.signingInput == Array(RFC7515A2.signingInput.utf8))
        #expect(jwt.signature.count == 256)
    }

    @Test(arguments: [
        ("two parts", "\(sampleHeader).\(samplePayload)"),
        ("four parts", "\(sampleHeader).\(samplePayload).c2ln.c2ln"),
        ("one part", "\(sampleHeader)"),
        ("empty header", ".\(samplePayload).c2ln"),
        ("empty payload", "\(sampleHeader)..c2ln"),
        ("empty signature (unsecured JWS form)", "\(sampleHeader).\(samplePayload)."),
        ("padded base64", "\(sampleHeader)=.\(samplePayload).c2ln"),
        ("standard alphabet", "\(sampleHeader).\(samplePayload).c2l+"),
        ("whitespace", "\(sampleHeader). \(samplePayload).c2ln"),
        ("non-canonical trailing bits", "\(sampleHeader).\(samplePayload).c2l"),
        ("empty string", ""),
    ])
    func refusesMalformedCompactForms(name: String, token: String) {
        #expect(code(of: token) == .malformedToken)
    }

    @Test(arguments: [
        ("header is an array", Base64URL.encode("[\"RS256\"]"), samplePayload),
        ("payload is a string", sampleHeader, Base64URL.encode("\"abc\"")),
        ("payload is a number", sampleHeader, Base64URL.encode("1")),
        ("payload is not JSON", sampleHeader, Base64URL.encode("sub=x")),
        ("header has trailing data", Base64URL.encode("{\"alg\":\"RS256\"}x"), samplePayload),
    ])
    func refusesPartsThatAreNotJSONObjects(name: String, header: String, payload: String) {
        #expect(code(of: "\(header).\(payload).c2ln") == .invalidJSON)
    }

    @Test func refusesDuplicateClaimNames() {
        let payload = Base64URL.encode(#"{"aud":"attacker","sub":"x","aud":"us"}"#)
        #expect(code(of: "\(sampleHeader).\(payload).c2ln") == .duplicateJSONKey)
    }

    @Test func refusesTokensLargerThan16KiB() {
        let big = Mint.encoded(["pad": .string(String(repeating: "a", count: 13_000))])
        #expect(code(of: "\(sampleHeader).\(big).c2ln") == .tokenTooLarge)
    }

    @Test(arguments: ["JWT", "jwt", "Jwt", "application/jwt", "application/JWT"])
    func acceptsTypJWTInAnyCase(_ typ: String) {
        let header = Mint.encoded(["alg": .string("RS256"), "typ": .string(typ)])
        #expect(code(of: "\(header).\(samplePayload).c2ln") == nil)
    }

    @Test(arguments: ["at+jwt", "logout+jwt", "JWS", ""])
    func refusesOtherTyps(_ typ: String) {
        let header = Mint.encoded(["alg": .string("RS256"), "typ": .string(typ)])
        #expect(code(of: "\(header).\(samplePayload).c2ln") == .unsupportedType)
    }

    @Test(arguments: [
        ("no alg", ["typ": JSONValue.string("JWT")]),
        ("alg not a string", ["alg": .number("256")]),
        ("empty alg", ["alg": .string("")]),
        ("kid not a string", ["alg": .string("RS256"), "kid": .number("1")]),
        ("typ not a string", ["alg": .string("RS256"), "typ": .bool(true)]),
    ])
    func refusesHeadersWithMissingOrMistypedMembers(name: String, header: [String: JSONValue]) {
        #expect(code(of: "\(Mint.encoded(header)).\(samplePayload).c2ln") == .malformedToken)
    }

    @Test func refusesCriticalHeaderExtensions() {
        let header = Mint.encoded(["alg": .string("RS256"), "crit": .array([.string("exp")]), "exp": .number("1")])
        #expect(code(of: "\(header).\(samplePayload).c2ln") == .unsupportedCriticalHeader)
    }

    @Test func refusesNestedJWTs() {
        let header = Mint.encoded(["alg": .string("RS256"), "cty": .string("JWT")])
        #expect(code(of: "\(header).\(samplePayload).c2ln") == .unsupportedType)
    }

    @Test func errorDescriptionsNeverContainTheToken() {
        let secretish = "c2VjcmV0LXN1YmplY3Q"
        let token = "\(sampleHeader).\(secretish)"
        do {
            _ = try JWT(compact: token)
            Issue.record("a two-part token was accepted")
        } catch {
            #expect(!error.description.contains(secretish))
            #expect(!error.description.contains(sampleHeader))
        }
    }
}
