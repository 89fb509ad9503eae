import ProxyCore

/// The relay token endpoint, on the internal listener (`/_oauth/token` by default). The app's
/// OAuth client is pointed here by configuration only (OmniAuth `token_url`, allauth
/// `ACCESS_TOKEN_URL`, Spring `token-uri`).
///
/// - A relay code (`cpr1.…`) is answered once, from the store, to the app that authenticates
///   with its configured client credentials (`client_secret_post` or `client_secret_basic`).
/// - Any other code is forwarded verbatim to the provider's real token endpoint and the answer
///   returned verbatim, so the app's ordinary web sign-in keeps working with the same setting.
public struct RelayTokenEndpoint: Sendable {
    private let path: [UInt8]
    private let settings: OAuthSettings
    private let relayCodes: RelayCodes
    private let providers: [String: any IdentityProvider]
    private let http: any HTTPFetching
    private let log: Logger
    private let metrics: OAuthMetrics

    public init(settings: OAuthSettings, relayCodes: RelayCodes, providers: [String: any IdentityProvider],
                http: any HTTPFetching, metrics: OAuthMetrics, log: Logger) {
        self.metrics = metrics
        path = Array(settings.relayTokenPath.utf8)
        self.settings = settings
        self.relayCodes = relayCodes
        self.providers = providers
        self.http = http
        self.log = log
    }

    /// The decision for `request`, or nil when it is not for this endpoint.
    public func decision(_ request: borrowing RequestView) -> RequestDecision? {
        guard request.pathEquals(path) else { return nil }
        relayCodes.noteTokenRequest()
        // The app's token request has its own id (the engine's, or the app's X-Request-Id):
        // every line below carries it (the internal listener writes no access log).
        let requestID = request.requestID
        guard request.method == .post else {
            return .respond(refuse(405, "invalid_request", "method is not POST", requestID, extra: [("Allow", "POST")]))
        }
        let contentType = request.header("Content-Type") ?? ""
        guard contentType.lowercased().hasPrefix("application/x-www-form-urlencoded") else {
            return .respond(refuse(400, "invalid_request", "body is not a form", requestID))
        }
        let authorization = request.header("Authorization")
        let loop = request.eventLoop
        let endpoint = self
        return .collectBody(limit: 8 * 1024) { body, sink in
            endpoint.handle(body: body, contentType: contentType, authorization: authorization, requestID: requestID, on: loop, sink)
        }
    }

    private func handle(body: [UInt8], contentType: String, authorization: String?, requestID: String,
                        on loop: EventLoop, _ sink: ResponseSink) {
        guard case .success(let list) = QueryDecoding.decode(body) else {
            return sink.respond(refuse(400, "invalid_request", "form does not decode", requestID))
        }
        var form: [String: String] = [:]
        for f in list {
            // A repeated parameter is refused (RFC 6749 §3.2): which one would count is ambiguous.
            guard form[f.name] == nil else {
                return sink.respond(refuse(400, "invalid_request", "repeated parameter", requestID))
            }
            form[f.name] = f.value
        }
        let credentials = Self.clientCredentials(form: form, authorization: authorization)
        guard let clientID = credentials.id, let firstMatch = settings.providersSharing(appClientID: clientID).first else {
            return sink.respond(refuse(401, "invalid_client", "unknown client", requestID, extra: [("WWW-Authenticate", "Basic")]))
        }
        guard let code = form["code"], RelayCodes.isRelayCode(code) else {
            // Providers that share an app client id share a token endpoint (`ConfigLoader`
            // refuses them otherwise), so the first by name sends it where any of them would.
            return passThrough(provider: firstMatch, body: body, contentType: contentType, authorization: authorization,
                               requestID: requestID, on: loop, sink)
        }
        guard form["grant_type"] == "authorization_code" else {
            return sink.respond(refuse(400, "unsupported_grant_type", "grant_type is not authorization_code", requestID))
        }
        // A relay code names its own provider: the credentials are checked against *that*
        // provider's app client, and only then is the code consumed. Reading before consuming
        // cannot race: a record never changes once stored (256 random bits, set-if-absent), and
        // of two consumers only one gets it from `getAndDelete`. A wrong secret or another
        // provider's client leaves the code redeemable.
        let metrics = self.metrics
        let endpoint = self
        let settings = self.settings
        relayCodes.peek(code, on: loop) { peeked in
            let record: RelayRecord
            switch peeked {
            case .success(let r?): record = r
            case .success(nil):
                return sink.respond(endpoint.refuse(400, "invalid_grant", "unknown, used or expired relay code", requestID))
            case .failure(let e):
                return sink.respond(endpoint.storeUnavailable(e, provider: nil, requestID))
            }
            guard let provider = settings.providers[record.provider], let app = provider.appClient,
                  app.clientID == clientID, let given = credentials.secret, ConstantTime.equals(given, app.clientSecret.value) else {
                return sink.respond(endpoint.refuse(401, "invalid_client", "bad client credentials", requestID,
                                                    provider: settings.providers[record.provider]?.name, extra: [("WWW-Authenticate", "Basic")]))
            }
            endpoint.relayCodes.redeem(code, on: loop) { result in
                switch result {
                case .success(let taken?) where taken == record:
                    metrics.relayRedeemed(provider.name)
                    endpoint.log.info("relay code redeemed", ["provider": provider.name, "request_id": requestID])
                    sink.respond(Response(status: 200, headers: Self.jsonHeaders, body: taken.body))
                case .success:
                    // Redeemed by a concurrent request between the read and now (or expired).
                    sink.respond(endpoint.refuse(400, "invalid_grant", "unknown, used or expired relay code", requestID,
                                                 provider: provider.name))
                case .failure(let e):
                    sink.respond(endpoint.storeUnavailable(e, provider: provider.name, requestID))
                }
            }
        }
    }

    private func storeUnavailable(_ e: StoreError, provider: String?, _ requestID: String) -> Response {
        log.warn("relay token request failed", ["provider": provider ?? "", "reason": "store unavailable", "detail": "\(e)", "request_id": requestID])
        return Self.error(503, "temporarily_unavailable")
    }

    /// Forwards an ordinary code's token request to the provider, byte for byte, and its answer back.
    private func passThrough(provider: ProviderSettings, body: [UInt8], contentType: String, authorization: String?,
                             requestID: String, on loop: EventLoop, _ sink: ResponseSink) {
        guard let resolver = providers[provider.name] as? any TokenEndpointProviding else {
            return sink.respond(Self.error(500, "server_error"))
        }
        let http = MeasuredFetcher(inner: self.http, provider: provider.name, metrics: metrics)
        let log = self.log
        let timeout = settings.idpTimeout
        resolver.tokenEndpoint(on: loop) { result in
            guard case .success(let url) = result else {
                log.warn("token pass-through failed", ["provider": provider.name, "reason": "token endpoint unknown", "request_id": requestID])
                return sink.respond(Self.error(502, "temporarily_unavailable"))
            }
            var headers: [(name: String, value: String)] = [("Content-Type", contentType), ("Accept", "application/json")]
            if let authorization { headers.append(("Authorization", authorization)) }
            let request = OutboundRequest(method: "POST", url: url, headers: headers, body: body, timeout: timeout, idempotent: false,
                                          call: .relayForward)
            http.fetch(request, on: loop) { answer in
                switch answer {
                case .success(let r):
                    log.info("token request passed through", ["provider": provider.name, "status": "\(r.status)", "request_id": requestID])
                    var headers: [(name: String, value: String)] = [("Cache-Control", "no-store"), ("Pragma", "no-cache")]
                    if let type = r.header("Content-Type") { headers.append(("Content-Type", type)) }
                    sink.respond(Response(status: r.status, headers: headers, body: r.body))
                case .failure(let e):
                    log.warn("token pass-through failed", ["provider": provider.name, "reason": e.kind.rawValue, "detail": e.detail, "request_id": requestID])
                    sink.respond(Self.error(502, "temporarily_unavailable"))
                }
            }
        }
    }

    /// `client_secret_basic` (RFC 6749 §2.3.1: id and secret form-encoded, then Base64) or
    /// `client_secret_post`. Both at once is refused by returning no id.
    static func clientCredentials(form: [String: String], authorization: String?) -> (id: String?, secret: String?) {
        if let authorization, authorization.lowercased().hasPrefix("basic ") {
            if form["client_secret"] != nil { return (nil, nil) }
            let encoded = authorization.dropFirst(6).trimmingWhitespace()
            guard let raw = Base64.decode(String(encoded), .standard),
                  let colon = raw.firstIndex(of: UInt8(ascii: ":")),
                  case .success(let id) = QueryDecoding.decodeComponent(raw[..<colon]),
                  case .success(let secret) = QueryDecoding.decodeComponent(raw[(colon + 1)...]) else {
                return (nil, nil)
            }
            if let bodyID = form["client_id"], bodyID != id { return (nil, nil) }
            return (id, secret)
        }
        return (form["client_id"], form["client_secret"])
    }

    /// The error answer, and its log line (the reason names no value the app sent).
    private func refuse(_ status: Int, _ code: String, _ reason: String, _ requestID: String, provider: String? = nil,
                        extra: [(name: String, value: String)] = []) -> Response {
        log.info("relay token request refused", [
            "provider": provider ?? "", "reason": reason, "status": "\(status)", "request_id": requestID,
        ])
        return Self.error(status, code, extra: extra)
    }

    static let jsonHeaders: [(name: String, value: String)] = [
        ("Content-Type", "application/json"), ("Cache-Control", "no-store"), ("Pragma", "no-cache"),
    ]

    /// An RFC 6749 §5.2 error response.
    static func error(_ status: Int, _ code: String, extra: [(name: String, value: String)] = []) -> Response {
        Response(status: status, headers: jsonHeaders + extra, body: Array("{\"error\":\"\(code)\"}".utf8))
    }
}
