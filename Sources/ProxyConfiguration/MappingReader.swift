/// Reads one mapping of the configuration against its schema: every key read is marked, and
/// `finish()` reports the keys nobody read — so a typo is an error, not a silently ignored line.
final class MappingReader {
    let path: String
    /// `path` with the names the file chooses replaced by placeholders (`providers.<name>`):
    /// the form `ConfigLoader.keys` lists.
    let pattern: String
    /// The placeholder for this mapping's own keys when the file names them (`<name>`).
    private let keysAre: String?
    let line: Int
    private let entries: [(key: String, value: ConfigNode)]
    private var used: Set<String> = []
    let problems: ProblemList

    init(_ node: ConfigNode, path: String, pattern: String? = nil, keysAre: String? = nil, problems: ProblemList) {
        self.path = path
        self.pattern = pattern ?? path
        self.keysAre = keysAre
        self.problems = problems
        line = node.line
        if case .mapping(let e, _) = node {
            entries = e
        } else {
            entries = []
            if case .null = node {} else { problems.add(path, node.line, "must be a mapping, not \(node.kindName)") }
        }
    }

    func child(_ key: String) -> String { path.isEmpty ? key : "\(path).\(key)" }

    func childPattern(_ key: String) -> String {
        let k = keysAre ?? key
        return pattern.isEmpty ? k : "\(pattern).\(k)"
    }

    var keys: [String] { entries.map(\.key) }

    /// The raw node for `key`, marking it read. `isKey: false` for a name asked about only to
    /// refuse it (an inline secret), which is not one of the keys the file accepts.
    func node(_ key: String, isKey: Bool = true) -> ConfigNode? {
        used.insert(key)
        if isKey { problems.keysRead.insert(childPattern(key)) }
        guard let v = entries.first(where: { $0.key == key })?.value else { return nil }
        if case .null = v { return nil }
        return v
    }

    func has(_ key: String) -> Bool { node(key) != nil }

    func string(_ key: String, required: Bool = false) -> String? {
        guard let n = node(key) else {
            if required { problems.add(child(key), line, "is required") }
            return nil
        }
        guard case .scalar(let s, _, _) = n else {
            problems.add(child(key), n.line, "must be a value, not \(n.kindName)")
            return nil
        }
        if s.isEmpty {
            problems.add(child(key), n.line, "must not be empty")
            return nil
        }
        return s
    }

    /// A value parsed by `parse`; `expected` describes the form in the error message.
    func parsed<T>(_ key: String, _ expected: String, _ parse: (String) -> T?) -> T? {
        guard let s = string(key) else { return nil }
        guard let v = parse(s) else {
            problems.add(child(key), node(key)?.line, "'\(s)' is not \(expected)")
            return nil
        }
        return v
    }

    func bool(_ key: String) -> Bool? {
        parsed(key, "true or false") { ["true": true, "false": false][$0] }
    }

    func int(_ key: String, in range: ClosedRange<Int>) -> Int? {
        parsed(key, "a whole number from \(range.lowerBound) to \(range.upperBound)") { Int($0).flatMap { range.contains($0) ? $0 : nil } }
    }

    /// The mapping at `key`; `keysAre` names the placeholder when the file chooses its keys.
    func mapping(_ key: String, keysAre: String? = nil) -> MappingReader? {
        guard let n = node(key) else { return nil }
        return MappingReader(n, path: child(key), pattern: childPattern(key), keysAre: keysAre, problems: problems)
    }

    /// A list of scalars; a single value is taken as a list of one.
    func strings(_ key: String) -> [String]? {
        guard let n = node(key) else { return nil }
        switch n {
        case .scalar(let s, _, _): return [s]
        case .sequence(let items, _):
            var out: [String] = []
            for (i, item) in items.enumerated() {
                guard case .scalar(let s, _, _) = item else {
                    problems.add("\(child(key))[\(i)]", item.line, "must be a value, not \(item.kindName)")
                    continue
                }
                out.append(s)
            }
            return out
        default:
            problems.add(child(key), n.line, "must be a value or a list, not \(n.kindName)")
            return nil
        }
    }

    /// Reports every key that no reader asked for.
    func finish() {
        for (key, value) in entries where !used.contains(key) {
            problems.add(child(key), value.line, "unknown key")
        }
    }
}

/// Collects problems in order of discovery, and what reading the file learned on the way.
final class ProblemList {
    private(set) var items: [ConfigProblem] = []
    /// Key paths whose value came from an environment variable, with the variable's name, so a
    /// problem with that value names the variable instead of a line of the file.
    var fromEnvironment: [String: String] = [:]
    /// Variables named by `…_env` keys: secrets, not overrides.
    var referencedVariables: Set<String> = []
    /// Every key pattern the loader asked for (see `ConfigLoader.keys`).
    var keysRead: Set<String> = []

    func add(_ path: String, _ line: Int?, _ message: String) {
        let variable = fromEnvironment[path] ?? fromEnvironment[Self.withoutIndex(path)]
        // Line 0 belongs to a mapping the environment created: there is no line to point at.
        let at = variable == nil && line != 0 ? line : nil
        items.append(ConfigProblem(path: path, line: at, message: message, variable: variable))
    }

    func add(variable: String, _ message: String) {
        items.append(ConfigProblem(path: "", line: nil, message: message, variable: variable))
    }

    /// `listen[2]` → `listen`.
    private static func withoutIndex(_ path: String) -> String {
        guard path.hasSuffix("]"), let open = path.lastIndex(of: "[") else { return path }
        return String(path[..<open])
    }
}
