import OAuthCallback
import ProxyConfiguration
import ProxyCore
import Synchronization

/// The `check --online` probe, kept running: each provider's discovery document and keys are
/// fetched at start-up, after every reload and every `oauth.provider_check_interval`, on a
/// thread of its own (never on a serving loop: a hanging IdP must not hold up a request).
///
/// What it finds is reported three ways: `callback_proxy_provider_up{provider}` (1 usable, 0
/// not; no series until the first probe answers), the `providers` field of `/readyz`'s body,
/// and an error line naming the setting to fix — when a provider turns unusable, then once per
/// round while it stays so, and an info line when it recovers. It never changes `/readyz`'s
/// status: a provider that cannot sign anyone in still leaves the site's plain traffic to
/// proxy, and taking the instance out of its load balancer would take the whole site down for
/// one IdP's outage (or for one provider's mistake in the configuration).
final class ProviderHealth: Sendable {
    private struct State {
        /// Bumped by every `watch`: a probe round or timer of an older round ends quietly.
        var round = 0
        /// The latest answer per provider of the current configuration: no entry until it came.
        var problems: [String: [ProviderProbe.Problem]] = [:]
    }

    private let thread: EventLoopThread?
    private let state = Mutex(State())
    private let up: MetricFamily<Gauge>
    private let log: Logger

    init(metrics: MetricsRegistry, log: Logger) {
        self.log = log
        up = metrics.gauge("callback_proxy_provider_up",
                           "1 when the provider's discovery document and keys were fetched and usable at the last probe, else 0.",
                           labels: ["provider"])
        do {
            thread = try EventLoopThread()
        } catch {
            thread = nil
            log.error("cannot start the provider probe thread; providers are checked only by `check --online`",
                      ["error": error.description])
        }
    }

    /// Probes the providers of `settings` now, and then every `providerCheckInterval`; replaces
    /// whatever was probed before (a reload's new providers, trust and endpoints).
    func watch(_ settings: OAuthSettings) {
        guard let loop = thread?.loop else { return }
        let providers = settings.providers.values.sorted { $0.name < $1.name }
        let names = Set(providers.map(\.name))
        let round: Int = state.withLock { s in
            s.round += 1
            s.problems = s.problems.filter { names.contains($0.key) }
            return s.round
        }
        up.retainSeries { names.contains($0[0]) }
        guard settings.providerCheckInterval > 0, !providers.isEmpty else {
            state.withLock { $0.problems = [:] }
            up.retainSeries { _ in false }
            return
        }
        // A client per round: the trust (`oauth.ca_file`) is the configuration's.
        let probe = ProviderProbe(http: CurlClient(caFile: settings.caFile), settings: settings)
        loop.execute { [self] in
            probeRound(providers, probe, round: round, interval: settings.providerCheckInterval, on: loop)
        }
    }

    private func probeRound(_ providers: [ProviderSettings], _ probe: ProviderProbe, round: Int, interval: UInt64,
                            on loop: EventLoop) {
        for provider in providers {
            probe.probe(provider, on: loop) { [self] found in record(provider.name, found, round: round) }
        }
        // A round replaced by a reload is not cancelled: its timer fires once more and stops.
        loop.scheduleTimer(after: interval) { [self] in
            guard state.withLock({ $0.round }) == round else { return }
            probeRound(providers, probe, round: round, interval: interval, on: loop)
        }
    }

    private func record(_ name: String, _ probed: [ProviderProbe.Problem], round: Int) {
        // Notes (`check --online` prints them) say nothing about whether a sign-in can complete.
        let found = probed.filter { !$0.isNote }
        // nil: a reload replaced this round; else whether the provider was down before.
        let wasDown: Bool? = state.withLock { s in
            guard s.round == round else { return nil }
            defer { s.problems[name] = found }
            return s.problems[name].map { !$0.isEmpty } ?? false
        }
        guard let wasDown else { return }
        up.labels(name).set(found.isEmpty ? 1 : 0)
        for problem in found {
            log.error("provider cannot complete a sign-in", [
                "provider": name, "setting": problem.setting, "problem": problem.message,
            ])
        }
        if found.isEmpty && wasDown {
            log.info("provider usable again", ["provider": name])
        }
    }

    /// For `/readyz`: each provider whose last probe failed, with its first problem.
    func unusable() -> [String: String] {
        state.withLock { s in
            s.problems.compactMapValues { $0.first?.description }
        }
    }
}
