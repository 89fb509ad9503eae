import Testing
@testable import OAuthCallback

@Suite struct JOSEJSONTests {
    func parse(_ text: String) throws(JSONParser.Failure) -> JSONValue {
        try JSONParser.parse(Array(text.utf8))
    }

    @Test func parsesEveryKindOfValue() throws {
        let value = try parse(#" { "s": "a\"b\\c\/d\n\u00e9\ud83d\ude00", "n": -12.5e3, "i": 0, "t": true, "f": false, "z": null, "a": [1, [], {}] } "#)
        #expect(value["s"] == .string("a\"b\\c/d\n\u{e9}\u{1F600}"))
        #expect(value["n"] == .number("-12.5e3"))
        #expect(value["i"] == .number("0"))
        #expect(value["t"] == .bool(true))
        #expect(value["f"] == .bool(false))
        #expect(value["z"] == .null)
        #expect(value["a"] == .array([.number("1"), .array([]), .object([:])]))
    }

    @Test(arguments: [
        #"{"aud":"a","aud":"b"}"#,
        #"{"x":{"k":1,"k":1}}"#,
        #"[{"iss":"a","sub":"b","iss":"a"}]"#,
        #"{"e\u0301":1,"é":2}"#, // canonically equivalent names are one name to Swift
    ])
    func refusesDuplicateMemberNames(_ text: String) {
        let error = #expect(throws: JSONParser.Failure.self) { try parse(text) }
        #expect(error?.reason == .duplicateKey)
    }

    @Test(arguments: [
        "", " ", "{", "}", "{\"a\":1,}", "[1,]", "{\"a\" 1}", "{'a':1}", "{a:1}",
        "01", "-", "1.", ".5", "1e", "+1", "NaN", "Infinity", "tru", "nul",
        "{\"a\":1} x", "{\"a\":1}{}", "\"\u{01}\"", "\"tab\there\"", "\"\\x\"", "\"\\u12\"",
        "\"\\ud800\"", "\"\\udc00\"", "\"\\ud800\\u0041\"", "\u{FEFF}{}",
    ])
    func refusesInputThatIsNotStrictJSON(_ text: String) {
        #expect(throws: JSONParser.Failure.self) { try parse(text) }
    }

    @Test(arguments: [[0x22, 0xC3, 0x22], [0x22, 0xED, 0xA0, 0x80, 0x22], [0x22, 0xC0, 0xAF, 0x22], [0x22, 0xFF, 0x22]])
    func refusesInvalidUTF8(_ bytes: [UInt8]) {
        let error = #expect(throws: JSONParser.Failure.self) { try JSONParser.parse(bytes) }
        #expect(error?.reason == .invalidUTF8)
    }

    @Test func refusesNestingDeeperThanTheLimit() throws {
        let ok = String(repeating: "[", count: 32) + String(repeating: "]", count: 32)
        _ = try parse(ok)
        let deep = String(repeating: "[", count: 33) + String(repeating: "]", count: 33)
        let error = #expect(throws: JSONParser.Failure.self) { try parse(deep) }
        #expect(error?.reason == .tooDeep)
    }

    @Test(arguments: [
        ("1300819380", Int64(1_300_819_380)),
        ("-5", Int64(-5)),
        ("1300819380.9", Int64(1_300_819_380)),
        ("1.3e9", Int64(1_300_000_000)),
        ("9223372036854775807", Int64.max),
    ])
    func readsNumericDates(text: String, expected: Int64) throws {
        #expect(try parse(text).int64Value == expected)
    }

    @Test(arguments: ["9223372036854775808", "1e300", "\"1300819380\"", "true"])
    func refusesNumericDatesOutsideInt64OrOfAnotherType(_ text: String) throws {
        #expect(try parse(text).int64Value == nil)
    }

    @Test func serializationIsSortedCompactAndParsesBack() throws {
        let value: JSONValue = .object(["b": .array([.number("1"), .null]), "a": .string("q\"\\\n\u{1}é"), "c": .bool(false)])
        #expect(value.serializedString == #"{"a":"q\"\\\n\u0001é","b":[1,null],"c":false}"#)
        #expect(try JSONParser.parse(value.serialized()) == value)
    }
}
