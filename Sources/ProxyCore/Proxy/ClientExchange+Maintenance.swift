/// `maintenance:` on each request, after `client_access` and before the rate limits and the
/// phases (the OAuth callback is down with the app).
extension ClientExchange {
    /// False when the request was answered with the maintenance page (`page`: the file's
    /// bytes, empty when it could not be served: the proxy's own 503 then).
    func admitDuringMaintenance(_ page: [UInt8]) -> Bool {
        let m = config.maintenance
        let view = RequestView(self)
        // Opened paths match as `skip` does: every reading of the path lies under one.
        if !m.allowPaths.isEmpty && view.withPathReadings({ $0.every { p in m.allowPaths.contains { $0.matches(p) } } }) {
            return true
        }
        if !m.allowClients.isEmpty {
            if let client = rulesClientAddress(view), m.allowClients.contains(where: { $0.contains(client) }) { return true }
        }
        let error = EngineError.underMaintenance(retryAfterSeconds: m.retryAfterSeconds)
        let form = withRequestField("accept") { ErrorPage.form(accept: $0) }
        guard form == .html && !page.isEmpty else {
            respondError(error)
            return false
        }
        if current!.error == nil { current!.error = error }
        respondLocal(Response(status: 503, headers: [
            ("Content-Type", "text/html; charset=utf-8"), ("Retry-After", String(m.retryAfterSeconds)),
            ("Cache-Control", "no-store"),
        ], body: page))
        return false
    }
}
