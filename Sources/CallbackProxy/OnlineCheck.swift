import OAuthCallback
import ProxyConfiguration
import ProxyCore
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// `check --online`: every provider probed at once (`ProviderProbe`) on a loop of its own, with
/// the trust the proxy would use, and the problems listed in provider order.
enum OnlineCheck {
    static func problems(_ config: AppConfig) -> [ProviderProbe.Problem] {
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
