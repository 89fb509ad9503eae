import Testing
@testable import OAuthCallback
@testable import ProxyCore

/// An alert can compare only series that exist: "codes expire and none is redeemed" needs the
/// redeemed series at 0 before the first redemption, or it can never fire.
@Suite struct OAuthMetricsTests {
    private func rendered(_ modes: [String: HandoffMode]) -> String {
        var settings = OAuthSettings()
        for (name, mode) in modes {
            var provider = ProviderSettings(name: name, kind: .oidc)
            provider.handoff = mode
            settings.providers[name] = provider
        }
        let registry = MetricsRegistry()
        _ = OAuthMetrics(registry: registry, settings: settings, storeKind: "memory")
        return registry.render()
    }

    @Test func relayProvidersExportTheirCodeCountersAtZeroFromTheStart() {
        let text = rendered(["app": .relay, "corp": .session])
        for family in ["minted", "redeemed", "expired"] {
            #expect(text.contains("callback_proxy_relay_codes_\(family)_total{provider=\"app\"} 0\n"))
            #expect(!text.contains("callback_proxy_relay_codes_\(family)_total{provider=\"corp\"}"))
        }
    }

    @Test func sessionProvidersExportEveryRefusalRuleAtZeroFromTheStart() {
        let text = rendered(["app": .relay, "corp": .session])
        for rule in AccessRefusal.allCases {
            #expect(text.contains("callback_proxy_session_refusals_total{provider=\"corp\",rule=\"\(rule.rawValue)\"} 0\n"))
        }
        #expect(!text.contains("callback_proxy_session_refusals_total{provider=\"app\""))
    }
}
