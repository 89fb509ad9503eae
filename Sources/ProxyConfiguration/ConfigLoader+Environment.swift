/// Environment overrides: `CALLBACK_PROXY_<KEY>` sets a key of the file, nested keys joined by
/// `__` (`CALLBACK_PROXY_TIMEOUTS__UPSTREAM=20s` is `timeouts: { upstream: 20s }`). The value
/// replaces the file's before the file is read, so it is checked exactly like a value in the
/// file, and a problem with it names the variable. Flags are applied after loading and win
/// over both: flags > environment > file > defaults.
///
/// Only keys with a fixed path can be set this way (not those under a provider's name: each
/// provider's secrets already come from the environment through its `…_env` keys). List keys
/// take comma-separated values. An empty variable is treated as unset (container runtimes and
/// Compose files produce empty ones for variables nobody defined).
extension ConfigLoader {
    static let overridable: [String: ConfigKey] = {
        var out: [String: ConfigKey] = [:]
        for key in keys { if let v = key.environmentVariable { out[v] = key } }
        return out
    }()

    func applyEnvironment(to root: ConfigNode, problems: ProblemList) -> ConfigNode {
        var root = root
        if case .null(let line) = root { root = .mapping([], line: line) }
        for (name, text) in environment.sorted(by: { $0.key < $1.key }) {
            guard let key = Self.overridable[name], !text.isEmpty else { continue }
            let parts = key.path.split(separator: ".").map(String.init)
            // A key nested under something that is not a mapping in the file stays as it is:
            // the reader reports the file's mistake.
            guard let updated = Self.setting(Self.node(text, kind: key.kind), at: parts[...], in: root) else { continue }
            root = updated
            problems.fromEnvironment[key.path] = name
        }
        return root
    }

    /// After reading: a `CALLBACK_PROXY_…` variable that is neither a key, nor one of
    /// `otherVariables`, nor named by a `…_env` key is a mistake, like an unknown key.
    func reportUnknownVariables(_ problems: ProblemList) {
        let prefix = ConfigKey.environmentPrefix
        let others = Set(Self.otherVariables.map(\.name))
        for name in environment.keys.sorted() where name.hasPrefix(prefix) {
            if Self.overridable[name] != nil || others.contains(name) || problems.referencedVariables.contains(name) { continue }
            let rest = name.dropFirst(prefix.count).lowercased()
            var hint = ""
            if let near = Self.keys.first(where: { $0.environmentVariable != nil && $0.path.split(separator: ".").joined(separator: "_") == rest }) {
                hint = " (nested keys are joined with __: \(near.environmentVariable!))"
            }
            problems.add(variable: name, "unknown variable: not a configuration key nor a variable the proxy reads\(hint)")
        }
    }

    private static func node(_ text: String, kind: ConfigKey.Kind) -> ConfigNode {
        let items = kind == .list ? text.split(separator: ",", omittingEmptySubsequences: false).map { trimmed($0) } : [text]
        if items.count == 1 { return .scalar(items[0], line: 0, quoted: true) }
        return .sequence(items.map { .scalar($0, line: 0, quoted: true) }, line: 0)
    }

    private static func trimmed(_ s: Substring) -> String {
        var s = s
        while s.first == " " { s.removeFirst() }
        while s.last == " " { s.removeLast() }
        return String(s)
    }

    /// `node` with `value` at `path`, creating the mappings on the way; nil when something on the
    /// way is not a mapping.
    private static func setting(_ value: ConfigNode, at path: ArraySlice<String>, in node: ConfigNode) -> ConfigNode? {
        guard case .mapping(var entries, let line) = node, let key = path.first else { return nil }
        let index = entries.firstIndex { $0.key == key }
        var newValue = value
        if path.count > 1 {
            var inner = index.map { entries[$0].value } ?? .mapping([], line: 0)
            if case .null(let l) = inner { inner = .mapping([], line: l) }
            guard let v = setting(value, at: path.dropFirst(), in: inner) else { return nil }
            newValue = v
        }
        if let index { entries[index].value = newValue } else { entries.append((key: key, value: newValue)) }
        return .mapping(entries, line: line)
    }
}
