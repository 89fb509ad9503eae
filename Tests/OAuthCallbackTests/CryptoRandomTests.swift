import Testing
@testable import OAuthCallback

@Suite struct CryptoRandomTests {
    @Test func randomBytesHaveTheRequestedLengthAndDiffer() throws {
        let a = try SecureRandom.bytes(32)
        let b = try SecureRandom.bytes(32)
        #expect(a.count == 32)
        #expect(a != b)  // 2^-256 chance of a false failure
        #expect(try SecureRandom.bytes(0).isEmpty)
    }

    @Test(arguments: [
        ([UInt8](), [UInt8](), true),
        ([1, 2, 3], [1, 2, 3], true),
        ([1, 2, 3], [1, 2, 4], false),
        ([0, 2, 3], [1, 2, 3], false),
        ([1, 2, 3], [1, 2], false),
        ([1, 2], [1, 2, 3], false),
    ] as [([UInt8], [UInt8], Bool)])
    func constantTimeEqualsAgreesWithEquality(a: [UInt8], b: [UInt8], equal: Bool) {
        #expect(ConstantTime.equals(a, b) == equal)
    }

    @Test func constantTimeEqualsComparesStringsByTheirUTF8Bytes() {
        #expect(ConstantTime.equals("nonce-1", "nonce-1"))
        #expect(!ConstantTime.equals("nonce-1", "nonce-2"))
        // Canonically equivalent but different bytes: must not be equal here.
        #expect(!ConstantTime.equals("\u{e9}", "e\u{301}"))
    }
}
