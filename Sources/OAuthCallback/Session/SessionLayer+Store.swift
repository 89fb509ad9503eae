import ProxyCore

/// Server-side sessions: the record in the store under `session:` + hex SHA-256 of a random
/// 256-bit id, the cookie carrying only that id, sealed. The store's TTL is the session's
/// lifetime; sign-out deletes the record, so a copied cookie stops working everywhere at once.
///
/// Fail closed: when the store cannot answer, a protected path gets 503 (never a redirect to
/// sign-in, which would only loop back to the same outage), `/_oauth/auth` and
/// `/_oauth/userinfo` get 503, and sign-out says it could not end the session (and keeps the
/// cookie, so trying again later can still end it).
extension SessionLayer {
    /// What a request decided on its session becomes.
    enum SessionAnswer {
        /// The proxy answers.
        case respond(Response)
        /// Upstream, with this session's identity headers (none for nil).
        case pass(ProxySession?)
    }

    /// Runs `answer` with the request's session: at once for cookie sessions (and for a request
    /// without a session cookie), after a store lookup for a server-side one. Call on `loop`.
    func withSession(_ cookies: [(name: String, value: String)], on loop: EventLoop,
                     _ answer: @escaping @Sendable (Result<ProxySession?, StoreError>) -> SessionAnswer) -> RequestDecision? {
        guard serverSide, let id = cookie.reference(from: cookies.filter { cookie.isSessionCookieName($0.name) }) else {
            switch answer(.success(session(cookies, on: loop))) {
            case .respond(let response): return .respond(response)
            case .pass(nil): return nil
            // The cookie was opened once, here: its identity headers go with the decision.
            case .pass(let s?):
                var edits = HeaderEdits()
                edits.add = identityHeaders(s)
                return .proceed(UpstreamRewrite(edits: edits))
            }
        }
        return .deferred { [self] sink in
            lookup(id, on: loop) { found in
                switch answer(found) {
                case .respond(let response): sink.respond(response)
                case .pass(let s):
                    var edits = HeaderEdits()
                    if let s { edits.add = self.identityHeaders(s) }
                    sink.proceed(UpstreamRewrite(edits: edits))
                }
            }
        }
    }

    static func storeKey(_ id: [UInt8]) -> String {
        "session:" + ReplayGuard.hex(SHA256.hash(id))
    }

    /// The live session for `id`, nil when there is none (signed out, expired, never existed).
    func lookup(_ id: [UInt8], on loop: EventLoop, _ completion: @escaping (Result<ProxySession?, StoreError>) -> Void) {
        let now = clock()
        let log = self.log
        store.get(key: Self.storeKey(id), on: loop) { result in
            switch result {
            case .success(let bytes?):
                let session = (try? JSONParser.parse(bytes)).flatMap(SessionCookie.session(from:))
                completion(.success(session.flatMap { now < $0.expiresAt ? $0 : nil }))
            case .success(nil):
                completion(.success(nil))
            case .failure(let error):
                log.warn("session lookup failed", ["reason": "store_unavailable", "detail": error.description])
                completion(.failure(error))
            }
        }
    }

    /// Stores a new session under a fresh id; the `Set-Cookie` values carrying its reference.
    func store(_ session: ProxySession, present: [String], on loop: EventLoop,
               _ completion: @escaping (Result<[String], CallbackFailure>) -> Void) {
        guard let id = try? SecureRandom.bytes(SessionCookie.referenceLength),
              let setCookies = try? cookie.setCookies(reference: id, maxAge: session.expiresAt - session.issuedAt,
                                                      present: present) else {
            return completion(.failure(Self.unsealable))
        }
        let record = SessionCookie.payload(session).serialized()
        store.set(key: Self.storeKey(id), value: record, ttlSeconds: max(1, session.expiresAt - session.issuedAt),
                  on: loop) { result in
            switch result {
            case .success: completion(.success(setCookies))
            case .failure(let error):
                completion(.failure(CallbackFailure(.internal, code: ReplayGuard.storeUnavailableCode, userMessage: Messages.unavailable,
                                                    logDetail: "session not stored: \(error)", retryable: true)))
            }
        }
    }

    /// `/_oauth/sign_out` (GET or POST, same-site: see `isSameSiteOrUnknown`): ends the
    /// server-side session (if any), clears the cookies, goes to `rd`.
    func signOut(cookies: [(name: String, value: String)], rd: String, on loop: EventLoop,
                 _ completion: @escaping (Response) -> Void) {
        let present = cookies.map(\.name).filter(cookie.isSessionCookieName)
        let signedOut = Response(status: 302, headers: [("Location", rd), ("Cache-Control", "no-store")]
                                 + cookie.clearingCookies(present: present).map { ("Set-Cookie", $0) })
        guard serverSide, let id = cookie.reference(from: cookies.filter { cookie.isSessionCookieName($0.name) }) else {
            return completion(signedOut)
        }
        let log = self.log
        store.delete(key: Self.storeKey(id), on: loop) { result in
            switch result {
            case .success: completion(signedOut)
            case .failure(let error):
                log.warn("sign-out failed", ["reason": "store_unavailable", "detail": error.description])
                completion(CallbackPage.error(status: 503, message: "Signing out is temporarily unavailable. Please try again in a moment.",
                                              title: "Not signed out"))
            }
        }
    }
}
