import Testing
@testable import OAuthCallback

@Suite struct CryptoBase64Tests {
    /// RFC 4648 §10 test vectors: (input, base64, base64url without padding).
    static let rfc4648: [(String, String, String)] = [
        ("", "", ""),
        ("f", "Zg==", "Zg"),
        ("fo", "Zm8=", "Zm8"),
        ("foo", "Zm9v", "Zm9v"),
        ("foob", "Zm9vYg==", "Zm9vYg"),
        ("fooba", "Zm9vYmE=", "Zm9vYmE"),
        ("foobar", "Zm9vYmFy", "Zm9vYmFy"),
    ]

    @Test(arguments: rfc4648)
    func encodesAndDecodesTheRFC4648Vectors(input: String, standard: String, url: String) {
        let bytes = Array(input.utf8)
        #expect(Base64.encode(bytes, .standard) == standard)
        #expect(Base64URL.encode(bytes) == url)
        #expect(Base64.decode(standard, .standard) == bytes)
        #expect(Base64URL.decode(url) == bytes)
    }

    @Test func theTwoAlphabetsDifferOnlyInTheLastTwoCharacters() {
        let bytes: [UInt8] = [0xfb, 0xff, 0xbf]
        #expect(Base64.encode(bytes, .standard) == "+/+/")
        #expect(Base64URL.encode(bytes) == "-_-_")
        #expect(Base64URL.decode("-_-_") == bytes)
        #expect(Base64.decode("+/+/", .standard) == bytes)
    }

    @Test func everyByteValueRoundTrips() {
        let bytes = (0...255).map { UInt8($0) }
        for length in 0...bytes.count {
            let slice = Array(bytes[..<length])
            #expect(Base64URL.decode(Base64URL.encode(slice)) == slice)
            #expect(Base64.decode(Base64.encode(slice, .standard), .standard) == slice)
        }
    }

    @Test(arguments: [
        "Zg==",     // padding
        "Zm8=",     // padding
        "Zm9v\n",   // whitespace
        " Zm9v",    // whitespace
        "Zm 9v",    // whitespace
        "+/8",      // standard alphabet
        "Zh",       // non-canonical: trailing bits set ("f" is "Zg")
        "Zm9",      // non-canonical: trailing bits set ("fo" is "Zm8")
        "Z",        // a single leftover character holds no byte
        "Zm9vY",    // idem after a full group
        "Zm9v.",    // not in any alphabet
        "Zm9vYmF\u{e9}", // non-ASCII
    ])
    func base64URLRefusesNonCanonicalInput(_ input: String) {
        #expect(Base64URL.decode(input) == nil)
    }

    @Test(arguments: [
        "Zg",       // missing padding
        "Zg=",      // short padding
        "Zg===",    // long padding
        "Zh==",     // non-canonical trailing bits
        "Zm9=",     // non-canonical trailing bits
        "-_8=",     // URL alphabet
        "Zg==Zg==", // padding in the middle
        "Z===",     // padding where data must be
        "====",     // padding only
        "Zm9v\r\n", // whitespace
    ])
    func standardBase64RefusesNonCanonicalInput(_ input: String) {
        #expect(Base64.decode(input, .standard) == nil)
    }
}
