import ProxyCore

/// The OAuth layer as the engine sees it: one conformance of the phases API. Everything but
/// the callback path passes through untouched; the callback is answered by the pipeline,
/// asynchronously, without blocking the loop, and then handed off to the app.
public struct OAuthPhases: HTTPPhases {
    private let pipeline: CallbackPipeline
    private let relayCodes: RelayCodes
    private let session: SessionLayer?
    private let callbackPath: [UInt8]
    private let webCallbackPath = Array(SessionLayer.webCallbackPath.utf8)
    private let log: Logger
    private let metrics: OAuthMetrics
    /// `/_oauth` and below, never `/_oauthx`.
    private let oauthPrefix = try! PathPrefix.parse("/_oauth").get()
    /// `oauth.rate_limit`, on the native and the web callback (nil: no limit): the engine's
    /// per-client buckets (`RateBuckets`, as `rate_limits:` uses), answered with the sign-in
    /// page's own message and counted in the callback metrics.
    ///
    /// Why: every callback with a fresh code costs a store entry for the replay window and a
    /// call to the IdP, and the contract's other parameters are public. Without a limit one
    /// machine can fill the in-memory store (every sign-in then gets 503) or get the proxy's IP
    /// throttled by the IdP. A wrapper app's user needs one callback per sign-in. Off by
    /// default: behind a load balancer that is not in `trusted_proxies`, every client has the
    /// balancer's address, and a per-address limit would throttle every sign-in at once.
    private let limiter: RateBuckets?
    private let configFailures = ConfigFailureLog()
    /// `oauth.app_links`, serialized once; nil when none are configured (no cost per request).
    private let appLinks: AppLinkFiles?

    public init(pipeline: CallbackPipeline, relayCodes: RelayCodes, session: SessionLayer? = nil,
                metrics: OAuthMetrics, log: Logger) {
        self.metrics = metrics
        self.pipeline = pipeline
        self.relayCodes = relayCodes
        self.session = session
        self.callbackPath = Array(pipeline.settings.callbackPath.utf8)
        self.log = log
        limiter = pipeline.settings.rateLimit.map { RateBuckets(limit: $0) }
        appLinks = AppLinkFiles(pipeline.settings.appLinks)
    }

    /// The endpoints told apart once per request (`RequestContext.endpoint`).
    enum Endpoint: UInt8 {
        case none = 0
        /// `oauth.callback_path`: the wrapper app's native callback.
        case nativeCallback
        /// Session mode's own callback (`/_oauth/web_callback`).
        case webCallback
        /// Anything else under `/_oauth/`.
        case oauth

        init(_ context: RequestContext) { self = Endpoint(rawValue: context.endpoint) ?? .none }

        var isCallback: Bool { self == .nativeCallback || self == .webCallback }
    }

    public func context(for request: borrowing RequestView) -> RequestContext {
        if request.pathEquals(callbackPath) { return Self.nativeCallback }
        guard request.pathIsUnder(oauthPrefix) else { return .none }
        if session != nil, request.pathEquals(webCallbackPath) { return Self.webCallback }
        return Self.oauth
    }

    private static let nativeCallback = RequestContext(route: .callback, endpoint: Endpoint.nativeCallback.rawValue)
    private static let webCallback = RequestContext(route: .oauth, endpoint: Endpoint.webCallback.rawValue)
    private static let oauth = RequestContext(route: .oauth, endpoint: Endpoint.oauth.rawValue)

    /// Never any endpoint of ours from early data: a replayed 0-RTT callback must not reach the
    /// token exchange twice (the replay guard would refuse the code, but only after spending a
    /// request on it), and the web sign-in's endpoints set and spend state.
    public func acceptsEarlyData(_ request: borrowing RequestView) -> Bool {
        Endpoint(request.context) == .none
    }

    public func requestFilter(_ request: borrowing RequestView) -> RequestDecision {
        let endpoint = Endpoint(request.context)
        let isCallback = endpoint == .nativeCallback
        if let limiter, endpoint.isCallback,
           let refusal = rateLimited(request, by: limiter, nativeCallback: isCallback) { return refusal }
        guard isCallback else {
            if let appLinks, let answer = appLinks.response(request) { return answer }
            return session?.decision(request) ?? .continue
        }
        // GET only: a HEAD (a link preview, a prefetch) must not spend the user's single-use code.
        guard request.method == .get else {
            return .respond(CallbackPage.error(status: 405, message: "This address only accepts GET.",
                                               extraHeaders: [("Allow", "GET")]))
        }
        // Copied now: the view is only valid during this call.
        let query = request.query ?? ""
        let loop = request.eventLoop
        let cookies = SessionLayer.cookies(request.headers(named: "Cookie"))
        let handoff = Handoff(settings: pipeline.settings, relayCodes: relayCodes, session: session, cookies: cookies,
                              log: log, metrics: metrics, loop: loop, started: loop.nowNanoseconds,
                              requestID: request.requestID, configFailures: configFailures,
                              json: request.header("Accept").map(SessionLayer.acceptsJSON) ?? false)
        // Session mode: the sign-in must have been started in this browser (/_oauth/start's state
        // cookie) — refused before the code is spent — and the id_token must carry its nonce.
        var expectedNonce: String? = nil
        if let session, let name = SessionLayer.queryValue(query, "provider"),
           pipeline.settings.providers[name]?.handoff == .session {
            // The state itself is compared here too, not only after the exchange: a callback
            // carrying another browser's state (login CSRF) must not spend its code at the IdP.
            guard let state = SessionLayer.queryValue(query, "state"),
                  let record = session.stateRecord(cookies, state: state) else {
                metrics.callback(provider: name, platform: SessionLayer.queryValue(query, "platform"), .refused)
                log.info("callback failed", ["provider": name, "source": "client", "reason": "state_mismatch",
                                             "detail": "no state cookie for the callback's state: the sign-in was not started in this browser"])
                return .respond(CallbackPage.error(status: 400, message: SessionLayer.stateMismatch.userMessage))
            }
            expectedNonce = record.nonce
        }
        let pipeline = self.pipeline
        return .deferred { [expectedNonce] sink in
            pipeline.handle(query: query, expectedNonce: expectedNonce, on: loop) { outcome in handoff.complete(outcome, sink) }
        }
    }

    /// 429 once the client address has used up its callbacks; nil while it may go on.
    private func rateLimited(_ request: borrowing RequestView, by limiter: RateBuckets,
                             nativeCallback: Bool) -> RequestDecision? {
        let client = request.clientAddress
        let verdict = limiter.admit(ClientKey(text: client), now: request.eventLoop.nowNanoseconds)
        guard case .refused(let wait, let firstRefusal) = verdict else {
            return nil
        }
        let query = nativeCallback ? request.query ?? "" : ""
        let provider = SessionLayer.queryValue(query, "provider")
        metrics.callback(provider: provider, platform: SessionLayer.queryValue(query, "platform"), .rateLimited)
        if firstRefusal {
            // Once per burst: a flood must not become a flood of log lines.
            log.warn("callbacks rate limited", [
                "client": client, "limit": "\(limiter.limit.count)/\(limiter.limit.periodSeconds)s",
                "path": nativeCallback ? pipeline.settings.callbackPath : SessionLayer.webCallbackPath,
                "request_id": request.requestID,
            ])
        }
        return .respond(CallbackPage.error(status: 429,
                                           message: Messages.rateLimited,
                                           extraHeaders: [("Retry-After", "\(wait)")]))
    }

    public func upstreamRequestFilter(_ request: borrowing RequestView, _ edits: inout HeaderEdits) {
        session?.upstreamEdits(request, &edits)
    }

    /// Whatever answers a callback URL (our page or the app's relayed response) is not cached
    /// and sends no Referer onwards: the URL that led here carried a code.
    public func responseFilter(_ request: borrowing RequestView, status: Int, _ edits: inout HeaderEdits) {
        guard Endpoint(request.context).isCallback else { return }
        relayCodes.noteAppAnswer(requestID: request.requestID, status: status)
        edits.remove += ["Cache-Control", "Pragma", "Referrer-Policy"]
        edits.add += [("Cache-Control", "no-store"), ("Pragma", "no-cache"), ("Referrer-Policy", "no-referrer")]
    }
}

/// Turns a pipeline outcome into the answer for the WebView, per the provider's hand-off mode.
struct Handoff: Sendable {
    let settings: OAuthSettings
    let relayCodes: RelayCodes
    let session: SessionLayer?
    let cookies: [(name: String, value: String)]
    let log: Logger
    let metrics: OAuthMetrics
    let loop: EventLoop
    let started: UInt64
    let requestID: String
    let configFailures: ConfigFailureLog
    /// The client asked for JSON (`Accept`): the proxy's own failure answers come as JSON.
    let json: Bool

    func complete(_ outcome: CallbackOutcome, _ sink: ResponseSink) {
        switch outcome {
        case .verified(let identity, let parameters):
            guard let provider = settings.providers[parameters.provider] else {
                return fail(CallbackFailure(.internal, code: "server_error", userMessage: Messages.internalError,
                                            logDetail: "verified provider is not configured"), parameters, sink)
            }
            switch provider.handoff {
            case .relay:
                guard let appCallback = provider.appCallback else { return sink.respond(CallbackPage.verified(identity)) }
                relayCodes.mint(identity, provider: provider, on: loop) { result in
                    switch result {
                    case .success(let code):
                        metrics.relayMinted(provider.name)
                        logVerified(parameters, mode: "relay")
                        watchRedemption(code, provider: provider.name)
                        sink.proceed(UpstreamRewrite(target: HandoffTarget.relay(appCallback, code: code, state: parameters.state)))
                    case .failure(let failure):
                        fail(failure, parameters, sink)
                    }
                }
            case .params:
                guard let appCallback = provider.appCallback else { return sink.respond(CallbackPage.verified(identity)) }
                logVerified(parameters, mode: "params")
                sink.proceed(UpstreamRewrite(target: HandoffTarget.params(appCallback, tokens: identity.tokens, state: parameters.state)))
            case .verify:
                logVerified(parameters, mode: "verify")
                sink.respond(CallbackPage.verified(identity))
            case .session:
                guard let session else { return sink.respond(CallbackPage.verified(identity)) }
                session.signIn(identity, state: parameters.state, provider: parameters.provider, platform: parameters.platform,
                               cookies: cookies,
                               on: loop) { result in
                    switch result {
                    case .success(let response):
                        logVerified(parameters, mode: "session")
                        sink.respond(response)
                    case .failure(let failure):
                        fail(failure, parameters, sink)
                    }
                }
            }
        case .failed(let failure, let parameters):
            fail(failure, parameters, sink)
        }
    }

    /// A failed sign-in lands in the app's own failure path when there is one (see
    /// `appFailureTarget`); otherwise the proxy's own page answers.
    private func fail(_ failure: CallbackFailure, _ parameters: CallbackParameters?, _ sink: ResponseSink) {
        metrics.callback(provider: parameters?.provider, platform: parameters?.platform,
                         OAuthMetrics.outcome(failure, reportedByApp: parameters?.providerError != nil))
        let provider = parameters?.provider ?? ""
        if failure.source == .config {
            let setting = failure.setting ?? "configuration"
            if configFailures.isDue(provider: provider, setting: setting, now: loop.nowNanoseconds) {
                // The same message as every failed callback (one thing to search for); the level,
                // `source: config` and `setting` say who must act.
                log.error("callback failed", [
                    "provider": provider, "platform": parameters?.platform ?? "", "source": "config",
                    "setting": setting, "reason": failure.code, "detail": failure.logDetail,
                    "repeats": "logged once a minute per provider and setting", "request_id": requestID])
            }
        } else {
            let level: Logger.Level = failure.source == .client ? .info : .warn
            log.log(level, "callback failed", ["provider": provider, "platform": parameters?.platform ?? "",
                                               "source": failure.source.rawValue, "reason": failure.code,
                                               "detail": failure.logDetail, "duration_ms": elapsed(),
                                               "request_id": requestID])
        }
        if let target = Self.appFailureTarget(failure, parameters, settings: settings) {
            return sink.proceed(UpstreamRewrite(target: target))
        }
        if json {
            return sink.respond(SessionLayer.json(failure.status, ["error": .string(failure.code)]))
        }
        sink.respond(CallbackPage.error(status: failure.status, message: failure.userMessage))
    }

    /// relay/params: `<app_callback>?error=<code>&state=<state>`, so the app runs its own failure
    /// flow and the WebView (which has no address bar to leave a dead-end page by) lands on the
    /// app's page — for an `error=` from the wrapper, a refusal by the IdP, and a replayed code.
    /// A replay has passed the contract and the client pinning: it is the genuine wrapper's URL
    /// loaded again (a reload, a restored WebView), and forwarding it gives nobody anything a
    /// made-up code would not (that one reaches the app as `exchange_failed`); the app's state
    /// check then answers it (OmniAuth: `csrf_detected`, the state was used up) and a user already
    /// signed in stays signed in. The store lost mid-callback (Redis down before the replay
    /// guard answered, or after the exchange, when the relay code is written) goes there too, as
    /// OAuth's `temporarily_unavailable`: the state is known, and the app tells its user to try
    /// again in its own words instead of the WebView stopping on a proxy page. nil — the proxy's
    /// own page — for a request that broke the contract (bad or foreign parameters: forwarding
    /// those would let anyone drive the app's callback) and for any other fault of ours.
    static func appFailureTarget(_ failure: CallbackFailure, _ parameters: CallbackParameters?,
                                 settings: OAuthSettings) -> String? {
        guard let parameters, let provider = settings.providers[parameters.provider],
              provider.handoff == .relay || provider.handoff == .params,
              let appCallback = provider.appCallback else { return nil }
        let replayed = failure.source == .client && failure.code == ReplayGuard.replayedCode
        let providerSide = failure.source == .idp || failure.source == .config
        let storeLost = failure.source == .internal && failure.code == ReplayGuard.storeUnavailableCode
        guard parameters.providerError != nil || providerSide || replayed || storeLost else { return nil }
        return HandoffTarget.failure(appCallback, error: storeLost ? "temporarily_unavailable" : failure.code,
                                     state: parameters.state)
    }

    private func logVerified(_ parameters: CallbackParameters, mode: String) {
        metrics.callback(provider: parameters.provider, platform: parameters.platform, .success)
        log.info("callback verified", ["provider": parameters.provider, "platform": parameters.platform,
                                       "handoff": mode, "duration_ms": elapsed(), "request_id": requestID])
    }

    /// A relay code still unredeemed near its expiry: say why where the operator will look.
    /// Two causes look alike from the WebView and are told apart here: the app never asks the
    /// relay endpoint at all (its token URL still points at the IdP), or it asks (for other
    /// codes) but refused this callback before redeeming — its own state check: login CSRF, a
    /// WebView that lost its session cookie. The line carries the callback's request id and the
    /// status the app answered it with, to find it in the app's log.
    private func watchRedemption(_ code: String, provider: String) {
        let ttl = Self.redemptionCheckDelay(ttlSeconds: settings.relayCodeTTLSeconds)
        let relayCodes = self.relayCodes
        let log = self.log
        let metrics = self.metrics
        let requestID = self.requestID
        let requestsBefore = relayCodes.tokenRequests
        relayCodes.watch(requestID: requestID)
        loop.scheduleTimer(after: ttl) {
            let appStatus = relayCodes.endWatch(requestID: requestID)
            relayCodes.isPending(code, on: loop) { pending in
                guard pending else { return }
                metrics.relayExpired(provider)
                let message = relayCodes.tokenRequests == requestsBefore
                    ? "relay code was never redeemed, and no token request reached this instance's relay endpoint "
                        + "since: is the app's token URL pointed at the proxy's relay endpoint (oauth.relay_token_path "
                        + "on internal_listen)?"
                    : "relay code was never redeemed, though the app called the relay endpoint with other codes: "
                        + "the app most likely refused this callback before redeeming it (its state check: login CSRF, "
                        + "a WebView that lost its session cookie); look for request_id in the app's log"
                // app_status: how the app answered the forwarded callback ("none": no answer seen).
                log.warn(message, ["provider": provider, "request_id": requestID,
                                   "app_status": appStatus.map { String($0) } ?? "none"])
            }
        }
    }

    /// When to look whether a relay code was redeemed (nanoseconds after minting): before it
    /// expires — the store forgets it then, and an expired code looks like a redeemed one — by a
    /// quarter of its lifetime, at most one second (1 s TTL: 750 ms; 60 s: 59 s). An app that
    /// redeems in that last stretch is counted as never redeeming, a false alarm far rarer than
    /// the silence it replaces.
    static func redemptionCheckDelay(ttlSeconds: Int64) -> UInt64 {
        let ttl = UInt64(max(1, ttlSeconds)) * 1_000_000_000
        return ttl - min(1_000_000_000, ttl / 4)
    }

    private func elapsed() -> String {
        String(Double((loop.nowNanoseconds - started) / 1000) / 1000)
    }
}
