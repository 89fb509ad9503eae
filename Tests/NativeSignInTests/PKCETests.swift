import Testing
@testable import NativeSignIn

@Suite struct PKCETests {
    @Test func theChallengeIsRFC7636AppendixBsVector() throws {
        let pair = try PKCE(verifier: "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk")
        #expect(pair.challenge == "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM")
        #expect(PKCE.method == "S256")
    }

    @Test func sha256IsFIPS180sVectorForABC() {
        let hex = PKCE.sha256(Array("abc".utf8)).map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined()
        #expect(hex == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    }

    @Test func generatedVerifiersHaveTheDefaultLengthAndOnlyTheRFCAlphabet() {
        let alphabet = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
        var seen = Set<Character>()
        var verifiers = Set<String>()
        for _ in 0..<300 {
            let pair = PKCE.generate()
            #expect(pair.verifier.count == PKCE.defaultLength)
            #expect(pair.verifier.allSatisfy(alphabet.contains))
            #expect(pair.challenge.count == 43)    // 32 bytes, base64url without padding
            seen.formUnion(pair.verifier)
            verifiers.insert(pair.verifier)
        }
        // 19,200 draws from 66 characters: every one of them shows up (a missing one has a
        // probability below 1e-120), so the whole alphabet is in use, not just base64url's.
        #expect(seen == alphabet)
        #expect(verifiers.count == 300)
    }

    @Test(arguments: [43, 128])
    func theRFCsLengthBoundsCanBeGenerated(_ length: Int) {
        #expect(PKCE.generate(length: length).verifier.count == length)
    }

    @Test(arguments: [String(repeating: "a", count: 42), String(repeating: "a", count: 129),
                      String(repeating: "a", count: 42) + "+", String(repeating: "a", count: 42) + "=",
                      String(repeating: "a", count: 42) + "é"])
    func aVerifierOutsideTheRFCIsRefused(_ verifier: String) {
        #expect(throws: NativeSignInError.self) { try PKCE(verifier: verifier) }
    }

    @Test func theBoundsThemselvesAreAccepted() throws {
        _ = try PKCE(verifier: String(repeating: "~", count: 43))
        _ = try PKCE(verifier: String(repeating: "-", count: 128))
    }
}
