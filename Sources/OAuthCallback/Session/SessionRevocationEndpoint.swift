import ProxyCore

/// `POST /sessions/revoke` on the internal listener, with a form body of exactly one of
/// `email=<address>` or `sub=<subject>`: sets the user's revocation marker
/// (`SessionRevocation`) and answers `200 {"result":"marker_set","by":…,"issued_until":<unix>}`.
///
/// Strict, like every input that decides who may enter: no query, a form body that decodes
/// exactly as written, one known parameter once, an address that reads as one. Anything else is
/// a 400 with a short reason (and a warning naming the endpoint, at most one a second): a
/// revocation that cannot be read must not read as a revocation of someone else, or of nobody
/// while the caller believes it done. With `oauth.session.revocation` off there is no marker
/// to set (sessions are not checked), and the answer says so (409).
public struct SessionRevocationEndpoint: Sendable {
    public static let path: StaticString = "/sessions/revoke"
    /// nil: `oauth.session.revocation` is off.
    let revocation: SessionRevocation?
    let log: Logger
    let problems = ConfigFailureLog(interval: 1_000_000_000)

    public init(revocation: SessionRevocation?, log: Logger) {
        self.revocation = revocation
        self.log = log
    }

    /// The decision for `request`, or nil when it is not for this endpoint.
    public func decision(_ request: borrowing RequestView) -> RequestDecision? {
        guard request.pathEquals(Self.path) else { return nil }
        let loop = request.eventLoop
        let requestID = request.requestID
        guard request.method == .post else {
            return .respond(Self.answer(405, ["error": .string("method_not_allowed")], extra: [("Allow", "POST")]))
        }
        guard let revocation else {
            return .respond(Self.answer(409, ["error": .string("revocation_off"),
                                               "reason": .string("oauth.session.revocation is off: sessions are not checked for revocation")]))
        }
        if let query = request.query, !query.isEmpty { return .respond(refuse("parameters go in the form body, not the query", requestID, loop)) }
        let contentType = request.header("Content-Type") ?? ""
        guard contentType.asciiLowercased().hasPrefix("application/x-www-form-urlencoded") else {
            return .respond(refuse("the body must be application/x-www-form-urlencoded", requestID, loop))
        }
        let endpoint = self
        return .collectBody(limit: 1024) { body, sink in
            let user: SessionRevocation.User
            switch Self.user(body) {
            case .failure(let reason): return sink.respond(endpoint.refuse(reason.text, requestID, loop))
            case .success(let u): user = u
            }
            revocation.revoke(user, on: loop) { result in
                switch result {
                case .failure(let error):
                    endpoint.log.warn("session revocation not recorded", [
                        "request.id": requestID, "reason": "store_unavailable", "detail": error.description, "setting": "store",
                    ])
                    sink.respond(Self.answer(503, ["error": .string("temporarily_unavailable")]))
                case .success(let at):
                    // The domain, or a digest prefix of a subject: enough to match calls, never the user.
                    let (name, value): (String, String)
                    switch user {
                    case .email(let e): (name, value) = ("email_domain", EmailAddress(e).map { String($0.domain) } ?? "")
                    case .subject(let s): (name, value) = ("sub_digest", String(ReplayGuard.hex(SHA256.hash(s)).prefix(12)))
                    }
                    endpoint.log.info("sessions revoked", [
                        "request.id": requestID, "by": Self.kind(user), name: value, "marker_ttl": String(revocation.lifetimeSeconds + 1),
                    ])
                    sink.respond(Self.answer(200, ["result": .string("marker_set"), "by": .string(Self.kind(user)),
                                                   "issued_until": .number(String(at))]))
                }
            }
        }
    }

    /// Why a revocation request cannot be read; the text names parameters, never values.
    enum Problem: Error, Equatable {
        case unreadable, notOne, unknown(String), badEmail, badSubject

        var text: String {
            switch self {
            case .unreadable: return "the body does not decode strictly (escape & = % and +, no stray &)"
            case .notOne: return "give exactly one of email= or sub=, once"
            case .unknown(let name): return "unknown parameter '\(name.prefix(40))' (email, sub)"
            case .badEmail: return "email is not an address with an ASCII domain"
            case .badSubject: return "sub must be 1 to 255 printable characters"
            }
        }
    }

    /// The user a form body names: exactly one `email` or `sub` field.
    static func user(_ body: [UInt8]) -> Result<SessionRevocation.User, Problem> {
        guard case .success(let fields) = QueryDecoding.decode(body) else { return .failure(.unreadable) }
        guard fields.count == 1, let field = fields.first else {
            if let unknown = fields.first(where: { $0.name != "email" && $0.name != "sub" }) { return .failure(.unknown(unknown.name)) }
            return .failure(.notOne)
        }
        switch field.name {
        case "email":
            guard let address = EmailAddress(field.value) else { return .failure(.badEmail) }
            return .success(.email(address.address))
        case "sub":
            let v = field.value.utf8
            guard (1...255).contains(v.count), v.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else { return .failure(.badSubject) }
            return .success(.subject(field.value))
        default:
            return .failure(.unknown(field.name))
        }
    }

    static func kind(_ user: SessionRevocation.User) -> String {
        if case .email = user { return "email" }
        return "sub"
    }

    private func refuse(_ reason: String, _ requestID: String, _ loop: EventLoop) -> Response {
        if problems.isDue(provider: "", setting: "revoke", now: loop.nowNanoseconds) {
            log.warn("session revocation refused", [
                "request.id": requestID, "reason": reason, "setting": "POST \(Self.path) on the internal listener",
            ])
        }
        return Self.answer(400, ["error": .string("invalid_request"), "reason": .string(reason)])
    }

    static func answer(_ status: Int, _ object: [String: JSONValue], extra: [(name: String, value: String)] = []) -> Response {
        Response(status: status, headers: [("Content-Type", "application/json"), ("Cache-Control", "no-store")] + extra,
                 body: JSONValue.object(object).serialized())
    }
}
