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

    /// The table of what the domain takes from the engine lists exactly the public top-level
    /// `ProxyCore` types `OAuthCallback` names: a new dependency shows on the map or fails here.
    @Test func theDomainsDependenciesOnTheEngineAreTheOnesTheArchitectureLists() throws {
        func swiftFiles(_ dir: String) -> [URL] {
            FileManager.default.enumerator(at: Self.root.appendingPathComponent(dir), includingPropertiesForKeys: nil)!
                .compactMap { $0 as? URL }.filter { $0.pathExtension == "swift" }
        }
        var engineTypes = Set<String>()
        for file in swiftFiles("Sources/ProxyCore") {
            for line in try String(contentsOf: file, encoding: .utf8).split(separator: "\n") where line.hasPrefix("public ") {
                let words = line.split(whereSeparator: { " :<{(".contains($0) })
                if let kind = words.firstIndex(where: { ["class", "struct", "enum", "protocol", "typealias", "actor"].contains($0) }),
                   kind + 1 < words.count {
                    engineTypes.insert(String(words[kind + 1]))
                }
            }
        }
        #expect(engineTypes.count > 50)
        let domain = try swiftFiles("Sources/OAuthCallback").map { try String(contentsOf: $0, encoding: .utf8) }.joined(separator: "\n")
        let wordChars = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
        var used = Set<String>()
        for name in engineTypes {
            var search = domain[...]
            while let r = search.range(of: name) {
                let before = r.lowerBound == domain.startIndex ? nil : domain[domain.index(before: r.lowerBound)]
                let after = r.upperBound == domain.endIndex ? nil : domain[r.upperBound]
                if !(before.map { wordChars.contains($0) } ?? false) && !(after.map { wordChars.contains($0) } ?? false) {
                    used.insert(name)
                    break
                }
                search = domain[r.upperBound...]
            }
        }
        let doc = try String(contentsOf: Self.root.appendingPathComponent("docs/architecture.md"), encoding: .utf8)
        let lines = doc.split(separator: "\n", omittingEmptySubsequences: false)
        let start = try #require(lines.firstIndex { $0.hasPrefix("| what for |") })
        var listed = Set<String>()
        for line in lines[(start + 2)...] {
            guard line.hasPrefix("|") else { break }
            let cells = line.split(separator: "|")
            guard cells.count >= 2 else { continue }
            for piece in cells[1].split(separator: "`").enumerated() where piece.offset % 2 == 1 { listed.insert(String(piece.element)) }
        }
        #expect(used.subtracting(listed).isEmpty, "used by OAuthCallback, missing in docs/architecture.md: \(used.subtracting(listed).sorted())")
        #expect(listed.subtracting(used).isEmpty, "listed in docs/architecture.md, no longer used: \(listed.subtracting(used).sorted())")
    }
}
