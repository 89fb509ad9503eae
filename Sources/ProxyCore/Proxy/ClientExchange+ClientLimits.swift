/// `client_access:` and `rate_limits:` on each request, in that order, before the phases see
/// it (so the OAuth callback, the session layer and the app are all behind them; a refused
/// address spends no rate token).
extension ClientExchange {
    /// False when the request was refused (the 429 is on its way).
    func admitUnderRateLimits(_ policy: ClientLimitPolicy) -> Bool {
        let view = RequestView(self)
        let client: ClientKey
        if listener.isTrusted(peer) {
            // Behind a trusted proxy the client is the one X-Forwarded-For names.
            let (address, text) = forwardedClient(view)
            if let address {
                if policy.isExempt(address) { return true }
                client = ClientKey(address)
            } else {
                client = ClientKey(text: text)
            }
        } else {
            if peer.isUnix || policy.isExempt(peer) { return true }
            client = ClientKey(peer)
        }
        switch view.withPathReadings({ policy.admit(client: client, readings: $0, now: loop.now) }) {
        case .allowed:
            return true
        case .untracked(let rule):
            logProblem(.warn, "request not rate limited: the rule tracks as many clients as it can", key: "untracked \(rule.settings.name)", [
                ("rule", rule.settings.name), ("client", view.clientAddress), ("clients", String(rule.settings.clients)),
                ("setting", "rate_limits (\(rule.settings.name)).clients"),
            ])
            return true
        case .wouldRefuse(let rule):
            logProblem(.warn, "request rate limit reached (dry run: allowed)", key: "dry run \(rule.settings.name)", [
                ("rule", rule.settings.name), ("client", view.clientAddress),
                ("setting", "rate_limits (\(rule.settings.name)); dry_run"),
            ])
            return true
        case .refused(let rule, let wait):
            respondError(.rateLimited(rule.reason, retryAfterSeconds: wait))
            return false
        }
    }

    /// The client behind a trusted peer: the right-most untrusted `X-Forwarded-For` entry, as
    /// an address if it is one (`RequestView.clientAddress`).
    func forwardedClient(_ view: RequestView) -> (address: PeerAddress?, text: String) {
        let text = view.clientAddress
        return (PeerAddress(text: text), text)
    }

    /// The client's address as the per-client rules see it (`client_access`, `maintenance`):
    /// the forwarded client behind a trusted peer, else the peer; nil when it has none (an
    /// untrusted unix-socket peer, a forwarded entry that is no address).
    func rulesClientAddress(_ view: RequestView) -> PeerAddress? {
        if listener.isTrusted(peer) { return forwardedClient(view).address }
        return peer.isUnix ? nil : peer
    }

    /// `client_access` on this request, before the rate limits and the phases: false when a
    /// rule refused the client's address (the 403 is on its way).
    func admitByAddress(_ policy: ClientAccessPolicy) -> Bool {
        let view = RequestView(self)
        let client = rulesClientAddress(view)
        guard let i = view.withPathReadings({ policy.refusing(client, readings: $0) }) else { return true }
        let rule = policy.rules[i]
        policy.refusals[i].increment()
        logProblem(.info, "request refused by client_access", key: "client_access \(rule.name)", [
            ("rule", rule.name), ("client", client.map { $0.text } ?? view.clientAddress),
            ("setting", "client_access (\(rule.name))"),
        ])
        respondError(.addressRefused(rule: rule.name))
        return false
    }
}
