import OAuthCallback

/// The `oauth.app_links:` section: the universal-link and App Link files (`AppLinks`).
///
/// ```yaml
/// oauth:
///   app_links:
///     apple:
///       app_ids: [ABCDE12345.com.example.app]      # <Team ID>.<bundle id>
///       paths: ["/users/auth/google_oauth2/callback"] # what the app claims (default: each provider's
///                                                    # app_callback and the callback path with *)
///     android:
///       - package: com.example.app
///         sha256_cert_fingerprints: ["14:6D:E9:…"]  # keytool -list -v, 32 bytes
/// ```
extension ConfigLoader {
    func readAppLinks(_ m: MappingReader) -> AppLinks? {
        var links = AppLinks()
        if let apple = m.mapping("apple") {
            let ids = apple.strings("app_ids") ?? []
            if apple.node("app_ids") == nil { apple.problems.add(apple.child("app_ids"), apple.line, "is required (<Team ID>.<bundle id>)") }
            for id in ids where !AppLinks.isAppID(id) {
                apple.problems.add(apple.child("app_ids"), apple.node("app_ids")?.line,
                                   "'\(id)' is not <Team ID>.<bundle id> (ten upper-case letters or digits, a dot, a reverse-DNS bundle id)")
            }
            // Empty until the providers are read: `defaultApplePaths` fills it in then.
            let paths = apple.strings("paths") ?? []
            for p in paths where !p.hasPrefix("/") && p != "*" {
                apple.problems.add(apple.child("paths"), apple.node("paths")?.line, "'\(p)' must start with / (or be *)")
            }
            apple.finish()
            if !ids.isEmpty && ids.allSatisfy(AppLinks.isAppID) { links.apple = AppLinks.Apple(appIDs: ids, paths: paths) }
        }
        if let node = m.node("android") {
            if case .sequence(let items, _) = node {
                for (i, item) in items.enumerated() {
                    let path = "\(m.child("android"))[\(i)]"
                    let entry = MappingReader(item, path: path, pattern: m.childPattern("android") + "[]", problems: m.problems)
                    let package = entry.string("package", required: true)
                    if let package, !AppLinks.isReverseDNS(package) {
                        entry.problems.add("\(path).package", entry.node("package")?.line, "'\(package)' is not an Android package name")
                    }
                    let prints = entry.strings("sha256_cert_fingerprints") ?? []
                    if prints.isEmpty {
                        entry.problems.add("\(path).sha256_cert_fingerprints", item.line,
                                           "is required (the signing certificate's SHA-256, as keytool -list -v prints it)")
                    }
                    for f in prints where !AppLinks.isFingerprint(f) {
                        entry.problems.add("\(path).sha256_cert_fingerprints", entry.node("sha256_cert_fingerprints")?.line,
                                           "'\(f)' is not 32 upper-case hex pairs joined by : (keytool -list -v prints it so)")
                    }
                    entry.finish()
                    if let package, AppLinks.isReverseDNS(package), !prints.isEmpty, prints.allSatisfy(AppLinks.isFingerprint) {
                        links.android.append(AppLinks.Android(package: package, fingerprints: prints))
                    }
                }
            } else {
                m.problems.add(m.child("android"), node.line, "must be a list of { package, sha256_cert_fingerprints }, not \(node.kindName)")
            }
        }
        m.finish()
        return links.apple == nil && links.android.isEmpty ? nil : links
    }

    /// `app_links.apple.paths` left out: the site's callbacks (`providers.<p>.app_callback`) and
    /// the callback path, so that a hand-back sign-in's universal link opens the app.
    func defaultApplePaths(_ o: inout OAuthSettings) {
        guard let apple = o.appLinks?.apple, apple.paths.isEmpty else { return }
        o.appLinks?.apple?.paths = AppLinks.defaultPaths(appCallbacks: o.providers.values.compactMap(\.appCallback),
                                                         callbackPath: o.callbackPath)
    }
}
