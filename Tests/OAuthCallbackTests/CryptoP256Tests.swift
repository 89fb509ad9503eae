import Testing
@testable import OAuthCallback

/// RFC 7515 Appendix A.3: "Example JWS Using ECDSA P-256 SHA-256".
enum RFC7515A3 {
    static let x = "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU"
    static let y = "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"
    static let signingInput = "eyJhbGciOiJFUzI1NiJ9"
        + ".eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFt"
        + "cGxlLmNvbS9pc19yb290Ijp0cnVlfQ"
    static let signature = "DtEhU3ljbEg8L38VWAfUAqOyKAM6-Xx-F4GawxaepmXFCgfTjDxw5djxLa8ISlSA"
        + "pmWQxfKTUJqPP3-Kg6NU1Q"
    static var token: String { signingInput + "." + signature }
}

/// A P-256 key in the form of Apple's `.p8` download, made once with
/// `openssl ecparam -name prime256v1 -genkey -noout | openssl pkcs8 -topk8 -nocrypt`;
/// x and y computed independently with Python's `cryptography`.
enum FixedP8 {
    static let pem = """
        -----BEGIN PRIVATE KEY-----
        MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgZcGxKF0yRpjtZpMi
        5BT2dlh8lrcyySXtt9DFQPqLqOmhRANCAASJOuXfP+vOhnA4leb43zrYH19miF0A
        qNPpYCFVBMo1rNYJC2LoKr+8d9W5aY2VBlCQK5+QvyAJamu8zll7OWpx
        -----END PRIVATE KEY-----
        """
    static let x = "iTrl3z_rzoZwOJXm-N862B9fZohdAKjT6WAhVQTKNaw"
    static let y = "1gkLYugqv7x31blpjZUGUJArn5C_IAlqa7zOWXs5anE"

    /// The same kind of file for P-384 (must be refused for ES256).
    static let p384 = """
        -----BEGIN PRIVATE KEY-----
        MIG2AgEAMBAGByqGSM49AgEGBSuBBAAiBIGeMIGbAgEBBDCvclSMDzg1YqvctftY
        pIfQ3cH6jaeW8901zpUOtLNtm94O1/sjyCGVAKppbPqfl5ChZANiAAT2uQGKMkb6
        lbtVmjPaDJtlFISfFKMbS/3lPr0g+z5lxg9HKb3cnXVvM7SRyJXGxbO4Gfk4g1zx
        +QdrodYOkEetHyFFBfpktRBmp2+XTfR5uNsOwvn/6eN1E95uzovL9fk=
        -----END PRIVATE KEY-----
        """

    /// A 1024-bit RSA key (must be refused: not EC).
    static let rsa = """
        -----BEGIN PRIVATE KEY-----
        MIICdwIBADANBgkqhkiG9w0BAQEFAASCAmEwggJdAgEAAoGBALmw8O0Zzau2JEry
        3PpUhXnAsX4m1GOH/wzG/dMjMCwZBWcEQkrFUtPoMzZoTQ7YNMNQdB0bKbkczXCZ
        EkSvT/vUmtK3LYy+LuAivttKSHcfSQNqK1+0LvAEMQK4D6OnPVW8Rh63OEdOmhC9
        WDlMvGcFVuDmBqb5aproNxZ7GROXAgMBAAECgYAvpiDcpp9pLY74kIN11RR/Hpwt
        I+eiNraS38koUcI9vpntSmF8cFAFwnLJxk/nvEEl0VJKWbsGHkb1WsIeT+I068yA
        G4g0ApcpmnzpirFJPh1pzCX4knswZ2RElzEsIZcK4tFzN21XXmPqQOr9JXP0VZOt
        MacQgKFqB5QxEdSXiQJBAOde4UkFLseo8QvCmmoPSzW4gaGIaYsD1Ddsm9A8BdsW
        /rcQ/g4Vu9RKaHE2Wye6HBvLIMMNkorIqTxKJEnPKNUCQQDNdT4jDzX9yCJtD9RQ
        S59XBVerUjmDq8He3zmBJzbpMSfwTTl9op3PWyQHrBLWu3rbDcF8hi00QT1MSxLE
        zUC7AkBuGE7ZITc2WKSCtRInH6npISfGBpQ6SxMjYHHwL2+V5iZEVDif2SWsic+S
        94t+pueTLiAj0ISHt54YCyujV4kVAkEAuASMdMZI61Z3Twtgc9Jnkn9ceDua+824
        RK/WR1EiI1Y9mULxfQ9LHM9aw+xgqycb8Fqvs6JRln3gMxcCZnYXxQJBALbF5wtH
        HyEfG4pgakJ/fMyO7+juftVu5gVvLZo9/Y/hhoJC11elUxuvz7JT0AqYTvm52/Ak
        2ydaqAAVOK97Vl8=
        -----END PRIVATE KEY-----
        """

    /// A passphrase-protected P-256 key (must be refused without prompting on a terminal).
    static let encrypted = """
        -----BEGIN ENCRYPTED PRIVATE KEY-----
        MIHsMFcGCSqGSIb3DQEFDTBKMCkGCSqGSIb3DQEFDDAcBAgNZulJQAOdzgICCAAw
        DAYIKoZIhvcNAgkFADAdBglghkgBZQMEASoEEMfO4MxICNLvqPF5C7ejSBMEgZAJ
        B5U3knHJGnRlW9aiXdPMTBK+VYSgiCc8P6CEeT7W5HXkfeUp0mkBGnHPwieYqnXS
        zDAf4hJov2scl/Ckf/LjLVK82Hg9E97HH1+GUGfKZ5aWjeKDxJ0TiVTn8cgZnsSH
        37AMgD7ihopcxmrWI0QxdD4B1PL9bQwxxCxmOCP6sWF4CWB6WoKINCF4E+gmkpU=
        -----END ENCRYPTED PRIVATE KEY-----
        """
}

@Suite struct CryptoP256Tests {
    func rfcKey() throws -> P256PublicKey {
        try P256PublicKey(x: Base64URL.decode(RFC7515A3.x)!, y: Base64URL.decode(RFC7515A3.y)!)
    }

    @Test func verifiesTheRFC7515AppendixA3Signature() throws {
        #expect(try rfcKey().verifyES256(signature: Base64URL.decode(RFC7515A3.signature)!,
                                         message: Array(RFC7515A3.signingInput.utf8)))
    }

    @Test(arguments: [0, 31, 32, 63])
    func refusesTheRFCSignatureWithOneByteFlipped(position: Int) throws {
        var signature = Base64URL.decode(RFC7515A3.signature)!
        signature[position] ^= 0x01
        #expect(try !rfcKey().verifyES256(signature: signature, message: Array(RFC7515A3.signingInput.utf8)))
    }

    @Test func refusesSignaturesThatAreNot64Bytes() throws {
        let signature = Base64URL.decode(RFC7515A3.signature)!
        let message = Array(RFC7515A3.signingInput.utf8)
        #expect(try !rfcKey().verifyES256(signature: Array(signature.dropLast()), message: message))
        #expect(try !rfcKey().verifyES256(signature: signature + [0], message: message))
        // The same r and s, DER-encoded: JOSE never uses DER.
        let der = P256PublicKey.derSignature(fromRaw: signature)!
        #expect(try !rfcKey().verifyES256(signature: der, message: message))
    }

    @Test func refusesZeroRAndS() throws {
        #expect(try !rfcKey().verifyES256(signature: [UInt8](repeating: 0, count: 64),
                                          message: Array(RFC7515A3.signingInput.utf8)))
    }

    @Test func refusesAPointThatIsNotOnTheCurve() {
        var y = Base64URL.decode(RFC7515A3.y)!
        y[31] ^= 0x01
        let error = #expect(throws: CryptoError.self) { try P256PublicKey(x: Base64URL.decode(RFC7515A3.x)!, y: y) }
        #expect(error?.code == .invalidKey)
    }

    @Test func refusesShortenedCoordinates() {
        let x = Base64URL.decode(RFC7515A3.x)!, y = Base64URL.decode(RFC7515A3.y)!
        #expect(throws: CryptoError.self) { try P256PublicKey(x: Array(x.dropFirst()), y: y) }
        #expect(throws: CryptoError.self) { try P256PublicKey(x: x, y: y + [0]) }
    }

    @Test func convertsDERWithShortIntegersToLeftPaddedRawSignatures() {
        // SEQUENCE { INTEGER 1, INTEGER 2 }
        let raw = P256PublicKey.rawSignature(fromDER: hex("3006020101020102"))
        #expect(raw == [UInt8](repeating: 0, count: 31) + [1] + [UInt8](repeating: 0, count: 31) + [2])
    }

    @Test func convertsRawSignaturesWithTheHighBitSetToPositiveDERIntegers() {
        let r = [0x80] + [UInt8](repeating: 0, count: 31)
        let s = [UInt8](repeating: 0, count: 31) + [0x7f]
        let der = P256PublicKey.derSignature(fromRaw: r + s)
        #expect(der.map(hexString) == "3026" + "022100" + "80" + String(repeating: "00", count: 31) + "02017f")
        #expect(der.flatMap(P256PublicKey.rawSignature(fromDER:)) == r + s)
    }

    @Test func loadsAnAppleStyleP8KeyAndDerivesItsPublicPoint() throws {
        let key = try P256PrivateKey(pem: FixedP8.pem)
        let (x, y) = key.publicKey.coordinates
        #expect(Base64URL.encode(x) == FixedP8.x)
        #expect(Base64URL.encode(y) == FixedP8.y)
    }

    @Test func loadsTheSameKeyFromItsDERBody() throws {
        let body = FixedP8.pem.split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
        let key = try P256PrivateKey(der: Base64.decode(body, .standard)!)
        #expect(Base64URL.encode(key.publicKey.coordinates.x) == FixedP8.x)
    }

    @Test func signsAndVerifiesWithTheLoadedKey() throws {
        let key = try P256PrivateKey(pem: FixedP8.pem)
        let message = Array("eyJhbGciOiJFUzI1NiJ9.e30".utf8)
        let signature = try key.signES256(message)
        #expect(signature.count == 64)
        let publicKey = try P256PublicKey(x: Base64URL.decode(FixedP8.x)!, y: Base64URL.decode(FixedP8.y)!)
        #expect(publicKey.verifyES256(signature: signature, message: message))
        #expect(!TestKeys.ecB.publicKey.verifyES256(signature: signature, message: message))
    }

    @Test func generatedKeysSignAndVerifyManyTimes() throws {
        // Many signatures so that r or s with leading zero bytes (about 1 in 128 signatures)
        // get exercised by the left padding.
        let key = try P256PrivateKey.generate()
        let publicKey = key.publicKey
        for i in 0..<200 {
            let message = Array("message \(i)".utf8)
            #expect(publicKey.verifyES256(signature: try key.signES256(message), message: message))
        }
    }

    @Test(arguments: [
        ("P-384 key", FixedP8.p384),
        ("RSA key", FixedP8.rsa),
        ("encrypted key", FixedP8.encrypted),
        ("not PEM", "MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg"),
        ("empty", ""),
    ])
    func refusesPrivateKeysThatAreNotUsableP256(name: String, pem: String) {
        let error = #expect(throws: CryptoError.self) { try P256PrivateKey(pem: pem) }
        #expect(error?.code == .invalidKey)
    }
}
