import Testing
@testable import NativeSignIn

/// The library's own percent-decoder, held to the same cases as the Android core's
/// QueryStringTest: both platforms must read a query the same way.
@Suite struct QueryStringTests {
    @Test func readingIsFormDecodingAndKeepsOrderAndEmptyValues() {
        let fields = QueryString.fields("scope=openid+email&&flag&a%20b=x=y")
        #expect(fields.map(\.name) == ["scope", "flag", "a b"])
        #expect(fields.map(\.value) == ["openid email", "", "x=y"])
        #expect(QueryString.fields(nil).isEmpty)
    }

    @Test(arguments: ["%ZZ", "a%ZZb", "50%", "%4", "%FF", "%E0%A4", "%C3", "%ED%A0%80", "%C0%80", "%F4%90%80%80"])
    func malformedEscapesAndBytesThatAreNotUTF8DecodeToNil(_ raw: String) {
        #expect(QueryString.decode(raw) == nil)
    }

    /// A query is ASCII as written; Foundation's decoder passed `é` through, the Android core's
    /// never did.
    @Test func aCharacterOutsideASCIIAsWrittenDecodesToNil() {
        #expect(QueryString.decode("é") == nil)
        #expect(QueryString.fields("state=sé").first?.value == nil)
    }

    @Test func validEscapesDecode() {
        #expect(QueryString.decode("%C3%A9~") == "é~")
        #expect(QueryString.decode("%c3%a9") == "é")
        #expect(QueryString.decode("%00") == "\u{0}")
        #expect(QueryString.decode("%F0%9F%98%80") == "😀")
        #expect(QueryString.decode("") == "")
    }

    @Test func anUndecodableNameIsKeptAsWritten() {
        let fields = QueryString.fields("%FF=1")
        #expect(fields.map(\.name) == ["%FF"])
        #expect(fields.map(\.value) == ["1"])
    }

    @Test func writingLeavesOnlyUnreservedCharactersAndReadsBackToTheSameText() {
        #expect(QueryString.escape("a b+c~d*e!'()/:é") == "a%20b%2Bc~d%2Ae%21%27%28%29%2F%3A%C3%A9")
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2000 {
            let text = String(String.UnicodeScalarView((0..<Int.random(in: 0..<12, using: &generator)).map { _ in
                Unicode.Scalar(UInt32.random(in: 0x20..<0x24F, using: &generator))!
            }))
            let escaped = QueryString.escape(text)
            #expect(escaped.utf8.allSatisfy { QueryString.isUnreserved($0) || $0 == UInt8(ascii: "%") })
            #expect(QueryString.decode(escaped) == text)
        }
    }
}
