import ProxyCore

/// What `callback-proxy check --online` asks of each provider before the first user does: the
/// discovery document (OIDC) and the JWKS, fetched with the configured trust (`oauth.ca_file`).
/// Each problem names the setting to fix and says what was found, in words: the certificate
/// problem, the HTTP status, both issuers, the missing endpoint, the algorithm without a key.
/// Codes are never involved: nothing is redeemed, only public documents are read.
public struct ProviderProbe: Sendable {
    public struct Problem: Error, Sendable, Equatable, CustomStringConvertible {
        /// The key path of the setting to fix.
        public let setting: String
        public let message: String
        /// Worth saying, but not a fault: `check --online` prints it as a note and still passes.
        public let isNote: Bool
        public var description: String { "\(setting): \(message)" }
        public init(setting: String, message: String, isNote: Bool = false) {
            self.setting = setting
            self.message = message
            self.isNote = isNote
        }
    }

    private let http: any HTTPFetching
    private let settings: OAuthSettings

    public init(http: any HTTPFetching, settings: OAuthSettings) {
        self.http = http
        self.settings = settings
    }

    /// Probes `provider`; `done` runs once, on `loop`, with its problems (none: it is usable).
    public func probe(_ provider: ProviderSettings, on loop: EventLoop, _ done: @escaping @Sendable ([Problem]) -> Void) {
        let base = "providers.\(provider.name)"
        switch provider.kind {
        case .oidc:
            guard let url = OIDCProvider.discoveryURL(provider) else {
                return done([Problem(setting: base + ".endpoints.issuer", message: "is missing")])
            }
            fetch(url, .discovery, setting: base + ".endpoints.discovery", on: loop) { result in
                switch result {
                case .failure(let problem): done([problem])
                case .success(let body):
                    switch checkDiscovery(body, provider, url: url) {
                    case .failure(let problem): done([problem])
                    case .success(let jwksURL):
                        let notes = offlineAccessNote(body, provider).map { [$0] } ?? []
                        probeKeys(jwksURL, provider, on: loop) { done($0 + notes) }
                    }
                }
            }
        case .google:
            probeKeys(provider.endpoints.jwks ?? GoogleProvider.defaultJWKS, provider, on: loop, done)
        case .apple:
            probeKeys(provider.endpoints.jwks ?? AppleProvider.defaultJWKS, provider, on: loop, done)
        case .facebook:
            probeKeys(provider.endpoints.jwks ?? FacebookProvider.defaultJWKS, provider, on: loop, done)
        }
    }

    private func probeKeys(_ url: String, _ provider: ProviderSettings, on loop: EventLoop,
                           _ done: @escaping @Sendable ([Problem]) -> Void) {
        let setting = "providers.\(provider.name).endpoints.jwks"
        fetch(url, .jwks, setting: setting, on: loop) { result in
            switch result {
            case .failure(let problem): done([problem])
            case .success(let body): done(Self.checkKeys(body, provider, url: url, setting: setting))
            }
        }
    }

    /// The document at `url`, or the problem that stopped it (attributed to `setting`, except a
    /// certificate the trust refuses, which is `oauth.ca_file`'s).
    private func fetch(_ url: String, _ call: OutboundCall, setting: String, on loop: EventLoop,
                       _ done: @escaping @Sendable (Result<[UInt8], Problem>) -> Void) {
        let request = OutboundRequest(method: "GET", url: url, headers: [("Accept", "application/json")],
                                      timeout: settings.idpTimeout, idempotent: true, call: call)
        let caFile = settings.caFile
        http.fetch(request, on: loop) { result in
            let shown = ProviderText.withoutQuery(url)
            switch result {
            case .failure(let error) where error.kind == .certificate:
                let trust = caFile.map { "oauth.ca_file (\($0))" } ?? "the system CA store (no oauth.ca_file is set)"
                done(.failure(Problem(setting: "oauth.ca_file",
                                      message: "\(shown): the IdP's certificate does not verify against \(trust): \(error.detail)")))
            case .failure(let error):
                done(.failure(Problem(setting: setting, message: "\(shown): \(error.kind.rawValue): \(error.detail)")))
            case .success(let response) where !(200...299).contains(response.status):
                done(.failure(Problem(setting: setting, message: "\(shown): answered HTTP \(response.status)")))
            case .success(let response):
                done(.success(response.body))
            }
        }
    }

    /// The JWKS URL a discovery document names (or the configured one), or what is wrong with
    /// it — in the words a sign-in's log line would use (`OIDCProvider.Discovery.endpoints`).
    func checkDiscovery(_ body: [UInt8], _ provider: ProviderSettings, url: String) -> Result<String, Problem> {
        let base = "providers.\(provider.name)"
        guard let document = (try? JSONParser.parse(body))?.objectValue else {
            return .failure(Problem(setting: base + ".endpoints.discovery", message: "\(url): is not a JSON object"))
        }
        let found = OIDCProvider.Discovery.endpoints(
            of: document, issuer: provider.endpoints.issuer ?? "", tokenOverride: provider.endpoints.token,
            jwksOverride: provider.endpoints.jwks, context: "discovery \(ProviderText.withoutQuery(url))", label: provider.name)
        return found.map(\.jwks).mapError { Problem(setting: $0.setting ?? base, message: $0.logDetail) }
    }

    /// With `oauth.session.refresh_interval`, sign-in asks an OIDC provider for `offline_access`
    /// (`SessionLayer.offlineAccessParameters`). A discovery document whose `scopes_supported`
    /// lists other scopes and not that one says the IdP may refuse the sign-in (`invalid_scope`)
    /// or issue no refresh token (the session then lasts one interval). A note, not a problem:
    /// the list is optional and often partial, and many IdPs accept scopes they do not list.
    func offlineAccessNote(_ body: [UInt8], _ provider: ProviderSettings) -> Problem? {
        guard provider.kind == .oidc, provider.handoff == .session, settings.session?.refreshIntervalSeconds != nil,
              case .array(let listed)? = (try? JSONParser.parse(body))?.objectValue?["scopes_supported"] else { return nil }
        let scopes = listed.compactMap(\.stringValue)
        guard !scopes.isEmpty, !scopes.contains("offline_access") else { return nil }
        return Problem(setting: "oauth.session.refresh_interval",
                       message: "providers.\(provider.name): the discovery document's scopes_supported (\(scopes.joined(separator: " "))) "
                           + "does not list offline_access, which sign-in asks for so that sessions can be refreshed: "
                           + "if the IdP refuses it (invalid_scope) or issues no refresh token, turn refresh off or allow the scope there",
                       isNote: true)
    }

    /// A JWKS must hold a key for one of the algorithms the provider's id_tokens may use.
    static func checkKeys(_ body: [UInt8], _ provider: ProviderSettings, url: String, setting: String) -> [Problem] {
        let shown = ProviderText.withoutQuery(url)
        let set: JWKSet
        do {
            set = try JWKSet(json: body)
        } catch {
            return [Problem(setting: setting, message: "\(shown): \(error)")]
        }
        let algorithms = provider.allowedAlgorithms.compactMap(JWSAlgorithm.init(rawValue:))
        let wanted = algorithms.isEmpty ? JWSAlgorithm.allCases : algorithms
        guard set.keys.contains(where: { key in wanted.contains { key.canVerify($0) } }) else {
            let names = wanted.map(\.rawValue).joined(separator: ", ")
            return [Problem(setting: setting, message: "\(shown): no key can verify \(names) id_tokens")]
        }
        return []
    }
}
