/// The encrypted session cookie of `session` hand-off mode.
///
/// A value is `base64url(version ‖ AES-256-GCM box)`; the box's plaintext is
/// `format ‖ payload`, the payload a compact JSON object (raw-deflated when the JSON is
/// larger than `compressionThreshold` and deflating makes it smaller). The associated data is
/// `version ‖ cookie name`, so a value cannot be replayed under another cookie (the state
/// cookie, say) or read as another format version.
///
/// Keys rotate: values are sealed with the first key and opened with any of them, so a new
/// key goes first and the old one stays listed for one session lifetime.
///
/// Values longer than `maximumChunkLength` are split across `name_0`, `name_1`, … (see
/// `SessionCookie+Chunking.swift`), like oauth2-proxy, since browsers drop cookies above 4 KB.
public struct SessionCookie: Sendable {
    /// The format version byte; a value with any other is refused.
    static let version: UInt8 = 1
    /// The JSON payload size from which deflating is tried.
    public static let compressionThreshold = 1024
    /// The largest payload a compressed value may inflate to.
    static let maximumPayloadSize = 64 * 1024

    private enum Format: UInt8 {
        case json = 0
        case deflatedJSON = 1
        /// Server-side sessions: only the random session id; the record is in the store.
        case reference = 2
    }

    /// A server-side session id's length in bytes (256 random bits).
    public static let referenceLength = 32

    /// The cookie's full name, `__Host-` prefix included when it applies.
    public let name: String
    public let secure: Bool
    /// The `Domain` attribute; the name is then `__Secure-` prefixed rather than `__Host-`
    /// (a `__Host-` cookie must not carry `Domain`).
    public let domain: String?
    private let sealers: [AES256GCM]

    /// - Parameters:
    ///   - name: the configured base name (`_oauth_session`).
    ///   - keys: 32-byte keys, newest first; at least one.
    ///   - secure: mark cookies `Secure` (the site is served over TLS), and prefix the name:
    ///     `__Host-<name>` without `domain` — the browser only accepts it with `Secure`,
    ///     `Path=/` and no `Domain`, so no sibling subdomain can set or shadow it — and
    ///     `__Secure-<name>` with one (shared with the domain's hosts, but still only ever set
    ///     over TLS).
    ///   - domain: the `Domain` attribute (`cookie_domain`): one sign-in for every host under it.
    public init(name: String = "_oauth_session", keys: [[UInt8]], secure: Bool = true,
                domain: String? = nil) throws(CryptoError) {
        guard !keys.isEmpty else { throw CryptoError(.invalidKey, "session cookie needs at least one key") }
        var sealers: [AES256GCM] = []
        for key in keys { sealers.append(try AES256GCM(key: key)) }
        self.sealers = sealers
        self.secure = secure
        self.name = (secure ? (domain == nil ? "__Host-" : "__Secure-") : "") + name
        self.domain = domain
    }

    // MARK: Sealing and opening one value

    /// The cookie value for `session`, before any splitting.
    public func seal(_ session: ProxySession) throws(CryptoError) -> String {
        // A refresh token never leaves the store (configuration refuses refresh with cookie
        // sessions; this makes sure of it).
        var session = session
        session.refreshToken = nil
        session.refreshClient = nil
        let json = Self.payload(session).serialized()
        var plaintext = [Format.json.rawValue] + json
        if json.count > Self.compressionThreshold, let deflated = RawDeflate.compress(json), deflated.count < json.count {
            plaintext = [Format.deflatedJSON.rawValue] + deflated
        }
        return try sealed(plaintext)
    }

    /// The cookie value for a server-side session: its id, sealed like a session (so it is
    /// neither readable nor forgeable, and rotates with the keys).
    public func sealReference(_ id: [UInt8]) throws(CryptoError) -> String {
        guard id.count == Self.referenceLength else { throw CryptoError(.invalidInput, "session id must be 32 bytes") }
        return try sealed([Format.reference.rawValue] + id)
    }

    private func sealed(_ plaintext: [UInt8]) throws(CryptoError) -> String {
        let box = try sealers[0].seal(plaintext, authenticating: associatedData)
        return Base64URL.encode([Self.version] + box)
    }

    /// The session in `value`, or nil when it is malformed, altered, sealed for another
    /// cookie, sealed with a key no longer listed, expired at `now` (seconds since epoch), or
    /// a server-side session's reference.
    public func open(_ value: String, now: Int64) -> ProxySession? {
        guard case .session(let session)? = content(value, now: now) else { return nil }
        return session
    }

    /// The server-side session id in `value`, or nil (malformed, altered, or a whole session).
    public func openReference(_ value: String) -> [UInt8]? {
        guard case .reference(let id)? = content(value, now: 0) else { return nil }
        return id
    }

    private enum Content {
        case session(ProxySession)
        case reference([UInt8])
    }

    private func content(_ value: String, now: Int64) -> Content? {
        guard let bytes = Base64URL.decode(value), bytes.count > 1 + AES256GCM.overhead,
              bytes[0] == Self.version else { return nil }
        let box = Array(bytes[1...])
        guard let plaintext = openWithAnyKey(box), let format = plaintext.first.flatMap(Format.init(rawValue:)) else {
            return nil
        }
        let json: [UInt8]
        switch format {
        case .reference:
            return plaintext.count == 1 + Self.referenceLength ? .reference(Array(plaintext[1...])) : nil
        case .json: json = Array(plaintext[1...])
        case .deflatedJSON:
            guard let inflated = RawDeflate.decompress(Array(plaintext[1...]), limit: Self.maximumPayloadSize) else {
                return nil
            }
            json = inflated
        }
        guard let value = try? JSONParser.parse(json), let session = Self.session(from: value),
              now < session.expiresAt else { return nil }
        return .session(session)
    }

    private var associatedData: [UInt8] { [Self.version] + Array(name.utf8) }

    private func openWithAnyKey(_ box: [UInt8]) -> [UInt8]? {
        let aad = associatedData
        for sealer in sealers {
            if let plaintext = try? sealer.open(box, authenticating: aad) { return plaintext }
        }
        return nil
    }

    // MARK: Payload

    /// Short member names keep the cookie small: every byte is sent on every request.
    private enum Member {
        static let provider = "p", subject = "s", email = "e", emailVerified = "ev", name = "n"
        static let preferredUsername = "u", groups = "g", accessToken = "at", issuedAt = "iat", expiresAt = "exp"
        static let hostedDomain = "hd", idToken = "it", seenAt = "sa", ruleClaims = "cl"
        static let refreshToken = "rt", refreshClient = "rc", refreshedAt = "ra", refreshFailedAt = "rf"
    }

    static func payload(_ session: ProxySession) -> JSONValue {
        var members: [String: JSONValue] = [
            Member.provider: .string(session.provider),
            Member.subject: .string(session.subject),
            Member.emailVerified: .bool(session.emailVerified),
            Member.issuedAt: .number(session.issuedAt),
            Member.expiresAt: .number(session.expiresAt),
        ]
        if let email = session.email { members[Member.email] = .string(email) }
        if let name = session.name { members[Member.name] = .string(name) }
        if let username = session.preferredUsername { members[Member.preferredUsername] = .string(username) }
        if !session.groups.isEmpty { members[Member.groups] = .array(session.groups.map(JSONValue.string)) }
        if let token = session.accessToken { members[Member.accessToken] = .string(token) }
        if let hd = session.hostedDomain { members[Member.hostedDomain] = .string(hd) }
        if let t = session.idToken { members[Member.idToken] = .string(t) }
        if let s = session.seenAt { members[Member.seenAt] = .number(s) }
        if let t = session.refreshToken { members[Member.refreshToken] = .string(t) }
        if let c = session.refreshClient { members[Member.refreshClient] = .string(c) }
        if let r = session.refreshedAt { members[Member.refreshedAt] = .number(r) }
        if let f = session.refreshFailedAt { members[Member.refreshFailedAt] = .number(f) }
        if !session.ruleClaims.isEmpty { members[Member.ruleClaims] = .object(session.ruleClaims) }
        return .object(members)
    }

    static func session(from payload: JSONValue) -> ProxySession? {
        guard let provider = payload[Member.provider]?.stringValue,
              let subject = payload[Member.subject]?.stringValue,
              let emailVerified = payload[Member.emailVerified]?.boolValue,
              let issuedAt = payload[Member.issuedAt]?.int64Value,
              let expiresAt = payload[Member.expiresAt]?.int64Value else { return nil }
        func optionalString(_ key: String) -> String?? {
            guard let value = payload[key] else { return .some(nil) }
            return value.stringValue.map { .some($0) } ?? nil
        }
        guard let email = optionalString(Member.email), let name = optionalString(Member.name),
              let username = optionalString(Member.preferredUsername),
              let accessToken = optionalString(Member.accessToken),
              let hostedDomain = optionalString(Member.hostedDomain),
              let idToken = optionalString(Member.idToken),
              let refreshToken = optionalString(Member.refreshToken),
              let refreshClient = optionalString(Member.refreshClient) else { return nil }
        var groups: [String] = []
        if let list = payload[Member.groups] {
            guard let elements = list.arrayValue else { return nil }
            for element in elements {
                guard let group = element.stringValue else { return nil }
                groups.append(group)
            }
        }
        var session = ProxySession(provider: provider, subject: subject, email: email, emailVerified: emailVerified,
                            name: name, preferredUsername: username, groups: groups, hostedDomain: hostedDomain,
                            accessToken: accessToken,
                            issuedAt: issuedAt, expiresAt: expiresAt)
        session.idToken = idToken
        if let seen = payload[Member.seenAt] {
            guard let value = seen.int64Value else { return nil }
            session.seenAt = value
        }
        session.refreshToken = refreshToken
        session.refreshClient = refreshClient
        if let claims = payload[Member.ruleClaims] {
            guard let object = claims.objectValue else { return nil }
            session.ruleClaims = object
        }
        for (member, path) in [(Member.refreshedAt, \ProxySession.refreshedAt), (Member.refreshFailedAt, \.refreshFailedAt)] {
            guard let value = payload[member] else { continue }
            guard let seconds = value.int64Value else { return nil }
            session[keyPath: path] = seconds
        }
        return session
    }
}
