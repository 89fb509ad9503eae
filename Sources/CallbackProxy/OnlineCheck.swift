import OAuthCallback
import ProxyConfiguration
import ProxyCore
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// `check --online`: every provider probed at once (`ProviderProbe`) on a loop of its own, with
/// the trust the proxy would use, and the problems listed in provider order — then a Redis
/// store's commands tried once each (`StoreProbe`). `storeTLS`: a `rediss://` store's client.
enum OnlineCheck {
    static func problems(_ config: AppConfig, storeTLS: UpstreamTLSClient?) -> [ProviderProbe.Problem] {
        providerProblems(config) + storeProblems(config, tls: storeTLS)
    }

    static func storeProblems(_ config: AppConfig, tls: UpstreamTLSClient?) -> [ProviderProbe.Problem] {
        guard config.store.redis != nil else { return [] }
        let thread: EventLoopThread
        do { thread = try EventLoopThread() } catch {
            return [ProviderProbe.Problem(setting: "store", message: "cannot start a loop for the probe: \(error)")]
        }
        let store = OAuthWiring.store(config.store, tls: tls, log: Logger(level: .error), metrics: MetricsRegistry())
        defer {
            (store as? RedisStore)?.close()
            thread.stop()
            thread.join()
        }
        let result = Mutex<[ProviderProbe.Problem]?>(nil)
        thread.loop.execute { StoreProbe.run(store, on: thread.loop) { found in result.withLock { $0 = found } } }
        // Six commands, each under the store's own timeout (a second; WAIT up to store_wait_timeout).
        let deadline = EventLoop.monotonicNow() + 10_000_000_000
        while result.withLock({ $0 == nil }) && EventLoop.monotonicNow() < deadline { usleep(10_000) }
        return result.withLock { $0 } ?? [ProviderProbe.Problem(setting: "store", message: "no answer within 10 s")]
    }

    static func providerProblems(_ config: AppConfig) -> [ProviderProbe.Problem] {
        let providers = config.oauth.providers.values.sorted { $0.name < $1.name }
        guard !providers.isEmpty else { return [] }
        let thread: EventLoopThread
        do { thread = try EventLoopThread() } catch {
            return [ProviderProbe.Problem(setting: "providers", message: "cannot start a loop for the probes: \(error)")]
        }
        defer { thread.stop(); thread.join() }
        let probe = ProviderProbe(http: CurlClient(caFile: config.oauth.caFile), settings: config.oauth)
        let results = Mutex<[String: [ProviderProbe.Problem]]>([:])
        thread.loop.execute {
            for provider in providers {
                probe.probe(provider, on: thread.loop) { found in results.withLock { $0[provider.name] = found } }
            }
        }
        // Each probe is at most two fetches of `idp_timeout` each.
        let deadline = EventLoop.monotonicNow() + 2 * config.oauth.idpTimeout + 1_000_000_000
        while results.withLock({ $0.count }) < providers.count && EventLoop.monotonicNow() < deadline { usleep(10_000) }
        let done = results.withLock { $0 }
        return providers.flatMap { p in
            done[p.name] ?? [ProviderProbe.Problem(setting: "providers.\(p.name)", message: "no answer within 2 × oauth.idp_timeout")]
        }
    }
}
