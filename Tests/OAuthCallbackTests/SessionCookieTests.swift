import Testing
@testable import OAuthCallback

@Suite struct SessionCookieTests {
    static let key1 = [UInt8](repeating: 0x11, count: 32)
    static let key2 = [UInt8](repeating: 0x22, count: 32)
    static let now: Int64 = 1_700_000_000

    static let session = ProxySession(
        provider: "google", subject: "1234567890", email: "jane@example.com", emailVerified: true,
        name: "Jane Doe", preferredUsername: "jane", groups: ["admins", "staff"], hostedDomain: "example.com", accessToken: "ya29.short",
        issuedAt: now, expiresAt: now + 3600)

    @Test func theIDTokenKeptForSignOutRoundTrips() throws {
        var s = Self.session
        s.idToken = "eyJhbGciOiJSUzI1NiJ9.e30.sig"
        let back = SessionCookie.session(from: SessionCookie.payload(s))
        #expect(back == s)
        #expect(SessionCookie.session(from: SessionCookie.payload(Self.session))?.idToken == nil)
        var seen = Self.session
        seen.seenAt = Self.now - 30
        #expect(SessionCookie.session(from: SessionCookie.payload(seen)) == seen)
    }

    @Test func theClaimsTheRulesReadRoundTrip() throws {
        var s = Self.session
        s.ruleClaims = ["department": .string("eng"), "realm_access.roles": .array([.string("ops")]), "level": .number("3")]
        #expect(SessionCookie.session(from: SessionCookie.payload(s)) == s)
        // Not an object where one belongs: the whole payload is refused, as for any other member.
        guard case .object(var members) = SessionCookie.payload(s) else { Issue.record("not an object"); return }
        members["cl"] = .array([])
        #expect(SessionCookie.session(from: .object(members)) == nil)
    }

    /// A session whose payload is large and compressible (a long access token, many groups)
    /// and still needs several cookies after compression (random token bytes).
    static func largeSession() throws -> ProxySession {
        var session = Self.session
        session.groups = (0..<200).map { "group-number-\($0)" }
        session.accessToken = Base64URL.encode(try SecureRandom.bytes(6000))
        return session
    }

    func cookie(keys: [[UInt8]] = [key1], name: String = "_oauth_session") throws -> SessionCookie {
        try SessionCookie(name: name, keys: keys)
    }

    // MARK: Sealing

    @Test func aSessionRoundTrips() throws {
        let cookie = try cookie()
        #expect(cookie.open(try cookie.seal(Self.session), now: Self.now) == Self.session)
    }

    @Test func aMinimalSessionRoundTrips() throws {
        let cookie = try cookie()
        let minimal = ProxySession(provider: "apple", subject: "001.abc", issuedAt: 0, expiresAt: Self.now + 1)
        #expect(cookie.open(try cookie.seal(minimal), now: Self.now) == minimal)
    }

    @Test func theValueIsVersionedBase64URLAndRevealsNothing() throws {
        let value = try cookie().seal(Self.session)
        let bytes = try #require(Base64URL.decode(value))
        #expect(bytes[0] == 1)
        #expect(!value.contains("jane") && !value.contains("ya29"))
        #expect(value.utf8.allSatisfy { $0 != UInt8(ascii: "=") && $0 != UInt8(ascii: ".") })
    }

    @Test func everyAlteredByteIsRefused() throws {
        let cookie = try cookie()
        let bytes = try #require(Base64URL.decode(try cookie.seal(Self.session)))
        for position in bytes.indices {
            var altered = bytes
            altered[position] ^= 0x01
            #expect(cookie.open(Base64URL.encode(altered), now: Self.now) == nil, "byte \(position)")
        }
        #expect(cookie.open(Base64URL.encode(Array(bytes.dropLast())), now: Self.now) == nil)
        #expect(cookie.open(Base64URL.encode(bytes + [0]), now: Self.now) == nil)
    }

    @Test(arguments: ["", "x", "AQ", "not base64!", "=="])
    func garbageIsRefused(value: String) throws {
        #expect(try cookie().open(value, now: Self.now) == nil)
    }

    @Test func aValueMovedToAnotherCookieIsRefused() throws {
        let value = try cookie(name: "_oauth_session").seal(Self.session)
        #expect(try cookie(name: "_oauth_state").open(value, now: Self.now) == nil)
        let insecure = try SessionCookie(name: "_oauth_session", keys: [Self.key1], secure: false)
        #expect(insecure.open(value, now: Self.now) == nil, "__Host-_oauth_session vs _oauth_session")
    }

    @Test func anOldKeyStillOpensAndTheNewKeySeals() throws {
        let before = try cookie(keys: [Self.key1])
        let after = try cookie(keys: [Self.key2, Self.key1])
        let oldValue = try before.seal(Self.session)
        #expect(after.open(oldValue, now: Self.now) == Self.session)
        let newValue = try after.seal(Self.session)
        #expect(before.open(newValue, now: Self.now) == nil)
        #expect(try cookie(keys: [Self.key2]).open(newValue, now: Self.now) == Self.session)
    }

    @Test func anUnknownKeyDoesNotOpen() throws {
        let value = try cookie(keys: [Self.key1]).seal(Self.session)
        #expect(try cookie(keys: [Self.key2]).open(value, now: Self.now) == nil)
    }

    @Test func keysMustBe32BytesAndAtLeastOne() {
        #expect(throws: CryptoError.self) { try SessionCookie(keys: []) }
        #expect(throws: CryptoError.self) { try SessionCookie(keys: [Self.key1, [1, 2, 3]]) }
    }

    @Test func anExpiredSessionIsRefused() throws {
        let cookie = try cookie()
        let value = try cookie.seal(Self.session)
        #expect(cookie.open(value, now: Self.session.expiresAt - 1) != nil)
        #expect(cookie.open(value, now: Self.session.expiresAt) == nil)
        #expect(cookie.open(value, now: Self.session.expiresAt + 86400) == nil)
    }

    @Test func aLargePayloadIsCompressed() throws {
        var session = Self.session
        session.groups = (0..<200).map { "group-number-\($0)" }
        let cookie = try cookie()
        let value = try cookie.seal(session)
        let json = SessionCookie.payload(session).serialized()
        #expect(json.count > 3 * SessionCookie.compressionThreshold)
        #expect(value.utf8.count < json.count / 2)
        #expect(cookie.open(value, now: Self.now) == session)
        let plaintext = try AES256GCM(key: Self.key1).open(Array(try #require(Base64URL.decode(value)).dropFirst()),
                                                           authenticating: [1] + Array(cookie.name.utf8))
        #expect(plaintext.first == 1, "deflated format")
    }

    @Test func aSmallPayloadIsNotCompressed() throws {
        let cookie = try cookie()
        let value = try cookie.seal(Self.session)
        let plaintext = try AES256GCM(key: Self.key1).open(Array(try #require(Base64URL.decode(value)).dropFirst()),
                                                           authenticating: [1] + Array(cookie.name.utf8))
        #expect(plaintext.first == 0)
    }

    @Test func rawDeflateRoundTripsAndRefusesTruncationAndBombs() throws {
        let input = Array(String(repeating: "session ", count: 1000).utf8)
        let compressed = try #require(RawDeflate.compress(input))
        #expect(RawDeflate.decompress(compressed, limit: 64 * 1024) == input)
        #expect(RawDeflate.decompress(Array(compressed.dropLast()), limit: 64 * 1024) == nil)
        #expect(RawDeflate.decompress(compressed + [0], limit: 64 * 1024) == nil)
        #expect(RawDeflate.decompress(compressed, limit: input.count - 1) == nil)
        #expect(RawDeflate.decompress([0xFF, 0xFF, 0xFF], limit: 1024) == nil)
    }

    // MARK: Chunking

    @Test func aLargeSessionIsCompressedSplitAndJoined() throws {
        let cookie = try cookie()
        let session = try Self.largeSession()
        let headers = try cookie.setCookies(for: session, now: Self.now)
        #expect(headers.count >= 2)
        for (index, header) in headers.enumerated() {
            #expect(header.hasPrefix("__Host-_oauth_session_\(index)="))
            #expect(header.utf8.count < 4000)
        }
        let pairs = headers.map(Self.pair)
        #expect(cookie.session(from: pairs, now: Self.now) == session)
        #expect(cookie.session(from: pairs.reversed(), now: Self.now) == session, "order of the Cookie header")
        #expect(cookie.session(from: [("other", "x")] + pairs + [("app_session", "y")], now: Self.now) == session)
    }

    @Test func aSmallSessionIsOneCookieWithTheBaseName() throws {
        let headers = try cookie().setCookies(for: Self.session, now: Self.now)
        #expect(headers.count == 1)
        #expect(headers[0].hasPrefix("__Host-_oauth_session="))
    }

    @Test func aMissingChunkIsRefused() throws {
        let cookie = try cookie()
        let pairs = try cookie.setCookies(for: try Self.largeSession(), now: Self.now).map(Self.pair)
        try #require(pairs.count >= 3)
        for missing in pairs.indices {
            var incomplete = pairs
            incomplete.remove(at: missing)
            #expect(cookie.session(from: incomplete, now: Self.now) == nil, "without chunk \(missing)")
        }
    }

    @Test func anExtraDuplicatedOrMixedChunkIsRefused() throws {
        let cookie = try cookie()
        let pairs = try cookie.setCookies(for: try Self.largeSession(), now: Self.now).map(Self.pair)
        let extra = (name: "__Host-_oauth_session_\(pairs.count)", value: "AAAA")
        #expect(cookie.session(from: pairs + [extra], now: Self.now) == nil)
        #expect(cookie.session(from: pairs + [pairs[1]], now: Self.now) == nil)
        let whole = (name: "__Host-_oauth_session", value: try cookie.seal(Self.session))
        #expect(cookie.session(from: pairs + [whole], now: Self.now) == nil)
        #expect(cookie.session(from: [whole, whole], now: Self.now) == nil)
        #expect(cookie.session(from: [whole], now: Self.now) == Self.session)
    }

    @Test func swappedChunksAreRefused() throws {
        let cookie = try cookie()
        let pairs = try cookie.setCookies(for: try Self.largeSession(), now: Self.now).map(Self.pair)
        try #require(pairs.count >= 3)
        var swapped = pairs
        swapped[1].value = pairs[2].value
        swapped[2].value = pairs[1].value
        #expect(cookie.session(from: swapped, now: Self.now) == nil)
    }

    @Test(arguments: ["__Host-_oauth_session_00", "__Host-_oauth_session_+1", "__Host-_oauth_session_10",
                      "__Host-_oauth_session_", "_oauth_session_0", "__host-_oauth_session_0"])
    func strangeChunkNamesAreNotSessionCookies(name: String) throws {
        #expect(try !cookie().isSessionCookieName(name))
    }

    @Test func aSessionTooLargeForTenCookiesIsAnError() throws {
        var session = Self.session
        session.accessToken = Base64URL.encode(try SecureRandom.bytes(40_000))
        #expect(throws: CryptoError.self) { try self.cookie().setCookies(for: session, now: Self.now) }
    }

    // MARK: Set-Cookie

    @Test func setCookieHasTheExactAttributes() throws {
        let cookie = try cookie()
        let header = try cookie.setCookies(for: Self.session, now: Self.now)[0]
        let value = String(header.split(separator: ";")[0].dropFirst("__Host-_oauth_session=".count))
        #expect(header == "__Host-_oauth_session=\(value); Path=/; Max-Age=3600; Secure; HttpOnly; SameSite=Lax")
    }

    @Test func withoutTLSThereIsNoPrefixAndNoSecure() throws {
        let cookie = try SessionCookie(keys: [Self.key1], secure: false, domain: "example.com")
        #expect(cookie.name == "_oauth_session")
        #expect(cookie.setCookie("_oauth_session", "v", maxAge: 60)
            == "_oauth_session=v; Path=/; Domain=example.com; Max-Age=60; HttpOnly; SameSite=Lax")
    }

    @Test func aCookieSharedWithADomainIsSecurePrefixedNeverHostPrefixed() throws {
        // A `__Host-` cookie with `Domain` is dropped by the browser: shared, `__Secure-` it is.
        let shared = try SessionCookie(keys: [Self.key1], domain: "example.com")
        #expect(shared.name == "__Secure-_oauth_session" && shared.domain == "example.com")
        #expect(shared.setCookie(shared.name, "v", maxAge: 60)
            == "__Secure-_oauth_session=v; Path=/; Domain=example.com; Max-Age=60; Secure; HttpOnly; SameSite=Lax")
        let session = try #require(shared.setCookies(for: Self.session, now: Self.now).first)
        #expect(session.hasPrefix("__Secure-_oauth_session=") && session.contains("; Domain=example.com;"))
        #expect(shared.isSessionCookieName("__Secure-_oauth_session") && !shared.isSessionCookieName("__Host-_oauth_session"))
        let hostOnly = try SessionCookie(keys: [Self.key1])
        #expect(hostOnly.name == "__Host-_oauth_session" && hostOnly.domain == nil)
    }

    @Test func maxAgeNeverGoesNegative() throws {
        let header = try cookie().setCookies(for: Self.session, now: Self.session.expiresAt + 10)[0]
        #expect(header.contains("; Max-Age=0;"))
    }

    @Test func clearingExpiresEveryChunkThatWasPresentAndNothingElse() throws {
        let cookie = try cookie()
        let present = ["app_session", "__Host-_oauth_session_0", "__Host-_oauth_session_1", "__Host-_oauth_session_2",
                       "__Host-_oauth_session_1", "_oauth_session"]
        #expect(cookie.clearingCookies(present: present) == [
            "__Host-_oauth_session_0=; Path=/; Max-Age=0; Secure; HttpOnly; SameSite=Lax",
            "__Host-_oauth_session_1=; Path=/; Max-Age=0; Secure; HttpOnly; SameSite=Lax",
            "__Host-_oauth_session_2=; Path=/; Max-Age=0; Secure; HttpOnly; SameSite=Lax",
        ])
        #expect(cookie.clearingCookies(present: ["__Host-_oauth_session"])
            == ["__Host-_oauth_session=; Path=/; Max-Age=0; Secure; HttpOnly; SameSite=Lax"])
    }

    @Test func aSmallerSessionClearsTheChunksItNoLongerUses() throws {
        let cookie = try cookie()
        let present = ["__Host-_oauth_session_0", "__Host-_oauth_session_1", "__Host-_oauth_session_2"]
        let headers = try cookie.setCookies(for: Self.session, now: Self.now, present: present)
        #expect(headers.count == 4)
        #expect(headers[0].hasPrefix("__Host-_oauth_session="))
        #expect(Array(headers.dropFirst()) == cookie.clearingCookies(present: present))
        let pairs = try cookie.setCookies(for: try Self.largeSession(), now: Self.now,
                                          present: ["__Host-_oauth_session"] + present)
        #expect(pairs.last == "__Host-_oauth_session=; Path=/; Max-Age=0; Secure; HttpOnly; SameSite=Lax")
    }

    static func pair(_ header: String) -> (name: String, value: String) {
        let nameValue = header.split(separator: ";")[0]
        let equals = nameValue.firstIndex(of: "=")!
        return (String(nameValue[..<equals]), String(nameValue[nameValue.index(after: equals)...]))
    }
}
