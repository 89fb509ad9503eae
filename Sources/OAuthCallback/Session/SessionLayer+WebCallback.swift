import ProxyCore

/// `/_oauth/web_callback`: a plain browser's way back from the provider after `/_oauth/start`.
///
///     parse → state cookie (login CSRF) → provider's error → replay guard → exchange + verify → session
///
/// The exchange is the native path's (`IdentityProvider.redeem`) with another client: the
/// site's confidential web client (its secret, `client_secret_post` or basic), the redirect URI
/// and PKCE verifier remembered in the sealed state cookie, and the id_token's `aud` = the web
/// client id and `nonce` = the cookie's. The state cookie is the one named after the callback's
/// `state` (`SessionLayer+StateCookies.swift`), and single use: every answer to a callback that
/// matched it clears it, and only it. One that did not match clears nothing — a forged callback
/// must not be able to cancel a sign-in this browser really has in flight.
extension SessionLayer {
    /// Longest accepted `code` and `state` (bytes); Google's codes are ~100, our states 43.
    static let maximumCodeLength = 2048
    static let maximumStateLength = 512

    func webCallback(query: String, host: String, cookies: [(name: String, value: String)], on loop: EventLoop,
                     _ completion: @escaping (Response) -> Void) {
        let started = loop.nowNanoseconds
        // `toErrorURL`: the sign-in itself failed (the provider refused or said error=), as
        // opposed to a refused request or a fault of ours.
        // `matched`: the record of the state cookie this callback's state names, whose cookie
        // every answer then clears.
        let fail = { [self] (failure: CallbackFailure, matched: StateRecord?, toErrorURL: Bool) in
            // A `config` failure fails every web sign-in alike until the setting is fixed: its
            // line (at error, naming the setting) is written once a minute per provider and
            // setting, as the native callback's is; the count is in the metrics.
            let level: Logger.Level = failure.source == .client ? .info : failure.source == .config ? .error : .warn
            let quiet = failure.source == .config
                && !configFailures.isDue(provider: matched?.provider ?? "", setting: failure.setting ?? "", now: loop.nowNanoseconds)
            if !quiet { log.log(level, "web callback failed", [
                "provider": matched?.provider ?? "", "source": failure.source.rawValue, "reason": failure.code,
                "setting": failure.setting ?? "", "detail": failure.logDetail,
                "duration_ms": Self.milliseconds(since: started, loop)]) }
            completion(failurePage(failure, clearState: matched.map { stateCookieName(for: $0.state) },
                                   toErrorURL: toErrorURL || failure.source == .idp || failure.source == .config))
        }
        let parsed: WebCallbackQuery
        switch WebCallbackQuery.parse(query) {
        case .failure(let failure): return fail(failure, nil, false)
        case .success(let q): parsed = q
        }
        let matched = parsed.state.flatMap { stateRecord(cookies, state: $0) }
        if case .error(let error, _) = parsed {
            return fail(CallbackFailure(.client, code: error, userMessage: "The sign-in was cancelled or refused.",
                                        logDetail: "the provider answered error=\(error)"), matched, true)
        }
        guard case .code(let code, _) = parsed, let record = matched else {
            return fail(Self.stateMismatch, nil, false)
        }
        guard let provider = providers[record.provider], let client = provider.appClient,
              let implementation = identityProviders[record.provider] else {
            return fail(CallbackFailure(.internal, code: "server_error", userMessage: Messages.internalError,
                                        logDetail: "provider `\(record.provider)` of the state cookie is not configured for session"),
                        record, false)
        }
        let request = ExchangeRequest(
            provider: provider, platform: "web",
            client: NativeClient(clientID: client.clientID, redirectURI: record.redirectURI,
                                 clientSecret: client.clientSecret, clientAuth: client.clientAuth),
            code: code, codeVerifier: record.verifier, expectedNonce: record.nonce)
        replayGuard.admit(provider: record.provider, code: code, on: loop) { [self] admitted in
            if case .failure(let failure) = admitted { return fail(failure, record, false) }
            implementation.redeem(request, on: loop) { [self] redeemed in
                let identity: VerifiedIdentity
                switch redeemed {
                case .failure(let failure): return fail(failure, record, false)
                case .success(let verified): identity = verified
                }
                establish(identity, record: record, platform: "web", cookies: cookies, on: loop) { [self] result in
                    switch result {
                    case .failure(let failure): fail(failure, record, false)
                    case .success(var response):
                        log.info("web callback verified", ["provider": record.provider, "handoff": "session",
                                                           "duration_ms": Self.milliseconds(since: started, loop)])
                        response.headers += [("Cache-Control", "no-store"), ("Referrer-Policy", "no-referrer")]
                        completion(response)
                    }
                }
            }
        }
    }

    /// A failed web sign-in: the configured `error_url` (with `error=<code>`) for failures of
    /// the sign-in itself, the proxy's own short page for refused requests and for our own faults.
    /// - Parameter clearState: the name of the state cookie the callback matched, if any.
    func failurePage(_ failure: CallbackFailure, clearState: String?, toErrorURL: Bool) -> Response {
        let clear = clearState.map { [("Set-Cookie", clearStateCookie(named: $0))] } ?? []
        if let errorURL = settings.errorURL, toErrorURL {
            let location = errorURL + (errorURL.contains("?") ? "&" : "?") + FormEncoding.encode([("error", failure.code)])
            return Response(status: 302, headers: [("Location", location), ("Cache-Control", "no-store"),
                                                  ("Referrer-Policy", "no-referrer")] + clear)
        }
        return CallbackPage.error(status: failure.status, message: failure.userMessage, extraHeaders: clear)
    }

    static func milliseconds(since started: UInt64, _ loop: EventLoop) -> String {
        String(Double((loop.nowNanoseconds - started) / 1000) / 1000)
    }
}

/// What `/_oauth/web_callback` carries: a code and its state, or the provider's error. Other
/// parameters providers add (`scope`, `authuser`, `prompt`, `hd`, `iss`, `session_state`,
/// `error_description`, …) are ignored; `code`, `state` and `error` may appear once each.
enum WebCallbackQuery: Equatable {
    case code(String, state: String)
    case error(String, state: String?)

    var state: String? {
        switch self {
        case .code(_, let state): return state
        case .error(_, let state): return state
        }
    }

    static func parse(_ query: String) -> Result<WebCallbackQuery, CallbackFailure> {
        func invalid(_ detail: String) -> Result<WebCallbackQuery, CallbackFailure> {
            .failure(CallbackFailure(.client, code: "invalid_request",
                                     userMessage: "This sign-in link is not valid. Please start signing in again.",
                                     logDetail: "web callback: \(detail)"))
        }
        let fields: [QueryDecoding.Field]
        switch QueryDecoding.decode(query) {
        case .failure(let failure): return invalid("query is malformed (\(failure.problem.reason))")
        case .success(let f): fields = f
        }
        var found: [String: String] = [:]
        for field in fields where ["code", "state", "error"].contains(field.name) {
            guard found.updateValue(field.value, forKey: field.name) == nil else { return invalid("\(field.name) appears twice") }
        }
        if let error = found["error"] {
            guard found["code"] == nil else { return invalid("both code and error") }
            // Echoed into a redirect and a log line: a token or nothing of what was sent.
            let safe = !error.isEmpty && error.utf8.count <= 64
                && error.utf8.allSatisfy { ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x5F || $0 == 0x2D || $0 == 0x2E }
            return .success(.error(safe ? error : "provider_error", state: found["state"]))
        }
        guard let code = found["code"], let state = found["state"] else { return invalid("code or state missing") }
        guard isPrintable(code, limit: SessionLayer.maximumCodeLength) else { return invalid("code is empty, too long or not printable ASCII") }
        guard isPrintable(state, limit: SessionLayer.maximumStateLength) else { return invalid("state is empty, too long or not printable ASCII") }
        return .success(.code(code, state: state))
    }

    private static func isPrintable(_ s: String, limit: Int) -> Bool {
        !s.isEmpty && s.utf8.count <= limit && s.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F }
    }
}
