import Testing
@testable import OAuthCallback

@Suite struct CryptoAESGCMTests {
    /// The GCM specification's Test Case 16 (McGrew & Viega, as used in NIST's GCM
    /// validation): AES-256, 96-bit IV, 60-byte plaintext, 20-byte AAD.
    enum TestCase16 {
        static let key = hex("feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308")
        static let iv = hex("cafebabefacedbaddecaf888")
        static let plaintext = hex("d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a72"
                                   + "1c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b39")
        static let aad = hex("feedfacedeadbeeffeedfacedeadbeefabaddad2")
        static let ciphertext = hex("522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa"
                                    + "8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f662")
        static let tag = hex("76fc6ece0f4e1768cddf8853bb2d551b")
    }

    @Test func sealMatchesTheGCMSpecificationTestCase16() throws {
        let aead = try AES256GCM(key: TestCase16.key)
        let (ciphertext, tag) = try aead.seal(TestCase16.plaintext, nonce: TestCase16.iv, authenticating: TestCase16.aad)
        #expect(ciphertext == TestCase16.ciphertext)
        #expect(tag == TestCase16.tag)
    }

    @Test func openRecoversTheTestCase16Plaintext() throws {
        let aead = try AES256GCM(key: TestCase16.key)
        let box = TestCase16.iv + TestCase16.ciphertext + TestCase16.tag
        #expect(try aead.open(box, authenticating: TestCase16.aad) == TestCase16.plaintext)
    }

    static let tamperPositions = [0, 11, 12, 40, 71, 72, 87]  // nonce, ciphertext, tag

    @Test(arguments: tamperPositions)
    func anyFlippedBitInTheBoxIsRefused(position: Int) throws {
        let aead = try AES256GCM(key: TestCase16.key)
        var box = TestCase16.iv + TestCase16.ciphertext + TestCase16.tag
        box[position] ^= 0x01
        #expect(throws: CryptoError(.authenticationFailed, "AES-256-GCM tag mismatch")) {
            try aead.open(box, authenticating: TestCase16.aad)
        }
    }

    @Test func differentAssociatedDataIsRefused() throws {
        let aead = try AES256GCM(key: TestCase16.key)
        let box = TestCase16.iv + TestCase16.ciphertext + TestCase16.tag
        var aad = TestCase16.aad
        aad[0] ^= 0x80
        let error = #expect(throws: CryptoError.self) { try aead.open(box, authenticating: aad) }
        #expect(error?.code == .authenticationFailed)
    }

    @Test func sealOpenRoundTripUsesAFreshNonceEachTime() throws {
        let aead = try AES256GCM(key: try SecureRandom.bytes(32))
        let message = Array("session=alice; exp=1700000000".utf8)
        let first = try aead.seal(message, authenticating: Array("cookie-v1".utf8))
        let second = try aead.seal(message, authenticating: Array("cookie-v1".utf8))
        #expect(first.count == message.count + AES256GCM.overhead)
        #expect(first[..<12] != second[..<12])
        #expect(try aead.open(first, authenticating: Array("cookie-v1".utf8)) == message)
        #expect(try aead.open(second, authenticating: Array("cookie-v1".utf8)) == message)
    }

    @Test func emptyPlaintextStillCarriesATag() throws {
        let aead = try AES256GCM(key: TestCase16.key)
        let box = try aead.seal([])
        #expect(box.count == AES256GCM.overhead)
        #expect(try aead.open(box) == [])
    }

    @Test func aKeyOfTheWrongLengthIsRefused() {
        let error = #expect(throws: CryptoError.self) { try AES256GCM(key: [UInt8](repeating: 1, count: 16)) }
        #expect(error?.code == .invalidKey)
    }

    @Test func aBoxShorterThanNonceAndTagIsRefused() throws {
        let aead = try AES256GCM(key: TestCase16.key)
        let error = #expect(throws: CryptoError.self) { try aead.open([UInt8](repeating: 0, count: 27)) }
        #expect(error?.code == .invalidInput)
    }
}
