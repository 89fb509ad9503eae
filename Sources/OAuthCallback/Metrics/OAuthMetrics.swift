import ProxyCore

/// The sign-in side's metrics. Label values come from configuration only: a provider or
/// platform named in a request that is not configured is counted as `unknown`, so no
/// request can mint new series.
public final class OAuthMetrics: Sendable {
    private let callbacks: MetricFamily<Counter>
    private let idpLatency: MetricFamily<Histogram>
    private let minted: MetricFamily<Counter>
    private let redeemed: MetricFamily<Counter>
    private let expired: MetricFamily<Counter>
    private let sessionRefusals: MetricFamily<Counter>
    private let bearerTokens: MetricFamily<Counter>
    private let sessionRefreshes: MetricFamily<Counter>
    let storeErrors: Counter
    /// Configured provider → its configured native platforms.
    private let known: [String: Set<String>]
    /// `extra_jwt_issuers`' issuers: bearer token labels beside the providers.
    private let extraIssuers: Set<String>

    public init(registry: MetricsRegistry, settings: OAuthSettings, storeKind: String) {
        callbacks = registry.counter("callback_proxy_callbacks_total",
                                     "Requests to the callback contract, by provider, platform and outcome.",
                                     labels: ["provider", "platform", "outcome"])
        idpLatency = registry.histogram("callback_proxy_idp_request_seconds",
                                        "Calls to identity providers (token, JWKS, userinfo, …), whole call.",
                                        labels: ["provider", "call"])
        minted = registry.counter("callback_proxy_relay_codes_minted_total", "Relay codes minted.", labels: ["provider"])
        redeemed = registry.counter("callback_proxy_relay_codes_redeemed_total",
                                    "Relay codes redeemed at the relay token endpoint.", labels: ["provider"])
        expired = registry.counter("callback_proxy_relay_codes_expired_total",
                                   "Relay codes that reached their expiry unredeemed (is the app's token URL pointed at the proxy?).",
                                   labels: ["provider"])
        sessionRefusals = registry.counter("callback_proxy_session_refusals_total",
                                           "Signed-in users kept out by session mode's access rules, by provider and rule.",
                                           labels: ["provider", "rule"])
        bearerTokens = registry.counter("callback_proxy_bearer_tokens_total",
                                        "Session mode: requests that carried a bearer id_token, by provider and result.",
                                        labels: ["provider", "result"])
        sessionRefreshes = registry.counter("callback_proxy_session_refreshes_total",
                                            "Session mode: refreshes of server-side sessions at their provider (refresh_interval), by provider and outcome.",
                                            labels: ["provider", "outcome"])
        storeErrors = registry.counter("callback_proxy_store_errors_total", "Store operations that failed.",
                                       labels: ["store"]).labels(storeKind)
        known = settings.providers.mapValues { Set($0.native.keys) }
        extraIssuers = Set((settings.session?.extraJWTIssuers ?? []).map(\.issuer))
        // Every configured provider × platform × outcome starts at 0: a series that first
        // appears already at 1 hides its first increase from rate() and increase(), so an
        // alert on the first store outage of a deployment would never fire.
        for (provider, platforms) in known {
            for platform in platforms.sorted() {
                for outcome in Outcome.allCases { _ = callbacks.labels(provider, platform, outcome.rawValue) }
            }
        }
        // Likewise a relay provider's codes: an app whose token URL is wrong redeems none, and
        // "expired but none redeemed" can only be seen if the redeemed series exists at 0.
        for (name, provider) in settings.providers where provider.handoff == .relay {
            _ = minted.labels(name)
            _ = redeemed.labels(name)
            _ = expired.labels(name)
        }
        // And a session provider's refusals by rule, so the first refusal after a change of the
        // access rules is an increase.
        for (name, provider) in settings.providers where provider.handoff == .session {
            for rule in AccessRefusal.allCases { _ = sessionRefusals.labels(name, rule.rawValue) }
        }
        // Likewise every session provider × refresh outcome, when refresh is configured (without
        // it these series could only ever read 0).
        if settings.session?.refreshIntervalSeconds != nil {
            for (name, provider) in settings.providers where provider.handoff == .session {
                for outcome in RefreshOutcome.allCases { _ = sessionRefreshes.labels(name, outcome.rawValue) }
            }
        }
    }

    /// How a session refresh ended (`callback_proxy_session_refreshes_total`).
    public enum RefreshOutcome: String, Sendable, CaseIterable {
        /// New tokens and claims, still admitted by the access rules.
        case renewed
        /// The renewed claims no longer pass the access rules: the session ended.
        case refused
        /// `invalid_grant`: the IdP no longer honours the refresh token; the session ended.
        case ended
        /// Any other answer that does not re-check the user (bad id_token, another `sub`,
        /// `invalid_client`, a malformed answer): the session ended (fail closed).
        case failed
        /// The IdP could not answer: the session kept, tried again later.
        case idpUnavailable = "idp_unavailable"
    }

    public enum Outcome: String, Sendable, CaseIterable {
        case success, refused, denied, replay
        case idpError = "idp_error"
        case configError = "config_error"
        case storeUnavailable = "store_unavailable"
        case rateLimited = "rate_limited"
        /// Verified, but the access rules refuse the account (session mode).
        case forbidden
        case error
    }

    func callback(provider: String?, platform: String?, _ outcome: Outcome) {
        let p = provider.flatMap { known[$0] != nil ? $0 : nil }
        let platformLabel = p.flatMap { name in platform.flatMap { known[name]!.contains($0) ? $0 : nil } } ?? "unknown"
        callbacks.labels(p ?? "unknown", platformLabel, outcome.rawValue).increment()
    }

    /// How a failed callback is counted.
    static func outcome(_ failure: CallbackFailure, reportedByApp: Bool) -> Outcome {
        if reportedByApp { return .denied }
        switch failure.source {
        case .client: return failure.code == "replayed_code" ? .replay : .refused
        case .idp: return .idpError
        case .config: return .configError
        case .policy: return .forbidden
        case .internal: return failure.code == ReplayGuard.storeUnavailableCode ? .storeUnavailable : .error
        }
    }

    func idpCall(provider: String, _ call: OutboundCall) -> Histogram {
        idpLatency.labels(provider, call.rawValue)
    }

    func relayMinted(_ provider: String) { minted.labels(provider).increment() }
    func bearerToken(_ provider: String, result: String) {
        bearerTokens.labels(known[provider] != nil || extraIssuers.contains(provider) ? provider : "unknown", result).increment()
    }
    func sessionRefused(_ provider: String, rule: AccessRefusal) {
        sessionRefusals.labels(known[provider] != nil || extraIssuers.contains(provider) ? provider : "unknown", rule.rawValue).increment()
    }
    func sessionRefreshed(_ provider: String, _ outcome: RefreshOutcome) {
        sessionRefreshes.labels(known[provider] != nil ? provider : "unknown", outcome.rawValue).increment()
    }
    func relayRedeemed(_ provider: String) { redeemed.labels(provider).increment() }
    func relayExpired(_ provider: String) { expired.labels(provider).increment() }
}

/// A provider's outbound calls, timed per kind of call.
struct MeasuredFetcher: HTTPFetching {
    let inner: any HTTPFetching
    let provider: String
    let metrics: OAuthMetrics

    func fetch(_ request: OutboundRequest, on loop: EventLoop,
               _ completion: @escaping (Result<OutboundResponse, OutboundError>) -> Void) {
        let histogram = metrics.idpCall(provider: provider, request.call)
        let started = loop.nowNanoseconds
        inner.fetch(request, on: loop) { result in
            histogram.observe(nanos: loop.nowNanoseconds - started)
            completion(result)
        }
    }
}

/// Counts the store's failures; everything else passes straight through.
struct MeasuredStore: Store {
    let inner: any Store
    let errors: Counter

    private func counted<T>(_ completion: @escaping (Result<T, StoreError>) -> Void) -> (Result<T, StoreError>) -> Void {
        let errors = self.errors
        return { result in
            if case .failure = result { errors.increment() }
            completion(result)
        }
    }

    func setIfAbsent(key: String, value: [UInt8], ttlSeconds: Int64, on loop: EventLoop,
                     _ completion: @escaping (Result<Bool, StoreError>) -> Void) {
        inner.setIfAbsent(key: key, value: value, ttlSeconds: ttlSeconds, on: loop, counted(completion))
    }

    func setIfAbsentAcknowledged(key: String, value: [UInt8], ttlSeconds: Int64, on loop: EventLoop,
                                 _ completion: @escaping (Result<Bool, StoreError>) -> Void) {
        inner.setIfAbsentAcknowledged(key: key, value: value, ttlSeconds: ttlSeconds, on: loop, counted(completion))
    }

    func getAndDelete(key: String, on loop: EventLoop, _ completion: @escaping (Result<[UInt8]?, StoreError>) -> Void) {
        inner.getAndDelete(key: key, on: loop, counted(completion))
    }

    func get(key: String, on loop: EventLoop, _ completion: @escaping (Result<[UInt8]?, StoreError>) -> Void) {
        inner.get(key: key, on: loop, counted(completion))
    }

    func set(key: String, value: [UInt8], ttlSeconds: Int64, on loop: EventLoop,
             _ completion: @escaping (Result<Void, StoreError>) -> Void) {
        inner.set(key: key, value: value, ttlSeconds: ttlSeconds, on: loop, counted(completion))
    }

    func replace(key: String, value: [UInt8], ttlSeconds: Int64, ifHolding expected: [UInt8]?, on loop: EventLoop,
                 _ completion: @escaping (Result<Bool, StoreError>) -> Void) {
        inner.replace(key: key, value: value, ttlSeconds: ttlSeconds, ifHolding: expected, on: loop, counted(completion))
    }

    func delete(key: String, on loop: EventLoop, _ completion: @escaping (Result<Bool, StoreError>) -> Void) {
        inner.delete(key: key, on: loop, counted(completion))
    }
}

extension Store {
    /// This store with its failures counted in `metrics`.
    public func measured(by metrics: OAuthMetrics) -> any Store { MeasuredStore(inner: self, errors: metrics.storeErrors) }
}

extension HTTPFetching {
    /// This client with each call timed as `provider`'s.
    public func measured(provider: String, by metrics: OAuthMetrics) -> any HTTPFetching {
        MeasuredFetcher(inner: self, provider: provider, metrics: metrics)
    }
}
