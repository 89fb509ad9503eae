import Foundation
import Testing
@testable import ProxyConfiguration

/// docs/reference.md is held to the loader's own list of keys (`ConfigLoader.keys`, which
/// `ConfigKeysTests` holds to what the loader reads): a key added without its line fails here.
@Suite struct ReferenceDocsTests {
    static func reference() throws -> String {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        return try String(contentsOf: root.appendingPathComponent("docs/reference.md"), encoding: .utf8)
    }

    @Test func everyKeyHasItsRowWithItsVariable() throws {
        let rows = try Self.reference().split(separator: "\n").filter { $0.hasPrefix("| `") }
        var missing: [String] = []
        for key in ConfigLoader.keys {
            guard let row = rows.first(where: { $0.hasPrefix("| `\(key.path)` |") }) else {
                missing.append(key.path)
                continue
            }
            if let variable = key.environmentVariable, !row.contains("`\(variable)`") {
                missing.append("\(key.path): \(variable)")
            }
        }
        #expect(missing == [], "not documented in docs/reference.md")
    }

    @Test func everyOtherVariableIsDocumented() throws {
        let text = try Self.reference()
        let missing = ConfigLoader.otherVariables.map(\.name).filter { !text.contains("| `\($0)` |") }
        #expect(missing == [])
    }
}
