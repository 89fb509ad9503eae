import Testing
@testable import ProxyConfiguration

@Suite struct YAMLReaderTests {
    @Test func yamlAndTheEquivalentJSONReadTheSame() throws {
        let yaml = try YAMLReader.read("a: 1\nb:\n  - x\n  - \"y\"\nc: { d: e }\n")
        let json = try YAMLReader.read(#"{"a": "1", "b": ["x", "y"], "c": {"d": "e"}}"#)
        #expect(describe(yaml) == describe(json))
        #expect(describe(yaml) == "{a:1,b:[x,y],c:{d:e}}")
    }

    @Test(arguments: [
        ("a: 1\na: 2\n", "duplicate key 'a'"),
        ("base: &x {k: v}\nother: *x\n", "anchors are not supported"),
        ("a: !!binary aGVsbG8=\n", "tags are not supported"),
        ("a: 1\n---\nb: 2\n", "only one document per file is allowed"),
        ("? [a, b]\n: c\n", "keys must be plain values"),
    ])
    func unsafeOrAmbiguousDocumentsAreRefused(text: String, message: String) {
        #expect(throws: YAMLReader.Failure.self) { try YAMLReader.read(text) }
        do { _ = try YAMLReader.read(text) } catch { #expect(error.message == message) }
    }

    @Test func syntaxErrorsNameTheirLine() {
        do {
            _ = try YAMLReader.read("a: 1\nb: [unclosed\nc: 2\n")
            Issue.record("expected a failure")
        } catch {
            #expect(error.line >= 2)
        }
    }

    @Test func emptyAndNullValuesAreNull() throws {
        let n = try YAMLReader.read("a:\nb: ~\nc: \"\"\n")
        #expect(describe(n) == "{a:null,b:null,c:}")
    }

    private func describe(_ n: ConfigNode) -> String {
        switch n {
        case .scalar(let s, _, _): return s
        case .null: return "null"
        case .sequence(let items, _): return "[" + items.map(describe).joined(separator: ",") + "]"
        case .mapping(let e, _): return "{" + e.map { "\($0.key):\(describe($0.value))" }.joined(separator: ",") + "}"
        }
    }
}
