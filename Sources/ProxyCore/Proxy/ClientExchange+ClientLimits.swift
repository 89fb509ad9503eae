/// `rate_limits:` on each request, before the phases see it (so the OAuth callback, the
/// session layer and the app are all behind it).
extension ClientExchange {
    /// False when the request was refused (the 429 is on its way).
    func admitUnderRateLimits(_ policy: ClientLimitPolicy) -> Bool {
        let view = RequestView(self)
        let client: ClientKey
        if listener.isTrusted(peer) {
            // Behind a trusted proxy the client is the one X-Forwarded-For names.
            let text = view.clientAddress
            if let address = PeerAddress(text: text) {
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
}
