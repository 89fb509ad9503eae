/// `callback_proxy_client_limit_refusals_total{rule, mode}`: requests (`rule` = the rate rule's
/// name) and connections (`rule="max_connections_per_client"`) the per-client limits refused
/// (`mode="enforced"`) or would have refused (`mode="dry_run"`);
/// `callback_proxy_client_limit_untracked_total{rule}`: clients let through uncounted because
/// their table window was full (a table too small for the traffic, or a flood of addresses).
struct ClientLimitMetrics: Sendable {
    struct Rule: Sendable {
        let refused: Counter
        let wouldRefuse: Counter
        let untracked: Counter
    }

    private let refusals: MetricFamily<Counter>
    private let untracked: MetricFamily<Counter>

    init(registry: MetricsRegistry) {
        refusals = registry.counter("callback_proxy_client_limit_refusals_total",
                                    "Requests and connections refused by the per-client limits, by rule; mode=dry_run: would have been.",
                                    labels: ["rule", "mode"])
        untracked = registry.counter("callback_proxy_client_limit_untracked_total",
                                     "Clients let through uncounted by a per-client limit whose table had no room, by rule.",
                                     labels: ["rule"])
    }

    func rule(_ name: String) -> Rule {
        Rule(refused: refusals.labels(name, "enforced"), wouldRefuse: refusals.labels(name, "dry_run"),
             untracked: untracked.labels(name))
    }
}
