import ProxyCore
import Testing
@testable import OAuthCallback

@Suite struct SessionRevocationTests {
    let loop = TestLoop.shared
    let clock = ManualClock()

    func revocation(_ store: (any Store)? = nil) -> SessionRevocation {
        SessionRevocation(store: store ?? MemoryStore(clock: clock.read), lifetimeSeconds: 3600, clock: { 1_800_000_000 })
    }

    func session(issuedAt: Int64, subject: String = "110169", email: String? = "Jane@Example.com") -> ProxySession {
        ProxySession(provider: "google", subject: subject, email: email, issuedAt: issuedAt, expiresAt: issuedAt + 3600)
    }

    func revoke(_ r: SessionRevocation, _ user: SessionRevocation.User) -> Result<Int64, StoreError>? {
        loop.ask { loop, done in r.revoke(user, on: loop) { done($0) } }
    }

    func revoked(_ r: SessionRevocation, _ s: ProxySession) -> Result<Bool, StoreError>? {
        loop.ask { loop, done in r.isRevoked(s, on: loop) { done($0) } }
    }

    @Test func sessionsIssuedUpToTheRevocationEndAndLaterOnesLive() throws {
        let r = revocation()
        #expect(try revoked(r, session(issuedAt: 1_799_999_000))?.get() == false, "nothing revoked yet")
        #expect(try revoke(r, .email("jane@example.com"))?.get() == 1_800_000_000)
        #expect(try revoked(r, session(issuedAt: 1_799_999_000))?.get() == true)
        #expect(try revoked(r, session(issuedAt: 1_800_000_000))?.get() == true, "the very second of the revocation too")
        #expect(try revoked(r, session(issuedAt: 1_800_000_001))?.get() == false, "a sign-in after it")
        #expect(try revoked(r, session(issuedAt: 1_799_999_000, email: "bob@example.com"))?.get() == false, "another user")
        #expect(try revoked(r, session(issuedAt: 1_799_999_000, email: nil))?.get() == false)
    }

    @Test func aSubjectIsRevokedWhateverTheAddress() throws {
        let r = revocation()
        _ = revoke(r, .subject("110169"))
        #expect(try revoked(r, session(issuedAt: 1_799_000_000, email: nil))?.get() == true)
        #expect(try revoked(r, session(issuedAt: 1_799_000_000, subject: "110170"))?.get() == false)
    }

    @Test func markersAreKeptUnderDigestsForOneLifetime() throws {
        let store = MemoryStore(clock: clock.read)
        let r = revocation(store)
        _ = revoke(r, .email("jane@example.com"))
        let key = "revoked:email:" + ReplayGuard.hex(SHA256.hash("jane@example.com"))
        #expect(SessionRevocation.User.email("jane@example.com").key == key && !key.contains("jane"))
        #expect(loop.ask { loop, done in store.get(key: key, on: loop) { done((try? $0.get()) ?? nil) } }! == Array("1800000000".utf8))
        clock.advance(nanoseconds: 3_601_000_000_000)
        #expect(try revoked(r, session(issuedAt: 1_799_999_000))?.get() == false, "the marker has expired, and so has every session it ended")
    }

    @Test func aMarkerThatDoesNotReadAsATimeRevokes_andAStoreThatCannotSayFailsClosed() throws {
        let store = MemoryStore(clock: clock.read)
        let r = revocation(store)
        let key = SessionRevocation.User.subject("110169").key
        _ = loop.ask { loop, done in store.set(key: key, value: Array("garbage".utf8), ttlSeconds: 60, on: loop) { done((try? $0.get()) != nil) } }
        #expect(try revoked(r, session(issuedAt: 1_800_000_100))?.get() == true)
        let failing = revocation(FailingStore(.unavailable))
        #expect((try? revoked(failing, session(issuedAt: 1))?.get()) == nil)
    }

    @Test(arguments: [
        ("email=jane%40Example.com", "email:jane@example.com"), ("sub=110169", "sub:110169"), ("email=jane@example.com", "email:jane@example.com"),
    ])
    func aRequestNamesOneUser(_ body: String, _ expected: String) throws {
        let user = try SessionRevocationEndpoint.user(Array(body.utf8)).get()
        switch user {
        case .email(let e): #expect("email:" + e == expected)
        case .subject(let s): #expect("sub:" + s == expected)
        }
    }

    @Test(arguments: [
        ("", SessionRevocationEndpoint.Problem.notOne), ("email=a@example.com&sub=1", .notOne), ("email=a@x.com&email=b@x.com", .notOne),
        ("user=jane", .unknown("user")), ("email=jane", .badEmail), ("email=", .badEmail), ("email=a%ZZ@example.com", .unreadable),
        ("sub=", .badSubject), ("sub=a%20b", .badSubject), ("sub=" + String(repeating: "1", count: 256), .badSubject),
    ])
    func aRequestThatCannotBeReadIsRefusedWithAReason(_ body: String, _ problem: SessionRevocationEndpoint.Problem) {
        #expect(SessionRevocationEndpoint.user(Array(body.utf8)) == .failure(problem), "\(body)")
    }

    @Test(arguments: ["email=a@example.com&", "email=a@example.com&flag", "email=a@example.com&&", "email=kim@\u{212A}ettle.test",
                      "sub=1&sub=2", "email=a@example.com;sub=1"])
    func aBodyWithAnythingMoreOrOddIsRefused(_ body: String) {
        #expect((try? SessionRevocationEndpoint.user(Array(body.utf8)).get()) == nil, "\(body)")
    }
}
