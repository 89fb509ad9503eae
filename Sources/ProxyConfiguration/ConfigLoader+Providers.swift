import OAuthCallback

/// The `providers:` section.
///
/// ```yaml
/// providers:
///   google:                          # the `provider=` value the wrapper app sends
///     kind: google                   # google | facebook | apple | oidc (default: the name, if it is a kind)
///     handoff: relay                 # relay | params | session | verify (default relay)
///     app_callback: /users/auth/google_oauth2/callback   # required for relay and params
///     app_client: { id: WEB_ID, secret_env: GOOGLE_WEB_SECRET }  # required for relay and session
///                                    # + client_auth: client_secret_post (default) | client_secret_basic:
///                                    #   how session mode's web sign-in authenticates at the token endpoint
///     native:
///       ios:     { client_id: 123-ios.apps.googleusercontent.com }   # redirect derived for Google iOS
///       android: { client_id: 123-and.apps.googleusercontent.com, redirect_uri: "com.example.app:/oauth2redirect" }
///     endpoints: { token: …, jwks: …, issuer: …, discovery: …, authorization: …, userinfo: …, graph: … }
///     algorithms: [RS256]
///     relay: { omit_id_token: false, omit_refresh_token: false }   # what the app gets at the relay endpoint
///     app_id: "1234"  +  app_secret_env | app_secret_file           # facebook
///     team_id: …  key_id: …  +  private_key_file | private_key_env  # apple
/// ```
extension ConfigLoader {
    static let platforms: Set<String> = ["ios", "android"]

    func readProviders(_ m: MappingReader, into o: inout OAuthSettings) {
        for name in m.keys {
            guard let node = m.node(name) else {
                m.problems.add(m.child(name), m.line, "must be a mapping")
                continue
            }
            if !isToken(name) {
                m.problems.add(m.child(name), node.line, "provider names are lowercase letters, digits, - and _")
            }
            let p = MappingReader(node, path: m.child(name), pattern: m.childPattern(name), problems: m.problems)
            // With an unknown kind the other keys cannot be judged: report only the kind.
            guard let settings = readProvider(name: name, p) else { continue }
            o.providers[name] = settings
            o.providerOrder.append(name)
            p.finish()
        }
        if o.providers.isEmpty && m.problems.items.isEmpty {
            m.problems.add(m.path, m.line, "no providers configured")
        }
    }

    private func readProvider(name: String, _ p: MappingReader) -> ProviderSettings? {
        let kindText = p.string("kind") ?? name
        guard let kind = ProviderKind(rawValue: kindText) else {
            p.problems.add(p.child("kind"), p.line, "'\(kindText)' is not google, facebook, apple or oidc")
            return nil
        }
        var s = ProviderSettings(name: name, kind: kind)
        if let h = p.parsed("handoff", "relay, params, session or verify", HandoffMode.init(rawValue:)) { s.handoff = h }
        if let d = p.string("display_name") {
            if d.isEmpty || d.count > 64 || d.unicodeScalars.contains(where: { $0.value < 0x20 }) {
                p.problems.add(p.child("display_name"), p.node("display_name")?.line, "must be 1–64 printable characters")
            } else {
                s.displayName = d
            }
        }
        if let cb = p.string("app_callback") {
            if isLocalPath(cb) { s.appCallback = cb } else {
                p.problems.add(p.child("app_callback"), p.node("app_callback")?.line, "must be a path starting with a single /, without a query")
            }
        } else if s.handoff == .relay || s.handoff == .params {
            p.problems.add(p.child("app_callback"), p.line, "is required for handoff \(s.handoff.rawValue)")
        }
        if let app = p.mapping("app_client") {
            let id = app.string("id", required: true)
            let secret = secret(app, "secret", required: true)
            if let id, let secret { s.appClient = ClientCredentials(clientID: id, clientSecret: secret) }
            if let auth = app.parsed("client_auth", "client_secret_post or client_secret_basic", ClientAuthMethod.init(rawValue:)) {
                s.appClient?.clientAuth = auth
            }
            app.finish()
        } else if s.handoff == .relay {
            p.problems.add(p.child("app_client"), p.line, "is required for handoff relay (it authenticates the app at the relay token endpoint)")
        }
        if let e = p.mapping("endpoints") {
            for key in ["issuer", "discovery", "authorization", "token", "jwks", "userinfo", "graph", "end_session"] {
                guard let url = e.string(key) else { continue }
                guard isAllowedURL(url) else {
                    e.problems.add(e.child(key), e.node(key)?.line, "must be an https:// URL (http:// only for loopback)")
                    continue
                }
                switch key {
                case "issuer": s.endpoints.issuer = url
                case "discovery": s.endpoints.discovery = url
                case "authorization": s.endpoints.authorization = url
                case "token": s.endpoints.token = url
                case "jwks": s.endpoints.jwks = url
                case "userinfo": s.endpoints.userinfo = url
                case "end_session": s.endpoints.endSession = url
                default: s.endpoints.graph = url
                }
            }
            e.finish()
        }
        if let relay = p.mapping("relay") {
            if let v = relay.bool("omit_id_token") { s.relayOmitIDToken = v }
            if let v = relay.bool("omit_refresh_token") { s.relayOmitRefreshToken = v }
            relay.finish()
        }
        if let algs = p.strings("algorithms") {
            for a in algs where a != "RS256" && a != "ES256" {
                p.problems.add(p.child("algorithms"), p.node("algorithms")?.line, "'\(a)' is not supported (RS256, ES256)")
            }
            s.allowedAlgorithms = algs
        }
        switch kind {
        case .facebook:
            let appID = p.string("app_id", required: true)
            if let appID, !appID.allSatisfy(\.isNumber) {
                p.problems.add(p.child("app_id"), p.node("app_id")?.line, "must be the numeric Facebook app id (quote it in YAML)")
            }
            let secret = secret(p, "app_secret", required: true)
            if let appID, let secret { s.facebook = FacebookSettings(appID: appID, appSecret: secret) }
        case .apple:
            let team = p.string("team_id", required: true)
            let key = p.string("key_id", required: true)
            let pem = secret(p, "private_key", required: true)
            if let pem, !pem.value.contains("-----BEGIN PRIVATE KEY-----") {
                p.problems.add(p.child("private_key_file"), p.line, "must be the .p8 PEM (-----BEGIN PRIVATE KEY-----)")
            } else if let team, let key, let pem {
                s.apple = AppleSettings(teamID: team, keyID: key, privateKeyPEM: pem)
            }
        case .oidc:
            // Only when neither key is written: one refused as a URL was reported already, and a
            // second message saying it is missing would contradict the file.
            let written = p.node("endpoints").flatMap { e -> Bool? in
                guard case .mapping(let pairs, _) = e else { return nil }
                return pairs.contains { $0.key == "issuer" || $0.key == "discovery" }
            } ?? false
            if s.endpoints.issuer == nil && s.endpoints.discovery == nil && !written {
                p.problems.add(p.child("endpoints.issuer"), p.line, "an oidc provider needs endpoints.issuer or endpoints.discovery")
            }
        case .google:
            break
        }
        if let native = p.mapping("native", keysAre: "<platform>") {
            for platform in native.keys {
                guard Self.platforms.contains(platform) else {
                    native.problems.add(native.child(platform), native.line, "unknown platform (ios, android)")
                    _ = native.node(platform)
                    continue
                }
                guard let c = native.mapping(platform) else { continue }
                if let client = readNativeClient(c, kind: kind, facebookAppID: s.facebook?.appID) {
                    // Facebook's native clients are the app itself: the exchange sends the app id.
                    if kind == .facebook, let appID = s.facebook?.appID, client.clientID != appID {
                        c.problems.add(c.child("client_id"), c.line, "must equal app_id for a facebook provider")
                    }
                    s.native[platform] = client
                }
                c.finish()
            }
            native.finish()
            if s.native.isEmpty && native.problems.items.isEmpty {
                native.problems.add(native.path, native.line, "at least one platform (ios, android) is required")
            }
        } else {
            p.problems.add(p.child("native"), p.line, "is required: the native clients per platform")
        }
        return s
    }

    private func readNativeClient(_ c: MappingReader, kind: ProviderKind, facebookAppID: String?) -> NativeClient? {
        guard let id = c.string("client_id", required: true) else { return nil }
        var redirect = c.string("redirect_uri")
        if redirect == nil {
            switch kind {
            case .google: redirect = NativeClient.googleIOSRedirect(for: id)
            case .facebook: redirect = facebookAppID.map { "fb\($0)://authorize" }
            default: break
            }
            if redirect == nil {
                c.problems.add(c.child("redirect_uri"), c.line, "is required (it cannot be derived for this client)")
                return nil
            }
        }
        var client = NativeClient(clientID: id, redirectURI: redirect!)
        client.clientSecret = secret(c, "client_secret", required: false)
        if let auth = c.parsed("client_auth", "client_secret_post or client_secret_basic", ClientAuthMethod.init(rawValue:)) {
            client.clientAuth = auth
        }
        if client.clientSecret != nil && kind != .oidc {
            c.problems.add(c.child("client_secret_env"), c.line, "native \(kind.rawValue) clients take no client secret")
        }
        if client.clientSecret == nil && c.node("client_auth") != nil {
            c.problems.add(c.child("client_auth"), c.node("client_auth")?.line,
                           "names how to send a client secret, but the client has none: add client_secret_env or client_secret_file")
        }
        return client
    }

    func isToken(_ s: String) -> Bool {
        !s.isEmpty && s.utf8.allSatisfy { ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2D || $0 == 0x5F }
    }

    private func isLocalPath(_ s: String) -> Bool {
        s.hasPrefix("/") && !s.hasPrefix("//") && !s.contains("?") && !s.contains("#") && !s.contains("\\")
            && s.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F }
    }

    func isAllowedURL(_ s: String) -> Bool {
        if s.hasPrefix("https://") && s.count > 8 { return true }
        for loopback in ["http://127.0.0.1", "http://localhost", "http://[::1]"] where s.hasPrefix(loopback) {
            let rest = s.dropFirst(loopback.count)
            return rest.isEmpty || rest.hasPrefix(":") || rest.hasPrefix("/")
        }
        return false
    }
}
