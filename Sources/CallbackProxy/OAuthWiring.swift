import OAuthCallback
import ProxyConfiguration
import ProxyCore

/// Builds the OAuth layer from the configuration: the outbound client, the store, one
/// provider per configured entry, the pipeline, and the phases the public listener runs.
struct OAuthWiring {
    let phases: any HTTPPhases
    /// The keys that verify the session's `jwt_assertion` tokens, served on the internal listener.
    let assertionJWKS: [UInt8]?
    /// Served on the internal listener: the relay token endpoint (relay mode).
    let relayEndpoint: RelayTokenEndpoint?
    /// `POST /sessions/revoke` in session mode (nil without it).
    let revocationEndpoint: SessionRevocationEndpoint?
    let http: CurlClient?
    /// The shared state (nil: no providers), for readiness checks.
    let store: (any Store)?
    /// What `store` was built from: a reload with an equal spec keeps the store (the memory
    /// store's relay codes, replay guards and sessions live on; a Redis store keeps its
    /// connections). Any difference — another URL, password, TLS setting or `WAIT` — builds a new one.
    let storeSpec: StoreSpec?
    /// The same store when it is the in-memory one: its fill level is exported as gauges.
    let memoryStore: MemoryStore?
    /// The sentinels of a `redis+sentinel://` store: failovers and the master are exported.
    let sentinel: RedisSentinel?
    /// The raw store of a `redis+cluster://` store: its slot map is exported and probed by `/readyz`.
    let cluster: RedisStore?

    /// With no providers configured, the proxy is a plain reverse proxy. `storeTLS`: the
    /// `rediss://` store's TLS client, built (its files read) by `TLSWiring`.
    init(_ config: AppConfig, storeTLS: UpstreamTLSClient? = nil, log: Logger, metrics registry: MetricsRegistry,
         reusing previous: OAuthWiring? = nil) throws(ConfigProblems) {
        guard !config.oauth.providers.isEmpty else {
            phases = PassThrough()
            assertionJWKS = nil
            relayEndpoint = nil
            revocationEndpoint = nil
            http = nil
            store = nil
            storeSpec = nil
            memoryStore = nil
            sentinel = nil
            cluster = nil
            return
        }
        let http = previous?.http.flatMap { $0.caFile == config.oauth.caFile ? $0 : nil }
            ?? CurlClient(caFile: config.oauth.caFile)
        let metrics = OAuthMetrics(registry: registry, settings: config.oauth, storeKind: config.store.kind)
        let providers = try Self.providers(config, http: http, metrics: metrics)
        let kept = previous.flatMap { $0.storeSpec == config.store ? $0.store : nil }
        let rawStore = kept ?? Self.store(config.store, tls: storeTLS, log: log, metrics: registry)
        // A kept store is already measured (the same counters: the registry returns them).
        let store = kept ?? rawStore.measured(by: metrics)
        memoryStore = kept != nil ? previous!.memoryStore : rawStore as? MemoryStore
        sentinel = kept != nil ? previous!.sentinel : (rawStore as? RedisStore)?.sentinel
        cluster = kept != nil ? previous!.cluster : (rawStore as? RedisStore).flatMap { $0.cluster != nil ? $0 : nil }
        let pipeline = CallbackPipeline(settings: config.oauth, store: store, providers: providers)
        let relayCodes = RelayCodes(store: store, ttlSeconds: config.oauth.relayCodeTTLSeconds)
        var session: SessionLayer? = nil
        if let settings = config.oauth.session {
            var emailsFile: AllowedEmailsFile? = nil
            if let path = settings.access.emailsFile {
                do {
                    emailsFile = try AllowedEmailsFile(path: path, log: log, now: EventLoop.monotonicNow())
                } catch {
                    throw ConfigProblems([ConfigProblem(path: "oauth.session.allowed_emails_file", line: nil, message: "'\(path)' \(error.message)")])
                }
            }
            do {
                // Server-side sessions follow the store unless the operator said otherwise: a
                // shared store is there for several instances, and sessions kept in it can be
                // ended at sign-out; the in-memory store would lose them at every restart.
                let serverSide = config.oauth.session?.serverSide ?? (config.store.redis != nil)
                let options = ProviderOptions(config.oauth)
                let extra = settings.extraJWTIssuers.enumerated().map { i, issuer in
                    ExtraJWTIssuer(issuer, index: i, http: http.measured(provider: issuer.issuer, by: metrics), options: options)
                }
                session = try SessionLayer(oauth: config.oauth, store: store, identityProviders: providers,
                                           serverSide: serverSide, log: log, clock: ProviderFactory.systemClock,
                                           emailsFile: emailsFile, metrics: metrics, extraIssuers: extra)
            } catch {
                throw ConfigProblems([ConfigProblem(path: "oauth.session", line: nil, message: "cannot build the session cookie: \(error)")])
            }
        }
        phases = OAuthPhases(pipeline: pipeline, relayCodes: relayCodes, session: session, metrics: metrics, log: log)
        assertionJWKS = session?.assertionJWKS
        revocationEndpoint = session.map { SessionRevocationEndpoint(revocation: $0.revocation, log: log) }
        relayEndpoint = RelayTokenEndpoint(settings: config.oauth, relayCodes: relayCodes, providers: providers,
                                           http: http, metrics: metrics, log: log)
        self.http = http
        self.store = store
        storeSpec = config.store
    }

    /// The store `spec` describes, not yet measured. `tls`: the TLS topology's client context,
    /// built (its files read) by `TLSWiring`.
    static func store(_ spec: StoreSpec, tls: UpstreamTLSClient?, log: Logger, metrics registry: MetricsRegistry) -> any Store {
        switch spec {
        case .memory(let maxBytes):
            // Every entry costs at least `entryOverhead`: the bytes bound the count as well.
            let bytes = Int(maxBytes)
            return MemoryStore(limits: MemoryStore.Limits(maxEntries: bytes / MemoryStore.entryOverhead, maxBytes: bytes))
        case .redis(let redis):
            var configuration = RedisStore.Configuration(redis, tls: tls)
            if case .cluster = redis.topology { configuration.clusterCounters = StoreGauges.clusterCounters(registry) }
            return RedisStore(configuration, logger: log)
        }
    }

    /// One provider per configured entry; every problem is reported, not just the first.
    static func providers(_ config: AppConfig, http: any HTTPFetching,
                          metrics: OAuthMetrics? = nil) throws(ConfigProblems) -> [String: any IdentityProvider] {
        var out: [String: any IdentityProvider] = [:]
        var problems: [ConfigProblem] = []
        let options = ProviderOptions(config.oauth)
        for (name, settings) in config.oauth.providers.sorted(by: { $0.key < $1.key }) {
            do {
                out[name] = try ProviderFactory.make(settings, http: metrics.map { http.measured(provider: name, by: $0) } ?? http,
                                                     options: options)
            } catch {
                problems.append(ConfigProblem(path: "providers.\(name)", line: nil, message: error.problem))
            }
        }
        if !problems.isEmpty { throw ConfigProblems(problems) }
        return out
    }
}
