import ProxyCore

/// `x_accel_redirect:`.
extension ConfigLoader {
    /// `x_accel_redirect: [{ location, root }]`: each location a canonical path prefix other
    /// than `/`, found once; each root a directory now (and on every reload) that
    /// X-Accel-Mapping can name.
    func readAccelRedirect(_ node: ConfigNode, _ m: MappingReader, into s: inout AccelRedirectSettings) {
        guard case .sequence(let items, _) = node else {
            m.problems.add("x_accel_redirect", node.line, "must be a list of { location, root }, not \(node.kindName)")
            return
        }
        for (i, item) in items.enumerated() {
            let path = "x_accel_redirect[\(i)]"
            let entry = MappingReader(item, path: path, pattern: "x_accel_redirect[]", problems: m.problems)
            let prefix = entry.pathPrefix("location", required: true)
            if let prefix, let problem = AccelRedirectSettings.problem(location: prefix) {
                entry.problems.add("\(path).location", entry.node("location")?.line, problem)
            } else if let prefix, s.locations.contains(where: { $0.prefix == prefix }) {
                entry.problems.add("\(path).location", entry.node("location")?.line, "'\(prefix)' is listed twice")
            }
            let root = entry.string("root", required: true)
            if let root, let problem = AccelRedirectSettings.problem(root: root) {
                entry.problems.add("\(path).root", entry.node("root")?.line, problem)
            }
            entry.finish()
            if let prefix, let root { s.locations.append(.init(prefix: prefix, root: root)) }
        }
    }
}
