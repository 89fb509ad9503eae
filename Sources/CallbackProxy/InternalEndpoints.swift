import OAuthCallback
import ProxyCore

/// The internal listener's routes. It never proxies: anything unknown is a 404.
struct InternalEndpoints: HTTPPhases {
    let relay: RelayTokenEndpoint?

    func requestFilter(_ request: borrowing RequestView) -> RequestDecision {
        if let relay, let decision = relay.decision(request) { return decision }
        if request.pathEquals("/healthz") {
            return .respond(Response(status: 200, text: "ok\n", headers: [("Cache-Control", "no-store")]))
        }
        return .respond(Response(status: 404, text: "404 Not Found\n"))
    }
}

/// The public listener's phases until the OAuth layer is wired in: pass everything through.
struct PassThrough: HTTPPhases {}
