import ProxyCore

/// What became of one `/_oauth_callback` request.
public enum CallbackOutcome: Sendable {
    /// The code was redeemed and the identity verified; hand it off to the app.
    case verified(VerifiedIdentity, CallbackParameters)
    /// The sign-in failed. The parameters are there whenever the query parsed, so the hand-off
    /// layer can forward `error=<failure.code>&state=<state>` to the provider's app callback;
    /// nil means nothing in the URL can be trusted (show the proxy's own error page).
    case failed(CallbackFailure, CallbackParameters?)
}

/// The callback as a straight line of named guard steps (STYLE: oauth2-proxy's
/// `OAuthCallback`, minus its size):
///
///     parse → IdP error → pin client → replay guard → exchange + verify → outcome
///
/// Every step before the replay guard is pure and synchronous: whatever the URL says, nothing
/// is written to the store and no IdP is called until the request is known to be for a
/// configured client. The replay guard comes before the exchange so one code cannot reach
/// the IdP twice. Hand-off is the caller's step.
public final class CallbackPipeline: Sendable {
    public let settings: OAuthSettings
    private let pinning: ClientPinning
    private let replayGuard: ReplayGuard
    private let providers: [String: any IdentityProvider]

    /// - Parameter providers: the implementation for each configured provider, by its name.
    public init(settings: OAuthSettings, store: any Store, providers: [String: any IdentityProvider]) {
        self.settings = settings
        self.pinning = ClientPinning(settings: settings)
        self.replayGuard = ReplayGuard(store: store, windowSeconds: settings.replayWindowSeconds)
        self.providers = providers
    }

    /// Runs the pipeline for one request. Call on `loop` (the request's loop); `completion`
    /// runs on `loop` exactly once, never before `handle` returns.
    ///
    /// - Parameters:
    ///   - query: the raw query string, still encoded (the bytes after `?`).
    ///   - expectedNonce: the nonce the id_token must carry, when the caller knows one from
    ///     its own records (session mode's state cookie). Never taken from the URL.
    public func handle(query: String, expectedNonce: String? = nil, on loop: EventLoop,
                       _ completion: @escaping (CallbackOutcome) -> Void) {
        let parameters: CallbackParameters
        switch parse(query) {
        case .success(let parsed): parameters = parsed
        case .failure(let failure): return finish(.failed(failure, nil), on: loop, completion)
        }
        if let failure = providerReportedError(parameters) {
            return finish(.failed(failure, parameters), on: loop, completion)
        }
        let pinned: PinnedClient
        let provider: any IdentityProvider
        switch pinClient(parameters) {
        case .success(let found): (pinned, provider) = found
        case .failure(let failure): return finish(.failed(failure, parameters), on: loop, completion)
        }
        // `providerReportedError` let only code responses through.
        guard case .code(let code, let verifier) = parameters.response else { preconditionFailure("error response past its step") }

        replayGuard.admit(provider: parameters.provider, code: code, on: loop) { admitted in
            if case .failure(let failure) = admitted { return completion(.failed(failure, parameters)) }
            let request = ExchangeRequest(provider: pinned.provider, platform: pinned.platform, client: pinned.client,
                                          code: code, codeVerifier: verifier, expectedNonce: expectedNonce)
            provider.redeem(request, on: loop) { redeemed in
                switch redeemed {
                case .success(let identity): completion(.verified(identity, parameters))
                case .failure(let failure): completion(.failed(failure, parameters))
                }
            }
        }
    }

    // MARK: Steps

    /// Step 1: the URL is well-formed and within the contract.
    func parse(_ query: String) -> Result<CallbackParameters, CallbackFailure> {
        CallbackParameters.parse(query: query)
    }

    /// Step 2: the app says the sign-in failed (`error=`). An unknown provider is refused as
    /// such, so the hand-off layer only ever sees failures for providers it can route. The
    /// client is not pinned for a failure: nothing will be redeemed, and the failure goes to
    /// the provider's app callback whichever native client reported it.
    func providerReportedError(_ parameters: CallbackParameters) -> CallbackFailure? {
        guard let reported = parameters.providerError else { return nil }
        if case .failure(let unknown) = pinning.provider(named: parameters.provider) { return unknown }
        return reported.failure
    }

    /// Step 3: the configured client (exact `client_id`/`redirect_uri`, PKCE where required)
    /// and the implementation that will redeem the code.
    func pinClient(_ parameters: CallbackParameters) -> Result<(PinnedClient, any IdentityProvider), CallbackFailure> {
        let pinned: PinnedClient
        switch pinning.pin(parameters) {
        case .success(let found): pinned = found
        case .failure(let failure): return .failure(failure)
        }
        guard let provider = providers[parameters.provider] else {
            // Configured but not wired: our bug, found before a code is spent on it.
            return .failure(CallbackFailure(
                .internal, code: "server_error",
                userMessage: "Sign-in is not available right now.",
                logDetail: "provider `\(parameters.provider)` is configured but no implementation is registered"))
        }
        return .success((pinned, provider))
    }

    /// Answers decided before any asynchronous step still go through the loop's queue, so the
    /// caller sees one behaviour: completion later, on its loop.
    private func finish(_ outcome: CallbackOutcome, on loop: EventLoop, _ completion: @escaping (CallbackOutcome) -> Void) {
        // `handle` runs on `loop` and so does the completion: the closure only waits in the
        // loop's own queue, it never runs on another thread.
        nonisolated(unsafe) let completion = completion
        loop.execute { completion(outcome) }
    }
}
