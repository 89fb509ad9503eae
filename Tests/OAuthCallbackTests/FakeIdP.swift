// The provider tests' identity provider: an `HTTPFetching` that answers Google's, Apple's,
// Facebook's and a generic OIDC issuer's endpoints, routed by URL, and is as strict as the
// real ones — exact form field sets, single-use codes bound to client and redirect, PKCE
// S256 checked against the challenge it was told about, Apple's client-secret JWT verified
// with the team key, Facebook's appsecret_proof recomputed. It mints nothing itself: tests
// hand it id_tokens signed with `TestKeys` (see JOSEFixturesTests.swift), so they control
// every header and claim. Answers are delivered asynchronously through `loop.execute`.
import Testing
import Synchronization
import ProxyCore
@testable import OAuthCallback
#if canImport(Glibc)
import Glibc
#endif

// MARK: Loops and clock

/// An event loop thread that knows its own pthread, so tests can assert that completions
/// run on the loop they were started on.
final class TestLoopThread: Sendable {
    /// The loop most provider tests run on (started once per test process, never stopped).
    static let main = TestLoopThread(index: 0)
    /// A second loop, for "waiters on another loop are resumed on their own loop".
    static let second = TestLoopThread(index: 1)

    private final class ThreadID: Sendable { let value = Mutex<pthread_t?>(nil) }

    let thread: EventLoopThread
    private let id: ThreadID

    init(index: Int) {
        let id = ThreadID()
        self.id = id
        thread = try! EventLoopThread(index: index, setup: { _ in id.value.withLock { $0 = pthread_self() } })
    }

    var loop: EventLoop { thread.loop }

    /// True when called on this loop's thread.
    var isCurrent: Bool {
        guard let tid = id.value.withLock({ $0 }) else { return false }
        return pthread_equal(tid, pthread_self()) != 0
    }
}

/// A settable unix-seconds clock shared by the provider under test and the fake IdP.
final class TestClock: Sendable {
    private let seconds: Mutex<Int64>

    init(_ start: Int64 = Mint.now) { seconds = Mutex(start) }

    var now: Int64 { seconds.withLock { $0 } }
    func advance(_ by: Int64) { seconds.withLock { $0 += by } }
    var function: @Sendable () -> Int64 { { [self] in now } }
}

/// What a provider's completion delivered, and whether it was delivered on the right loop.
struct Delivered<Value: Sendable>: Sendable {
    let result: Value
    let onLoop: Bool
}

/// Runs `start` on `thread`'s loop and waits for its completion. A second completion is a
/// crash on purpose: "exactly once" is part of the contract.
func onLoop<Value: Sendable>(_ thread: TestLoopThread = .main,
                             _ start: @escaping @Sendable (EventLoop, @escaping (Value) -> Void) -> Void) async -> Delivered<Value> {
    await withCheckedContinuation { continuation in
        let loop = thread.loop
        loop.execute {
            var calls = 0
            start(loop) { value in
                calls += 1
                precondition(calls == 1, "completion called more than once")
                continuation.resume(returning: Delivered(result: value, onLoop: thread.isCurrent))
            }
        }
    }
}

/// Waits (yielding, for at most ~10 s) until `condition` holds; records an issue if it never does.
func until(_ condition: () -> Bool, sourceLocation: SourceLocation = #_sourceLocation) async {
    for _ in 0..<10_000 {
        if condition() { return }
        try? await Task.sleep(nanoseconds: 1_000_000)
    }
    Issue.record("condition never became true", sourceLocation: sourceLocation)
}

/// `provider.redeem(request)` on a real loop.
func redeem(_ provider: any IdentityProvider, _ request: ExchangeRequest,
            on thread: TestLoopThread = .main) async -> Result<VerifiedIdentity, CallbackFailure> {
    let delivered = await onLoop(thread) { loop, done in provider.redeem(request, on: loop, done) }
    #expect(delivered.onLoop, "completion ran off its event loop")
    return delivered.result
}

extension Result where Failure == CallbackFailure {
    /// The failure, or nil on success (named apart from other suites' `Result` helpers).
    var refusal: CallbackFailure? {
        if case .failure(let f) = self { return f }
        return nil
    }
}

// MARK: PKCE and codes

enum PKCE {
    static func verifier() -> String { Base64URL.encode(try! SecureRandom.bytes(32)) }
    static func challenge(_ verifier: String) -> String { Base64URL.encode(SHA256.hash(verifier)) }
}

func randomToken(_ prefix: String) -> String { prefix + Base64URL.encode(try! SecureRandom.bytes(18)) }

// MARK: The fake

final class FakeIdP: HTTPFetching, Sendable {
    enum URLs {
        static let googleToken = GoogleProvider.defaultTokenEndpoint
        static let googleJWKS = GoogleProvider.defaultJWKS
        static let appleToken = AppleProvider.defaultTokenEndpoint
        static let appleJWKS = AppleProvider.defaultJWKS
        static let graph = FacebookProvider.defaultGraph
        static let facebookJWKS = FacebookProvider.defaultJWKS
        static let oidcIssuer = "https://login.example.org/tenant"
        static let oidcDiscovery = oidcIssuer + "/.well-known/openid-configuration"
        static let oidcToken = "https://login.example.org/oauth2/token"
        static let oidcJWKS = "https://keys.example.org/jwks.json"
    }

    enum Endpoint: Sendable { case google, apple, facebook, oidc }

    /// What an authorization code was issued for, as the IdP remembers it.
    struct Grant: Sendable {
        var clientID: String
        /// The redirect the authorization request used; nil for Apple native codes, which
        /// have none and must be redeemed without one.
        var redirectURI: String?
        /// The S256 challenge the authorization request carried, if any.
        var codeChallenge: String?
        /// Returned as `id_token` (nil: no id_token in the answer).
        var idToken: String?
        var accessToken = randomToken("at-")
        var refreshToken: String? = nil
        /// Facebook only: who the access token belongs to.
        var facebookUser: FacebookUser? = nil
    }

    struct FacebookUser: Sendable {
        var id = "10158000000000001"
        var name = "Jane Doe"
        var email: String? = "jane@example.com"
        /// The app the token was issued to (another app's token is what `debug_token` catches).
        var appID: String
        var isValid = true
    }

    struct AppleTeam: Sendable {
        var teamID: String
        var keyID: String
        var key: P256PrivateKey
    }

    struct FacebookApp: Sendable {
        var appID: String
        var secret: String
    }

    /// An OIDC client as registered at the issuer.
    struct OIDCClient: Sendable {
        /// nil: a public client (PKCE required, no secret accepted).
        var secret: String?
        var method: ClientAuthMethod = .post
    }

    enum Override: Sendable {
        case response(OutboundResponse)
        case error(OutboundError)
    }

    private struct State {
        var grants: [String: (Endpoint, Grant)] = [:]
        var usedCodes: Set<String> = []
        var jwks: [String: (body: [UInt8], cacheControl: String?)] = [:]
        var facebookTokens: [String: FacebookUser] = [:]
        var oidcClients: [String: OIDCClient] = [:]
        var discoveryIssuer: String = URLs.oidcIssuer
        var overrides: [String: Override] = [:]
        var held: Set<String> = []
        var parked: [String: [@Sendable () -> Void]] = [:]
        var requests: [OutboundRequest] = []
    }

    let clock: TestClock
    let apple: AppleTeam
    let facebook: FacebookApp
    private let state = Mutex(State())

    init(clock: TestClock = TestClock(),
         apple: AppleTeam = AppleTeam(teamID: "TEAM123456", keyID: "KEY1234567", key: try! P256PrivateKey(pem: FixedP8.pem)),
         facebook: FacebookApp = FacebookApp(appID: "1234567890", secret: "fb-app-secret: ümlaut&=")) {
        self.clock = clock
        self.apple = apple
        self.facebook = facebook
    }

    // MARK: Test set-up

    /// Issues a fresh authorization code for `grant` at `endpoint`.
    @discardableResult
    func issueCode(_ endpoint: Endpoint, _ grant: Grant) -> String {
        let code = randomToken("code-")
        state.withLock { $0.grants[code] = (endpoint, grant) }
        return code
    }

    func publishKeys(_ url: String, _ keys: [JSONValue], cacheControl: String? = "public, max-age=3600") {
        publishKeys(url, body: JSONValue.object(["keys": .array(keys)]).serialized(), cacheControl: cacheControl)
    }

    func publishKeys(_ url: String, body: [UInt8], cacheControl: String?) {
        state.withLock { $0.jwks[url] = (body, cacheControl) }
    }

    func registerOIDCClient(_ clientID: String, _ client: OIDCClient) {
        state.withLock { $0.oidcClients[clientID] = client }
    }

    /// The discovery document as served now (a test that overrides it starts from this one).
    func discoveryBody() -> [UInt8] { state.withLock { oidcDiscovery($0).body } }

    /// The `issuer` the discovery document claims (a mismatch test sets another one).
    func setDiscoveryIssuer(_ issuer: String) { state.withLock { $0.discoveryIssuer = issuer } }

    /// Every request to `url` (query ignored) gets this answer instead of the real logic.
    func override(_ url: String, _ answer: Override?) { state.withLock { $0.overrides[url] = answer } }

    /// Answers to `url` are parked until `release(url)`: lets tests start concurrent callers.
    func hold(_ url: String) { state.withLock { _ = $0.held.insert(url) } }

    func release(_ url: String) {
        let parked = state.withLock { s -> [@Sendable () -> Void] in
            s.held.remove(url)
            return s.parked.removeValue(forKey: url) ?? []
        }
        for deliver in parked { deliver() }
    }

    func parkedCount(_ url: String) -> Int { state.withLock { $0.parked[url]?.count ?? 0 } }

    /// Requests seen for `url` (query ignored), in order.
    func requests(to url: String) -> [OutboundRequest] {
        state.withLock { $0.requests.filter { FakeIdP.withoutQuery($0.url) == url } }
    }

    var allRequests: [OutboundRequest] { state.withLock { $0.requests } }

    // MARK: HTTPFetching

    private struct CompletionBox: @unchecked Sendable {
        let body: (Result<OutboundResponse, OutboundError>) -> Void
    }

    func fetch(_ request: OutboundRequest, on loop: EventLoop,
               _ completion: @escaping (Result<OutboundResponse, OutboundError>) -> Void) {
        let box = CompletionBox(body: completion)
        let path = Self.withoutQuery(request.url)
        state.withLock { s in
            s.requests.append(request)
            let result = route(&s, request, path: path)
            let deliver: @Sendable () -> Void = { loop.execute { box.body(result) } }
            if s.held.contains(path) {
                s.parked[path, default: []].append(deliver)
            } else {
                deliver()
            }
        }
    }

    private func route(_ s: inout State, _ request: OutboundRequest, path: String) -> Result<OutboundResponse, OutboundError> {
        if let override = s.overrides[path] {
            switch override {
            case .response(let r): return .success(r)
            case .error(let e): return .failure(e)
            }
        }
        if let document = s.jwks[path] {
            guard request.method == "GET" else { return .success(Self.status(405)) }
            var headers: [(name: String, value: String)] = [("Content-Type", "application/json")]
            if let cc = document.cacheControl { headers.append(("Cache-Control", cc)) }
            return .success(OutboundResponse(status: 200, headers: headers, body: document.body))
        }
        switch path {
        case URLs.googleToken: return .success(googleToken(&s, request))
        case URLs.appleToken: return .success(appleToken(&s, request))
        case URLs.graph + "/oauth/access_token": return .success(facebookToken(&s, request))
        case URLs.graph + "/debug_token": return .success(facebookDebugToken(&s, request))
        case URLs.graph + "/me": return .success(facebookMe(&s, request))
        case URLs.oidcDiscovery: return .success(oidcDiscovery(s))
        case URLs.oidcToken: return .success(oidcToken(&s, request))
        default: return .success(Self.status(404))
        }
    }

    // MARK: Google

    private func googleToken(_ s: inout State, _ request: OutboundRequest) -> OutboundResponse {
        let fields: [String: String]
        switch Self.formPost(request) {
        case .refused(let refusal): return refusal
        case .fields(let f): fields = f
        }
        // Installed-app clients have no secret; Google refuses one.
        if fields["client_secret"] != nil { return Self.oauthError(400, "invalid_request") }
        if Self.header(request, "Authorization") != nil { return Self.oauthError(400, "invalid_request") }
        guard Set(fields.keys) == ["grant_type", "code", "client_id", "redirect_uri", "code_verifier"] else {
            return Self.oauthError(400, "invalid_request")
        }
        guard fields["grant_type"] == "authorization_code" else { return Self.oauthError(400, "unsupported_grant_type") }
        guard let grant = redeemCode(&s, fields["code"], at: .google) else { return Self.oauthError(400, "invalid_grant") }
        guard fields["client_id"] == grant.clientID else { return Self.oauthError(401, "invalid_client") }
        guard fields["redirect_uri"] == grant.redirectURI else { return Self.oauthError(400, "redirect_uri_mismatch") }
        guard let challenge = grant.codeChallenge, PKCE.challenge(fields["code_verifier"]!) == challenge else {
            return Self.oauthError(400, "invalid_grant")
        }
        var body: [String: JSONValue] = ["access_token": .string(grant.accessToken), "expires_in": .number(3599),
                                         "scope": .string("openid https://www.googleapis.com/auth/userinfo.email"),
                                         "token_type": .string("Bearer")]
        if let idToken = grant.idToken { body["id_token"] = .string(idToken) }
        return Self.json(200, body)
    }

    // MARK: Apple

    private func appleToken(_ s: inout State, _ request: OutboundRequest) -> OutboundResponse {
        let fields: [String: String]
        switch Self.formPost(request) {
        case .refused(let refusal): return refusal
        case .fields(let f): fields = f
        }
        // A native code has no redirect_uri bound to it; Apple refuses the exchange if one is sent.
        if fields["redirect_uri"] != nil { return Self.oauthError(400, "invalid_request") }
        let required: Set<String> = ["grant_type", "code", "client_id", "client_secret"]
        guard Set(fields.keys).subtracting(["code_verifier"]) == required else { return Self.oauthError(400, "invalid_request") }
        guard fields["grant_type"] == "authorization_code" else { return Self.oauthError(400, "unsupported_grant_type") }
        guard let clientID = fields["client_id"], verifyAppleClientSecret(fields["client_secret"]!, clientID: clientID) else {
            return Self.oauthError(400, "invalid_client")
        }
        guard let grant = redeemCode(&s, fields["code"], at: .apple) else { return Self.oauthError(400, "invalid_grant") }
        guard clientID == grant.clientID, grant.redirectURI == nil else { return Self.oauthError(400, "invalid_grant") }
        guard pkceHolds(grant, fields["code_verifier"]) else { return Self.oauthError(400, "invalid_grant") }
        var body: [String: JSONValue] = ["access_token": .string(grant.accessToken), "token_type": .string("Bearer"),
                                         "expires_in": .number(3600), "refresh_token": .string(randomToken("rt-"))]
        if let idToken = grant.idToken { body["id_token"] = .string(idToken) }
        return Self.json(200, body)
    }

    /// Apple's check of the client secret: ES256 by the team's key with its `kid`, iss = team,
    /// sub = client_id, aud = https://appleid.apple.com, not expired, not from the future.
    func verifyAppleClientSecret(_ secret: String, clientID: String) -> Bool {
        let teamKey = JWKSet(keys: [JWK(keyID: apple.keyID, algorithm: "ES256", material: .p256(apple.key.publicKey))])
        let verifier = JWTVerifier(allowedAlgorithms: [.es256], issuers: [apple.teamID],
                                   audience: AppleClientSecret.audience, leeway: 0)
        guard let jwt = try? JWT(compact: secret), jwt.header.keyID == apple.keyID,
              let claims = try? verifier.verify(jwt, keys: teamKey, now: clock.now) else { return false }
        return claims.subject == clientID && claims.expiresAt - claims.issuedAt <= AppleClientSecret.maximumLifetime
    }

    // MARK: Facebook

    private func facebookToken(_ s: inout State, _ request: OutboundRequest) -> OutboundResponse {
        let fields: [String: String]
        switch Self.formPost(request) {
        case .refused(let refusal): return refusal
        case .fields(let f): fields = f
        }
        guard Set(fields.keys).subtracting(["code_verifier"]) == ["client_id", "client_secret", "redirect_uri", "code"] else {
            return Self.graphError(400, "OAuthException", code: 100)
        }
        guard fields["client_id"] == facebook.appID, fields["client_secret"] == facebook.secret else {
            return Self.graphError(400, "OAuthException", code: 1)
        }
        guard let grant = redeemCode(&s, fields["code"], at: .facebook) else {
            return Self.graphError(400, "OAuthException", code: 100, subcode: 36009)
        }
        guard grant.clientID == facebook.appID, fields["redirect_uri"] == grant.redirectURI else {
            return Self.graphError(400, "OAuthException", code: 100, subcode: 36008)
        }
        guard pkceHolds(grant, fields["code_verifier"]) else { return Self.graphError(400, "OAuthException", code: 100) }
        s.facebookTokens[grant.accessToken] = grant.facebookUser ?? FacebookUser(appID: facebook.appID)
        var body: [String: JSONValue] = ["access_token": .string(grant.accessToken), "token_type": .string("bearer"),
                                         "expires_in": .number(5_183_944)]
        if let idToken = grant.idToken { body["id_token"] = .string(idToken) }
        return Self.json(200, body)
    }

    private func facebookDebugToken(_ s: inout State, _ request: OutboundRequest) -> OutboundResponse {
        guard request.method == "GET", let query = Self.query(request.url),
              Set(query.keys) == ["input_token", "access_token"] else {
            return Self.graphError(400, "OAuthException", code: 100)
        }
        guard query["access_token"] == "\(facebook.appID)|\(facebook.secret)" else {
            return Self.graphError(400, "OAuthException", code: 190)
        }
        guard let user = s.facebookTokens[query["input_token"]!] else {
            return Self.json(200, ["data": .object(["is_valid": .bool(false),
                                                     "error": .object(["code": .number(190), "message": .string("Invalid OAuth access token.")])])])
        }
        let now = clock.now
        return Self.json(200, ["data": .object([
            "app_id": .string(user.appID), "type": .string("USER"), "application": .string("Test App"),
            "data_access_expires_at": .number(now + 7_776_000), "expires_at": .number(now + 5_183_944),
            "is_valid": .bool(user.isValid), "issued_at": .number(now),
            "scopes": .array([.string("email"), .string("public_profile")]), "user_id": .string(user.id),
        ])])
    }

    private func facebookMe(_ s: inout State, _ request: OutboundRequest) -> OutboundResponse {
        guard request.method == "GET", let query = Self.query(request.url),
              Set(query.keys) == ["fields", "access_token", "appsecret_proof"] else {
            return Self.graphError(400, "OAuthException", code: 100)
        }
        guard let token = query["access_token"], let user = s.facebookTokens[token], user.isValid else {
            return Self.graphError(400, "OAuthException", code: 190)
        }
        // The proof binds the call to *our* app secret, computed here independently of the provider.
        let proof = hexString(HMACSHA256.authenticationCode(for: Array(token.utf8), key: Array(facebook.secret.utf8)))
        guard query["appsecret_proof"] == proof else { return Self.graphError(400, "GraphMethodException", code: 100) }
        guard query["fields"] == "id,name,email" else { return Self.graphError(400, "OAuthException", code: 100) }
        var body: [String: JSONValue] = ["id": .string(user.id), "name": .string(user.name)]
        if let email = user.email { body["email"] = .string(email) }
        return Self.json(200, body)
    }

    // MARK: Generic OIDC

    private func oidcDiscovery(_ s: State) -> OutboundResponse {
        Self.json(200, [
            "issuer": .string(s.discoveryIssuer),
            "authorization_endpoint": .string("https://login.example.org/oauth2/authorize"),
            "token_endpoint": .string(URLs.oidcToken),
            "jwks_uri": .string(URLs.oidcJWKS),
            "response_types_supported": .array([.string("code")]),
            "subject_types_supported": .array([.string("public")]),
            "id_token_signing_alg_values_supported": .array([.string("RS256"), .string("ES256")]),
            "token_endpoint_auth_methods_supported": .array([.string("client_secret_basic"), .string("client_secret_post"),
                                                             .string("none")]),
            "code_challenge_methods_supported": .array([.string("S256")]),
        ])
    }

    private func oidcToken(_ s: inout State, _ request: OutboundRequest) -> OutboundResponse {
        let fields: [String: String]
        switch Self.formPost(request) {
        case .refused(let refusal): return refusal
        case .fields(let f): fields = f
        }
        // Client authentication (RFC 6749 §2.3): exactly one method, the registered one.
        let basic = Self.header(request, "Authorization").map(Self.decodeBasic)
        let clientID: String
        if let basic {
            guard let (id, secret) = basic, fields["client_secret"] == nil,
                  fields["client_id"] == nil || fields["client_id"] == id,
                  let client = s.oidcClients[id], client.method == .basic, client.secret == secret else {
                return Self.oauthError(401, "invalid_client")
            }
            clientID = id
        } else {
            guard let id = fields["client_id"], let client = s.oidcClients[id] else { return Self.oauthError(401, "invalid_client") }
            if let secret = client.secret {
                guard client.method == .post, fields["client_secret"] == secret else { return Self.oauthError(401, "invalid_client") }
            } else if fields["client_secret"] != nil {
                return Self.oauthError(401, "invalid_client")
            }
            clientID = id
        }
        let isPublic = s.oidcClients[clientID]?.secret == nil
        var expected: Set<String> = ["grant_type", "code", "redirect_uri"]
        if basic == nil { expected.insert("client_id") }
        if fields["client_id"] != nil { expected.insert("client_id") }
        if fields["client_secret"] != nil { expected.insert("client_secret") }
        if fields["code_verifier"] != nil || isPublic { expected.insert("code_verifier") }
        guard Set(fields.keys) == expected else { return Self.oauthError(400, "invalid_request") }
        guard fields["grant_type"] == "authorization_code" else { return Self.oauthError(400, "unsupported_grant_type") }
        guard let grant = redeemCode(&s, fields["code"], at: .oidc) else { return Self.oauthError(400, "invalid_grant") }
        guard grant.clientID == clientID, fields["redirect_uri"] == grant.redirectURI else {
            return Self.oauthError(400, "invalid_grant")
        }
        if isPublic && grant.codeChallenge == nil { return Self.oauthError(400, "invalid_request") }
        guard pkceHolds(grant, fields["code_verifier"]) else { return Self.oauthError(400, "invalid_grant") }
        var body: [String: JSONValue] = ["access_token": .string(grant.accessToken), "token_type": .string("Bearer"),
                                         "expires_in": .string("3600")]
        if let idToken = grant.idToken { body["id_token"] = .string(idToken) }
        return Self.json(200, body)
    }

    // MARK: Shared checks

    /// The code's grant, consumed: a second attempt with the same code fails whatever it sends.
    private func redeemCode(_ s: inout State, _ code: String?, at endpoint: Endpoint) -> Grant? {
        guard let code, let (issuedAt, grant) = s.grants[code], issuedAt == endpoint,
              s.usedCodes.insert(code).inserted else { return nil }
        return grant
    }

    /// With a challenge on record the verifier must be sent and match; without one none may be sent.
    private func pkceHolds(_ grant: Grant, _ verifier: String?) -> Bool {
        switch (grant.codeChallenge, verifier) {
        case (nil, nil): return true
        case (let challenge?, let verifier?): return PKCE.challenge(verifier) == challenge
        default: return false
        }
    }

    /// A token request as every IdP wants it: POST, form-encoded, never marked retryable, no
    /// repeated fields.
    private enum Form {
        case fields([String: String])
        case refused(OutboundResponse)
    }

    private static func formPost(_ request: OutboundRequest) -> Form {
        guard request.method == "POST" else { return .refused(status(405)) }
        guard header(request, "Content-Type") == "application/x-www-form-urlencoded" else {
            return .refused(oauthError(400, "invalid_request"))
        }
        // Not something a real IdP can see, but a token request marked safe to resend would
        // let a transport retry burn (or double-spend) the code.
        guard !request.idempotent else { return .refused(oauthError(400, "fake_violation_token_request_retryable")) }
        guard Self.withoutQuery(request.url) == request.url else {
            return .refused(oauthError(400, "fake_violation_query_on_token_request"))
        }
        guard let fields = decodeForm(String(decoding: request.body, as: UTF8.self)) else {
            return .refused(oauthError(400, "invalid_request"))
        }
        return .fields(fields)
    }

    /// `application/x-www-form-urlencoded` → fields; nil when malformed or a name repeats.
    static func decodeForm(_ text: String) -> [String: String]? {
        var fields: [String: String] = [:]
        guard !text.isEmpty else { return [:] }
        for pair in text.split(separator: "&", omittingEmptySubsequences: false) {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard parts.count == 2, let name = percentDecode(parts[0]), let value = percentDecode(parts[1]),
                  fields[name] == nil else { return nil }
            fields[name] = value
        }
        return fields
    }

    static func percentDecode(_ text: Substring) -> String? {
        var out: [UInt8] = []
        var bytes = Array(text.utf8)[...]
        while let b = bytes.popFirst() {
            switch b {
            case UInt8(ascii: "+"): out.append(UInt8(ascii: " "))
            case UInt8(ascii: "%"):
                guard bytes.count >= 2, let v = UInt8(String(decoding: bytes.prefix(2), as: UTF8.self), radix: 16) else { return nil }
                out.append(v)
                bytes = bytes.dropFirst(2)
            default: out.append(b)
            }
        }
        return String(validating: out, as: UTF8.self)
    }

    static func query(_ url: String) -> [String: String]? {
        guard let q = url.firstIndex(of: "?") else { return nil }
        return decodeForm(String(url[url.index(after: q)...]))
    }

    /// RFC 6749 §2.3.1: Base64 of `urlencoded(id):urlencoded(secret)`.
    static func decodeBasic(_ header: String) -> (String, String)? {
        guard header.hasPrefix("Basic "), let raw = Base64.decode(String(header.dropFirst(6)), .standard),
              let text = String(validating: raw, as: UTF8.self),
              let colon = text.firstIndex(of: ":"),
              let id = percentDecode(text[..<colon]), let secret = percentDecode(text[text.index(after: colon)...]) else {
            return nil
        }
        return (id, secret)
    }

    /// A request header's first value (name case-insensitive).
    static func header(_ request: OutboundRequest, _ name: String) -> String? {
        request.headers.first { $0.name.lowercased() == name.lowercased() }?.value
    }

    static func withoutQuery(_ url: String) -> String {
        url.firstIndex(of: "?").map { String(url[..<$0]) } ?? url
    }

    // MARK: Answers

    static func status(_ code: Int) -> OutboundResponse { OutboundResponse(status: code) }

    static func json(_ status: Int, _ object: [String: JSONValue]) -> OutboundResponse {
        OutboundResponse(status: status, headers: [("Content-Type", "application/json; charset=utf-8"),
                                                   ("Cache-Control", "no-store")],
                         body: JSONValue.object(object).serialized())
    }

    static func oauthError(_ status: Int, _ code: String) -> OutboundResponse {
        json(status, ["error": .string(code), "error_description": .string("refused by the fake IdP")])
    }

    static func graphError(_ status: Int, _ type: String, code: Int64, subcode: Int64? = nil) -> OutboundResponse {
        var error: [String: JSONValue] = ["message": .string("refused by the fake Graph API"), "type": .string(type),
                                          "code": .number(code), "fbtrace_id": .string("AbCdEf")]
        if let subcode { error["error_subcode"] = .number(subcode) }
        return json(status, ["error": .object(error)])
    }
}

/// A failure's texts must hold none of `secrets` (codes, verifiers, tokens, app secrets).
func expectNothingSecret(in failure: CallbackFailure?, _ secrets: [String],
                         sourceLocation: SourceLocation = #_sourceLocation) {
    guard let failure else { return }
    for secret in secrets where !secret.isEmpty {
        #expect(!failure.logDetail.contains(secret), "logDetail leaks a secret: \(failure.logDetail)",
                sourceLocation: sourceLocation)
        #expect(!failure.userMessage.contains(secret), sourceLocation: sourceLocation)
    }
}
