import OAuthCallback
import ProxyCore

/// The internal listener's routes. It never proxies: anything unknown is a 404.
struct InternalEndpoints: HTTPPhases {
    let relay: RelayTokenEndpoint?
    let metrics: MetricsRegistry
    let readiness: Readiness
    /// `{"keys":[…]}` verifying `oauth.session.jwt_assertion` tokens; nil without that setting.
    var assertionJWKS: [UInt8]? = nil
    /// `POST /sessions/revoke`; nil outside session mode.
    var revocation: SessionRevocationEndpoint? = nil

    func requestFilter(_ request: borrowing RequestView) -> RequestDecision {
        if let relay, let decision = relay.decision(request) { return decision }
        if let revocation, let decision = revocation.decision(request) { return decision }
        if request.pathEquals("/healthz") {
            return .respond(Response(status: 200, text: "ok\n", headers: [("Cache-Control", "no-store")]))
        }
        if request.pathEquals("/readyz") {
            // `?group=NAME`: that upstream group alone (a balancer that sends only its routes here).
            if let query = request.query, query.split(separator: "&").contains(where: { $0.hasPrefix("group=") }) {
                return readiness.groupDecision(query, on: request.eventLoop)
            }
            return readiness.decision(on: request.eventLoop)
        }
        if request.pathEquals("/metrics") {
            return .respond(Response(status: 200, contentType: "text/plain; version=0.0.4; charset=utf-8",
                                     text: metrics.render(), headers: [("Cache-Control", "no-store")]))
        }
        if let assertionJWKS, request.pathEquals("/.well-known/jwks.json") {
            // Apps cache it; a rotation publishes the new key beside the old one first.
            return .respond(Response(status: 200, headers: [("Content-Type", "application/json"), ("Cache-Control", "max-age=300")],
                                     body: assertionJWKS))
        }
        return .respond(Response(status: 404, text: "404 Not Found\n"))
    }

    func context(for request: borrowing RequestView) -> RequestContext { Self.context }
    private static let context = RequestContext(route: .internal)
}

/// The public listener's phases until the OAuth layer is wired in: pass everything through.
struct PassThrough: HTTPPhases {}
