import Foundation
import Testing

/// docs/architecture.md's table of where downstreams differ names every member of `Downstream`
/// that switches over its kinds: a member added for a new kind (or a new difference) without a
/// row fails here, so the map stays the code's.
@Suite struct ArchitectureDocsTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// The members declared in Downstream.swift (`var name` / `func name`, at the enum's
    /// member indentation), less the plumbing that is the same for every kind.
    static func members() throws -> Set<String> {
        let source = try String(contentsOf: root.appendingPathComponent("Sources/ProxyCore/Proxy/Downstream.swift"),
                                encoding: .utf8)
        var names = Set<String>()
        for line in source.split(separator: "\n") where line.hasPrefix("    var ") || line.hasPrefix("    func ") {
            let words = line.dropFirst(4).split(whereSeparator: { " (:<".contains($0) })
            if words.count > 1 { names.insert(String(words[1])) }
        }
        // `connection` is the HTTP/1.1-only fast paths' way in, not a difference between kinds.
        names.remove("connection")
        return names
    }

    static func tableRows() throws -> Set<String> {
        let doc = try String(contentsOf: root.appendingPathComponent("docs/architecture.md"), encoding: .utf8)
        // The table whose first column is "member", to its end.
        let lines = doc.split(separator: "\n", omittingEmptySubsequences: false)
        guard let start = lines.firstIndex(where: { $0.hasPrefix("| member |") }) else { return [] }
        var rows = Set<String>()
        for line in lines[(start + 2)...] {
            guard line.hasPrefix("| `") else { break }
            rows.insert(String(line.dropFirst(3).prefix(while: { $0 != "`" })))
        }
        return rows
    }

    @Test func everyDownstreamMemberHasARowInTheArchitectureTable() throws {
        let members = try Self.members()
        #expect(members.count >= 9, "read \(members.sorted()) from Downstream.swift")
        let rows = try Self.tableRows()
        let missing = members.subtracting(rows)
        #expect(missing.isEmpty, "docs/architecture.md lacks rows for \(missing.sorted())")
        let stale = rows.subtracting(members)
        #expect(stale.isEmpty, "docs/architecture.md has rows for members that are gone: \(stale.sorted())")
    }

    /// The request lifecycle's machine is its shell's alone: downstreams, the HTTP/2 callbacks,
    /// the access log and the domain report events to `ClientExchange` and read what it
    /// offers; none reaches `ClientExchange.machine`. Swift has no access level for "these
    /// files", so this reads the sources.
    @Test func onlyTheShellDrivesTheExchangeMachine() throws {
        let sources = Self.root.appendingPathComponent("Sources")
        let files = FileManager.default.enumerator(at: sources, includingPropertiesForKeys: nil)!
            .compactMap { $0 as? URL }.filter { $0.pathExtension == "swift" }
        #expect(files.count > 100)
        var offenders: [String] = []
        for file in files where !file.lastPathComponent.hasPrefix("ClientExchange") {
            let text = try String(contentsOf: file, encoding: .utf8)
            if text.contains(".machine.") || text.contains(".machine ") { offenders.append(file.lastPathComponent) }
        }
        #expect(offenders.isEmpty, "files reaching ClientExchange.machine: \(offenders.sorted())")
    }
}
