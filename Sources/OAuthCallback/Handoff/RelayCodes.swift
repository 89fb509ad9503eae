import ProxyCore
import Synchronization

/// One-time relay codes (relay mode): after a verified native exchange, the proxy hands the app
/// a code of its own instead of the IdP's, and answers it at the relay token endpoint with the
/// tokens it already holds.
///
/// A relay code is 256 bits from the CSPRNG with a recognisable prefix, stored under a hash of
/// itself (a store dump reveals no redeemable code), single-use (get-and-delete), and lives at
/// most 60 s. It never reaches the browser: the proxy itself forwards the app's callback.
public final class RelayCodes: Sendable {
    /// Relay codes start with this, so the token endpoint can tell them from the IdP's codes
    /// without sending ours to the IdP (an expired relay code is refused here, not forwarded).
    public static let prefix = "cpr1."

    private let store: any Store
    private let ttlSeconds: Int64
    /// What tells an unredeemed code's two causes apart (`Handoff.watchRedemption`).
    private let activity = Mutex(Activity())

    struct Activity {
        /// Requests that reached the relay token endpoint (any code, any outcome).
        var tokenRequests: UInt64 = 0
        /// Request id of each forwarded callback whose relay code is watched → the status the
        /// app answered it with (0: no answer yet).
        var appAnswers: [String: Int] = [:]
    }

    public init(store: any Store, ttlSeconds: Int64) {
        self.store = store
        self.ttlSeconds = ttlSeconds
    }

    public static func isRelayCode(_ code: String) -> Bool { code.hasPrefix(prefix) }

    /// A request reached the relay token endpoint.
    func noteTokenRequest() { activity.withLock { $0.tokenRequests &+= 1 } }

    var tokenRequests: UInt64 { activity.withLock { $0.tokenRequests } }

    /// The forwarded callback `requestID` carries a watched code: remember how the app answers it.
    func watch(requestID: String) {
        activity.withLock { a in
            // Bounded: a code is watched for at most 60 s; past this many at once, forget them all.
            if a.appAnswers.count >= 100_000 { a.appAnswers.removeAll() }
            a.appAnswers[requestID] = 0
        }
    }

    /// The app answered the forwarded callback `requestID` with `status` (ignored unless watched).
    func noteAppAnswer(requestID: String, status: Int) {
        activity.withLock { a in if a.appAnswers[requestID] != nil { a.appAnswers[requestID] = status } }
    }

    /// How the app answered `requestID`, forgetting it.
    func endWatch(requestID: String) -> Int? {
        activity.withLock { a in a.appAnswers.removeValue(forKey: requestID).flatMap { $0 == 0 ? nil : $0 } }
    }

    static func key(_ code: String) -> String {
        "relay:" + ReplayGuard.hex(SHA256.hash(code))
    }

    /// Mints a code for `identity`, storing the token response the app will receive.
    public func mint(_ identity: VerifiedIdentity, provider: ProviderSettings, on loop: EventLoop,
                     _ completion: @escaping (Result<String, CallbackFailure>) -> Void) {
        let random: [UInt8]
        do {
            random = try SecureRandom.bytes(32)
        } catch {
            completion(.failure(CallbackFailure(.internal, code: "server_error", userMessage: Messages.internalError,
                                                logDetail: "relay code: no randomness: \(error)")))
            return
        }
        let code = Self.prefix + Base64URL.encode(random)
        let record = RelayRecord(provider: provider.name,
                                 body: Self.tokenBody(identity.tokens, omitIDToken: provider.relayOmitIDToken,
                                                      omitRefreshToken: provider.relayOmitRefreshToken))
        store.setIfAbsent(key: Self.key(code), value: record.encoded(), ttlSeconds: ttlSeconds, on: loop) { result in
            switch result {
            case .success(true):
                completion(.success(code))
            case .success(false):
                // 256 random bits do not collide; if they did, refusing is the only safe answer.
                completion(.failure(CallbackFailure(.internal, code: "server_error", userMessage: Messages.internalError,
                                                    logDetail: "relay code collision")))
            case .failure(let e):
                completion(.failure(CallbackFailure(.internal, code: ReplayGuard.storeUnavailableCode, userMessage: Messages.unavailable,
                                                    logDetail: "relay code not stored: \(e)", retryable: true)))
            }
        }
    }

    /// Redeems a code once: the stored record, or nil if unknown, used or expired.
    public func redeem(_ code: String, on loop: EventLoop, _ completion: @escaping (Result<RelayRecord?, StoreError>) -> Void) {
        store.getAndDelete(key: Self.key(code), on: loop) { result in
            completion(result.map { $0.flatMap(RelayRecord.init(encoded:)) })
        }
    }

    /// The record a code stands for, leaving it in place (the relay token endpoint reads it to
    /// learn the code's provider before it decides whether to consume it).
    public func peek(_ code: String, on loop: EventLoop, _ completion: @escaping (Result<RelayRecord?, StoreError>) -> Void) {
        store.get(key: Self.key(code), on: loop) { result in
            completion(result.map { $0.flatMap(RelayRecord.init(encoded:)) })
        }
    }

    /// Whether a code is still waiting (it was never redeemed, if this is asked after its TTL).
    func isPending(_ code: String, on loop: EventLoop, _ completion: @escaping (Bool) -> Void) {
        store.get(key: Self.key(code), on: loop) { result in
            if case .success(let v?) = result, !v.isEmpty { completion(true) } else { completion(false) }
        }
    }

    /// The token response as the app will see it: the provider's own body, minus what the
    /// provider's settings say to leave out.
    static func tokenBody(_ tokens: TokenResponse, omitIDToken: Bool, omitRefreshToken: Bool) -> [UInt8] {
        if !omitIDToken && !omitRefreshToken, !tokens.raw.isEmpty,
           (try? JSONParser.parse(tokens.raw))?.objectValue != nil {
            return tokens.raw
        }
        var members: [String: JSONValue] = [:]
        if let parsed = try? JSONParser.parse(tokens.raw), let object = parsed.objectValue { members = object }
        members["access_token"] = .string(tokens.accessToken)
        members["token_type"] = .string(tokens.tokenType)
        if members["expires_in"] == nil, let e = tokens.expiresIn { members["expires_in"] = .number(String(e)) }
        if members["id_token"] == nil, let t = tokens.idToken { members["id_token"] = .string(t) }
        if omitIDToken { members["id_token"] = nil }
        if omitRefreshToken { members["refresh_token"] = nil }
        return JSONValue.object(members).serialized()
    }
}

/// What a relay code stands for: the provider it was minted for and the exact token body.
public struct RelayRecord: Sendable, Equatable {
    public let provider: String
    public let body: [UInt8]

    /// `provider NUL body`: provider names are tokens, so the first NUL separates.
    func encoded() -> [UInt8] { Array(provider.utf8) + [0] + body }

    init(provider: String, body: [UInt8]) {
        self.provider = provider
        self.body = body
    }

    init?(encoded: [UInt8]) {
        guard let nul = encoded.firstIndex(of: 0) else { return nil }
        provider = String(decoding: encoded[..<nul], as: UTF8.self)
        body = Array(encoded[(nul + 1)...])
    }
}
