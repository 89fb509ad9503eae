import OAuthCallback
import ProxyConfiguration
import ProxyCore

/// Builds the OAuth layer from the configuration: the outbound client, the store, one
/// provider per configured entry, the pipeline, and the phases the public listener runs.
struct OAuthWiring {
    let phases: any HTTPPhases
    /// Served on the internal listener: the relay token endpoint (relay mode).
    let relayEndpoint: RelayTokenEndpoint?
    let http: CurlClient?

    /// With no providers configured, the proxy is a plain reverse proxy.
    init(_ config: AppConfig, log: Logger) throws(ConfigProblems) {
        guard !config.oauth.providers.isEmpty else {
            phases = PassThrough()
            relayEndpoint = nil
            http = nil
            return
        }
        let http = CurlClient(caFile: config.oauth.caFile)
        let providers = try Self.providers(config, http: http)
        let store: any Store
        switch config.store {
        case .memory:
            store = MemoryStore()
        case .redis(let text):
            // The password never sits in the file: CALLBACK_PROXY_REDIS_PASSWORD (if set) is used.
            var url: RedisURL
            do {
                url = try RedisURL(parsing: text)
            } catch {
                throw ConfigProblems([ConfigProblem(path: "store", line: nil, message: "not a redis:// URL: \(error)")])
            }
            if let password = ConfigLoader.processEnvironment()["CALLBACK_PROXY_REDIS_PASSWORD"], !password.isEmpty {
                url.password = password
            }
            store = RedisStore(RedisStore.Configuration(url: url), logger: log)
        }
        let pipeline = CallbackPipeline(settings: config.oauth, store: store, providers: providers)
        let relayCodes = RelayCodes(store: store, ttlSeconds: config.oauth.relayCodeTTLSeconds)
        var session: SessionLayer? = nil
        if config.oauth.session != nil {
            do {
                // Server-side sessions follow the store unless the operator said otherwise: a
                // shared store is there for several instances, and sessions kept in it can be
                // ended at sign-out; the in-memory store would lose them at every restart.
                let serverSide = config.oauth.session?.serverSide ?? (config.store != .memory)
                session = try SessionLayer(oauth: config.oauth, store: store, identityProviders: providers,
                                           serverSide: serverSide, log: log, clock: ProviderFactory.systemClock)
            } catch {
                throw ConfigProblems([ConfigProblem(path: "oauth.session", line: nil, message: "cannot build the session cookie: \(error)")])
            }
        }
        phases = OAuthPhases(pipeline: pipeline, relayCodes: relayCodes, session: session, log: log)
        relayEndpoint = RelayTokenEndpoint(settings: config.oauth, relayCodes: relayCodes, providers: providers,
                                           http: http, log: log)
        self.http = http
    }

    /// One provider per configured entry; every problem is reported, not just the first.
    static func providers(_ config: AppConfig, http: any HTTPFetching) throws(ConfigProblems) -> [String: any IdentityProvider] {
        var out: [String: any IdentityProvider] = [:]
        var problems: [ConfigProblem] = []
        let options = ProviderOptions(config.oauth)
        for (name, settings) in config.oauth.providers.sorted(by: { $0.key < $1.key }) {
            do {
                out[name] = try ProviderFactory.make(settings, http: http, options: options)
            } catch {
                problems.append(ConfigProblem(path: "providers.\(name)", line: nil, message: error.problem))
            }
        }
        if !problems.isEmpty { throw ConfigProblems(problems) }
        return out
    }
}
