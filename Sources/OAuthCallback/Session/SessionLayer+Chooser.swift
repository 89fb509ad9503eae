import ProxyCore

/// `/_oauth/start` with more than one session provider and no `provider=`: a page with one
/// link per provider — names and order from the configuration — each back to `/_oauth/start`
/// with its `provider=` and the same `rd`. Before, the first provider by name was used, and
/// an unchanged site had no way to offer the second.
extension SessionLayer {
    func chooser(query: String) -> Response {
        let rd = Self.queryValue(query, "rd")
        let choices = providerOrder.compactMap { name -> (label: String, href: String)? in
            guard let p = providers[name] else { return nil }
            var fields = [("provider", name)]
            if let rd { fields.append(("rd", rd)) }
            return (label: "Sign in with " + Self.displayName(p), href: Self.startPath + "?" + FormEncoding.encode(fields))
        }
        return CallbackPage.chooser(choices)
    }

    /// `display_name`, else the kind's brand (`Google`, `Apple`, `Facebook`), else the name.
    static func displayName(_ p: ProviderSettings) -> String {
        if let d = p.displayName { return d }
        switch p.kind {
        case .google: return "Google"
        case .apple: return "Apple"
        case .facebook: return "Facebook"
        case .oidc: return p.name.prefix(1).uppercased() + p.name.dropFirst()
        }
    }
}
