import Testing
@testable import OAuthCallback

@Suite struct CryptoSHA256Tests {
    /// FIPS 180-4 examples (NIST CSRC "SHA256.pdf", "SHA256_2.pdf") and the empty message.
    @Test(arguments: [
        ("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
        ("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
        ("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"),
    ])
    func digestMatchesTheNISTVector(message: String, digest: String) {
        #expect(hexString(SHA256.hash(message)) == digest)
        #expect(hexString(SHA256.hash(Array(message.utf8))) == digest)
    }

    @Test func digestOfOneMillionLetterAMatchesTheNISTVector() {
        let message = [UInt8](repeating: UInt8(ascii: "a"), count: 1_000_000)
        #expect(hexString(SHA256.hash(message)) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }
}
