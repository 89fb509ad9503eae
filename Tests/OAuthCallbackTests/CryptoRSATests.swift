import Testing
@testable import OAuthCallback

/// RFC 7515 Appendix A.2: "Example JWS Using RSASSA-PKCS1-v1_5 SHA-256".
enum RFC7515A2 {
    static let n = "ofgWCuLjybRlzo0tZWJjNiuSfb4p4fAkd_wWJcyQoTbji9k0l8W26mPddx"
        + "HmfHQp-Vaw-4qPCJrcS2mJPMEzP1Pt0Bm4d4QlL-yRT-SFd2lZS-pCgNMs"
        + "D1W_YpRPEwOWvG6b32690r2jZ47soMZo9wGzjb_7OMg0LOL-bSf63kpaSH"
        + "SXndS5z5rexMdbBYUsLA9e-KXBdQOS-UTo7WTBEMa2R2CapHg665xsmtdV"
        + "MTBQY4uDZlxvb3qCo5ZwKh9kG4LT6_I5IhlJH7aGhyxXFvUK-DWNmoudF8"
        + "NAco9_h9iaGNj8q2ethFkMLs91kzk2PAcDTW9gb54h4FRWyuXpoQ"
    static let e = "AQAB"
    static let signingInput = "eyJhbGciOiJSUzI1NiJ9"
        + ".eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFt"
        + "cGxlLmNvbS9pc19yb290Ijp0cnVlfQ"
    static let signature = "cC4hiUPoj9Eetdgtv3hF80EGrhuB__dzERat0XF9g2VtQgr9PJbu3XOiZj5R"
        + "Zmh7AAuHIm4Bh-0Qc_lF5YKt_O8W2Fp5jujGbds9uJdbF9CUAr7t1dnZcAcQ"
        + "jbKBYNX4BAynRFdiuB--f_nZLgrnbyTyWzO75vRK5h6xBArLIARNPvkSjtQB"
        + "MHlb1L07Qe7K0GarZRmB_eSN9383LcOLn6_dO--xi12jzDwusC-eOkHWEsqt"
        + "FZESc6BfI7noOPqvhJ1phCnvWh6IeYI2w9QOYEUipUTI8np6LbgGY9Fs98rq"
        + "Vt5AXLIhWkWywlVmtVrBp0igcN_IoypGlUPQGe77Rw"
    static var token: String { signingInput + "." + signature }
}

@Suite struct CryptoRSATests {
    func rfcKey() throws -> RSAPublicKey {
        try RSAPublicKey(modulus: Base64URL.decode(RFC7515A2.n)!, exponent: Base64URL.decode(RFC7515A2.e)!)
    }

    @Test func verifiesTheRFC7515AppendixA2Signature() throws {
        let key = try rfcKey()
        #expect(key.bitCount == 2048)
        #expect(key.verifyRS256(signature: Base64URL.decode(RFC7515A2.signature)!,
                                message: Array(RFC7515A2.signingInput.utf8)))
    }

    @Test(arguments: [0, 100, 255])
    func refusesTheRFCSignatureWithOneByteFlipped(position: Int) throws {
        var signature = Base64URL.decode(RFC7515A2.signature)!
        signature[position] ^= 0x01
        #expect(try !rfcKey().verifyRS256(signature: signature, message: Array(RFC7515A2.signingInput.utf8)))
    }

    @Test func refusesTheRFCSignatureOverAChangedMessage() throws {
        var message = Array(RFC7515A2.signingInput.utf8)
        message[message.count - 1] ^= 0x01
        #expect(try !rfcKey().verifyRS256(signature: Base64URL.decode(RFC7515A2.signature)!, message: message))
    }

    @Test func refusesASignatureOfTheWrongLength() throws {
        let signature = Base64URL.decode(RFC7515A2.signature)!
        let message = Array(RFC7515A2.signingInput.utf8)
        #expect(try !rfcKey().verifyRS256(signature: Array(signature.dropLast()), message: message))
        #expect(try !rfcKey().verifyRS256(signature: [0] + signature, message: message))
        #expect(try !rfcKey().verifyRS256(signature: [], message: message))
    }

    @Test func refusesKeysBelow2048Bits() throws {
        let weak = try RSAPrivateKey.generate(bits: 1024)
        let (n, e) = weak.publicComponents
        let error = #expect(throws: CryptoError.self) { try RSAPublicKey(modulus: n, exponent: e) }
        #expect(error?.code == .weakKey)
    }

    @Test(arguments: [
        ("", "AQAB"),                 // empty modulus
        (RFC7515A2.n, ""),            // empty exponent
        (RFC7515A2.n, "AQAA"),        // even exponent (65536)
        (RFC7515A2.n, "AQ"),          // exponent 1
        (RFC7515A2.n, "AQAAAAAAAAAB"), // exponent wider than 64 bits
    ])
    func refusesMalformedComponents(n: String, e: String) {
        let error = #expect(throws: CryptoError.self) {
            try RSAPublicKey(modulus: Base64URL.decode(n)!, exponent: Base64URL.decode(e)!)
        }
        #expect(error?.code == .invalidKey)
    }

    @Test func aLeadingZeroOctetInTheModulusIsTolerated() throws {
        let n = [0] + Base64URL.decode(RFC7515A2.n)!
        let key = try RSAPublicKey(modulus: n, exponent: [1, 0, 1])
        #expect(key.verifyRS256(signature: Base64URL.decode(RFC7515A2.signature)!,
                                message: Array(RFC7515A2.signingInput.utf8)))
    }

    @Test func signVerifyRoundTripWithAGeneratedKey() throws {
        let (n, e) = TestKeys.rsaA.publicComponents
        let key = try RSAPublicKey(modulus: n, exponent: e)
        let message = Array("header.payload".utf8)
        let signature = try TestKeys.rsaA.signRS256(message)
        #expect(key.verifyRS256(signature: signature, message: message))
        let (otherN, otherE) = TestKeys.rsaB.publicComponents
        #expect(try !RSAPublicKey(modulus: otherN, exponent: otherE).verifyRS256(signature: signature, message: message))
    }
}
