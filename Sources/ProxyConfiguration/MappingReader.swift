/// Reads one mapping of the configuration against its schema: every key read is marked, and
/// `finish()` reports the keys nobody read — so a typo is an error, not a silently ignored line.
final class MappingReader {
    let path: String
    let line: Int
    private let entries: [(key: String, value: ConfigNode)]
    private var used: Set<String> = []
    let problems: ProblemList

    init(_ node: ConfigNode, path: String, problems: ProblemList) {
        self.path = path
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

    var keys: [String] { entries.map(\.key) }

    /// The raw node for `key`, marking it read.
    func node(_ key: String) -> ConfigNode? {
        used.insert(key)
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

    func mapping(_ key: String) -> MappingReader? {
        guard let n = node(key) else { return nil }
        return MappingReader(n, path: child(key), problems: problems)
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

/// Collects problems in order of discovery.
final class ProblemList {
    private(set) var items: [ConfigProblem] = []
    func add(_ path: String, _ line: Int?, _ message: String) {
        items.append(ConfigProblem(path: path, line: line, message: message))
    }
}
