import ProxyCore

/// `session` hand-off mode on the request path: the proxy's own endpoints (`/_oauth/start`,
/// `/_oauth/sign_out`, `/_oauth/userinfo`, `/_oauth/auth`), protected paths, and identity
/// headers upstream — client-sent variants of those headers are always removed first.
///
/// Sign-in goes through `/_oauth/start`: it sets a sealed state cookie (state, nonce, `rd`,
/// provider) and redirects to the provider's authorization URL with the app's web client. A
/// wrapper app intercepts that navigation, signs in natively and loads `/_oauth_callback` with
/// the same `state`; the callback must match the state cookie (login CSRF) and the id_token the
/// cookie's nonce. Then the session cookie is set and the browser goes to `rd`.
public final class SessionLayer: Sendable {
    public static let startPath = "/_oauth/start"
    public static let signOutPath = "/_oauth/sign_out"
    public static let userInfoPath = "/_oauth/userinfo"
    public static let authPath = "/_oauth/auth"
    public static let webCallbackPath = "/_oauth/web_callback"
    static let stateLifetime: Int64 = 600

    let settings: SessionSettings
    private let providers: [String: ProviderSettings]
    private let cookie: SessionCookie
    private let stateSealer: AES256GCM
    private let stateCookieName: String
    private let redirects: RedirectValidator
    private let clock: @Sendable () -> Int64
    /// Every spelling of every identity header a client might send (case is compared
    /// insensitively by the engine; `_`/`-` variants are listed).
    private let strip: [String]

    public init(oauth: OAuthSettings, clock: @escaping @Sendable () -> Int64) throws(CryptoError) {
        let settings = oauth.session ?? SessionSettings()
        self.settings = settings
        providers = oauth.providers.filter { $0.value.handoff == .session }
        let keys = settings.secrets.map { SHA256.hash("session:" + $0.value) }
        cookie = try SessionCookie(name: settings.cookieName, keys: keys.isEmpty ? [SHA256.hash("unset")] : keys,
                                   secure: settings.secure)
        stateSealer = try AES256GCM(key: SHA256.hash("state:" + (settings.secrets.first?.value ?? "unset")))
        stateCookieName = (settings.secure ? "__Host-" : "") + "_oauth_state"
        redirects = RedirectValidator(allowedHosts: settings.allowedRedirectHosts)
        self.clock = clock
        strip = IdentityHeaders.names.flatMap(Self.spellings) + (settings.passAccessToken ? ["Authorization"] : [])
    }

    /// `X-Forwarded-Email` → also `X_Forwarded_Email`, `X-Forwarded_Email`, `X_Forwarded-Email`.
    static func spellings(_ name: String) -> [String] {
        var out = [""]
        for c in name {
            if c == "-" { out = out.flatMap { [$0 + "-", $0 + "_"] } } else { out = out.map { $0 + String(c) } }
        }
        return out
    }

    // MARK: Requests

    /// The proxy's own answer for `request`, or nil to continue upstream.
    public func decision(_ request: borrowing RequestView) -> RequestDecision? {
        let path = request.path
        let cookies = Self.cookies(request.headers(named: "Cookie"))
        switch path {
        case Self.startPath: return .respond(start(query: request.query ?? "", host: request.host ?? "localhost"))
        case Self.signOutPath:
            let rd = Self.queryValue(request.query, "rd").flatMap(redirects.validate) ?? "/"
            let present = cookies.map(\.name).filter(cookie.isSessionCookieName)
            return .respond(Response(status: 302, headers: [("Location", rd), ("Cache-Control", "no-store")]
                                     + cookie.clearingCookies(present: present).map { ("Set-Cookie", $0) }))
        case Self.userInfoPath:
            guard let s = session(cookies) else { return .respond(Self.json(401, ["error": .string("unauthorized")])) }
            var o: [String: JSONValue] = ["provider": .string(s.provider), "user": .string(s.subject)]
            if let e = s.verifiedEmail { o["email"] = .string(e) }
            if let u = s.preferredUsername { o["preferred_username"] = .string(u) }
            return .respond(Self.json(200, o))
        case Self.authPath:
            guard let s = session(cookies) else { return .respond(Response(status: 401, headers: [("Cache-Control", "no-store")])) }
            return .respond(Response(status: 202, headers: [("Cache-Control", "no-store")]
                                     + IdentityHeaders.authRequestHeaders(for: s, passAccessToken: settings.passAccessToken)))
        case Self.webCallbackPath:
            return .respond(CallbackPage.error(status: 501, message: "Signing in through this address needs the app. Please sign in from the app."))
        default:
            guard settings.requiresSession(path), session(cookies) == nil else { return nil }
            let accept = request.header("Accept") ?? ""
            let xhr = request.header("X-Requested-With") != nil
            if accept.contains("application/json") || xhr {
                return .respond(Self.json(401, ["error": .string("unauthorized")]))
            }
            let rd = FormEncoding.encode([("rd", request.target)])
            return .respond(Response(status: 302, headers: [("Location", Self.startPath + "?" + rd), ("Cache-Control", "no-store")]))
        }
    }

    /// Identity headers for the upstream: every client-sent variant removed, ours added.
    public func upstreamEdits(_ request: borrowing RequestView, _ edits: inout HeaderEdits) {
        edits.remove += strip
        if let s = session(Self.cookies(request.headers(named: "Cookie"))) {
            edits.add += IdentityHeaders.headers(for: s, passAccessToken: settings.passAccessToken,
                                                 passAuthorization: settings.passAccessToken)
        }
    }

    // MARK: Sign-in

    private func start(query: String, host: String) -> Response {
        let requested = Self.queryValue(query, "provider") ?? providers.keys.sorted().first ?? ""
        guard let provider = providers[requested], let client = provider.appClient,
              let authorize = Self.authorizationEndpoint(provider) else {
            return CallbackPage.error(status: 400, message: "Unknown sign-in provider.")
        }
        let rd = Self.queryValue(query, "rd").flatMap(redirects.validate) ?? "/"
        guard let state = try? SecureRandom.bytes(32), let nonce = try? SecureRandom.bytes(16) else {
            return CallbackPage.error(status: 500, message: Messages.internalError)
        }
        let record = StateRecord(state: Base64URL.encode(state), nonce: Base64URL.encode(nonce), rd: rd,
                                 provider: provider.name, expiresAt: clock() + Self.stateLifetime)
        guard let sealed = try? stateSealer.seal(record.json(), authenticating: Array(stateCookieName.utf8)) else {
            return CallbackPage.error(status: 500, message: Messages.internalError)
        }
        let scheme = settings.secure ? "https" : "http"
        let location = authorize + (authorize.contains("?") ? "&" : "?") + FormEncoding.encode([
            ("response_type", "code"), ("client_id", client.clientID),
            ("redirect_uri", "\(scheme)://\(host)\(Self.webCallbackPath)"),
            ("scope", "openid email profile"), ("state", record.state), ("nonce", record.nonce),
        ])
        let attributes = "; Path=/; Max-Age=\(Self.stateLifetime); HttpOnly; SameSite=Lax" + (settings.secure ? "; Secure" : "")
        return Response(status: 302, headers: [("Location", location), ("Cache-Control", "no-store"),
                                              ("Set-Cookie", stateCookieName + "=" + Base64URL.encode(sealed) + attributes)])
    }

    /// The state cookie sent with a callback, if it is ours, intact and unexpired.
    func stateRecord(_ cookies: [(name: String, value: String)]) -> StateRecord? {
        guard let value = cookies.first(where: { $0.name == stateCookieName })?.value,
              let box = Base64URL.decode(value),
              let plain = try? stateSealer.open(box, authenticating: Array(stateCookieName.utf8)),
              let record = StateRecord(json: plain), record.expiresAt > clock() else { return nil }
        return record
    }

    /// After a verified callback in session mode: the state must be the one this browser was
    /// given by /_oauth/start (login CSRF), then the session cookie is set.
    func signIn(_ identity: VerifiedIdentity, state: String, provider: String,
                cookies: [(name: String, value: String)]) -> Result<Response, CallbackFailure> {
        guard let record = stateRecord(cookies), ConstantTime.equals(record.state, state), record.provider == provider else {
            return .failure(CallbackFailure(.client, code: "state_mismatch",
                                            userMessage: "This sign-in was not started in this browser. Please start signing in again.",
                                            logDetail: "callback state does not match this browser's state cookie (login CSRF refused)"))
        }
        let now = clock()
        let session = ProxySession(provider: provider, subject: identity.subject, email: identity.email,
                                   emailVerified: identity.emailVerified ?? false, name: identity.name,
                                   accessToken: settings.passAccessToken ? identity.tokens.accessToken : nil,
                                   issuedAt: now, expiresAt: now + settings.lifetimeSeconds)
        guard let setCookies = try? cookie.setCookies(for: session, now: now,
                                                      present: cookies.map(\.name).filter(cookie.isSessionCookieName)) else {
            return .failure(CallbackFailure(.internal, code: "server_error", userMessage: Messages.internalError,
                                            logDetail: "session cookie could not be sealed"))
        }
        let clearState = stateCookieName + "=; Path=/; Max-Age=0; HttpOnly; SameSite=Lax" + (settings.secure ? "; Secure" : "")
        return .success(Response(status: 302, headers: [("Location", record.rd)]
                                 + setCookies.map { ("Set-Cookie", $0) } + [("Set-Cookie", clearState)]))
    }

    // MARK: Helpers

    func session(_ cookies: [(name: String, value: String)]) -> ProxySession? {
        cookie.session(from: cookies.filter { cookie.isSessionCookieName($0.name) }, now: clock())
    }

    static func authorizationEndpoint(_ p: ProviderSettings) -> String? {
        if let a = p.endpoints.authorization { return a }
        switch p.kind {
        case .google: return "https://accounts.google.com/o/oauth2/v2/auth"
        case .apple: return "https://appleid.apple.com/auth/authorize"
        case .facebook: return "https://www.facebook.com/v19.0/dialog/oauth"
        case .oidc: return nil
        }
    }

    /// `Cookie` header values → (name, value) pairs (RFC 6265 §5.4 shape: `a=b; c=d`).
    static func cookies(_ headers: [String]) -> [(name: String, value: String)] {
        var out: [(name: String, value: String)] = []
        for h in headers {
            for part in h.split(separator: ";") {
                let p = part.drop(while: { $0 == " " })
                guard let eq = p.firstIndex(of: "=") else { continue }
                out.append((String(p[..<eq]), String(p[p.index(after: eq)...])))
            }
        }
        return out
    }

    static func queryValue(_ query: String?, _ name: String) -> String? {
        guard let query, case .success(let fields) = QueryDecoding.decode(query) else { return nil }
        return fields.first { $0.name == name }?.value
    }

    static func json(_ status: Int, _ object: [String: JSONValue]) -> Response {
        Response(status: status, headers: [("Content-Type", "application/json"), ("Cache-Control", "no-store")],
                 body: JSONValue.object(object).serialized())
    }
}

/// What the state cookie holds between /_oauth/start and the callback.
struct StateRecord: Equatable {
    let state: String
    let nonce: String
    let rd: String
    let provider: String
    let expiresAt: Int64

    func json() -> [UInt8] {
        JSONValue.object(["s": .string(state), "n": .string(nonce), "r": .string(rd), "p": .string(provider),
                          "e": .number(String(expiresAt))]).serialized()
    }

    init(state: String, nonce: String, rd: String, provider: String, expiresAt: Int64) {
        self.state = state
        self.nonce = nonce
        self.rd = rd
        self.provider = provider
        self.expiresAt = expiresAt
    }

    init?(json: [UInt8]) {
        guard let o = (try? JSONParser.parse(json))?.objectValue,
              let s = o["s"]?.stringValue, let n = o["n"]?.stringValue, let r = o["r"]?.stringValue,
              let p = o["p"]?.stringValue, let e = o["e"]?.int64Value else { return nil }
        self.init(state: s, nonce: n, rd: r, provider: p, expiresAt: e)
    }
}
