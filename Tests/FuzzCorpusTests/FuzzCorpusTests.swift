import Foundation
import Testing
import FuzzTargets

/// Every input in `fuzz/corpus/<target>/` — the seeds and what fuzzing found — runs through its
/// target on every `swift test`: a fixed finding stays fixed (a crash or a broken invariant
/// fails the run, naming the file).
@Suite struct FuzzCorpusTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("fuzz/corpus")

    @Test(arguments: FuzzTargets.all.keys.sorted())
    func everyCorpusInputRuns(target: String) throws {
        let dir = Self.root.appendingPathComponent(target)
        let files = try FileManager.default.contentsOfDirectory(atPath: dir.path).sorted()
        #expect(!files.isEmpty, "fuzz/corpus/\(target) has no seeds")
        let run = FuzzTargets.all[target]!
        for file in files {
            let data = try Data(contentsOf: dir.appendingPathComponent(file))
            data.withUnsafeBytes { run($0) }
        }
    }

    @Test func everyCorpusDirectoryHasATarget() throws {
        let dirs = try FileManager.default.contentsOfDirectory(atPath: Self.root.path).sorted()
        #expect(dirs == FuzzTargets.all.keys.sorted())
    }
}
