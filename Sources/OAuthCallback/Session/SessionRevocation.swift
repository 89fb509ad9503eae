import ProxyCore

/// Revoking a user's sessions from outside (`oauth.session.revocation`, the internal listener's
/// `POST /sessions/revoke`): an operator or an HR system ends everything a user is signed in
/// with, and the next request of any of those sessions, on any instance sharing the store, has
/// none.
///
/// **A marker per user, not an index of sessions per user.** Revoking writes
/// `revoked:email:<SHA-256 of the address>` (or `revoked:sub:<SHA-256 of the subject>`) holding
/// the time of revocation, and a session issued at or before that time is over. Why not an
/// index of each user's session ids to delete:
/// - cookie sessions (no `server_side`) live in the browser alone: there is nothing in the store
///   to delete, and a marker ends them as surely as server-side ones;
/// - an index has to be kept right by every instance at every sign-in, sign-out and expiry, and
///   the store offers no atomic list append: two sign-ins at once would lose an entry — and a
///   session missing from the index would survive its revocation;
/// - a marker needs no clean-up: it lives one session `lifetime` (every session issued before it
///   has expired by then), and a later revocation simply moves it on.
/// The price is one store read per request that carries a session (two with an address), which
/// is why it is a setting: without it nothing is read and requests cost what they did.
///
/// Addresses are compared ASCII lower-cased (`EmailAddress`), whether or not the IdP vouched
/// for them (revoking more is the safe side); subjects byte for byte, whichever provider issued
/// them. Keys hold digests only: an address never appears in the store or its logs.
public struct SessionRevocation: Sendable {
    /// Whose sessions: by address or by subject.
    public enum User: Sendable, Equatable {
        case email(String)
        case subject(String)

        var key: String {
            switch self {
            case .email(let e): return "revoked:email:" + ReplayGuard.hex(SHA256.hash(e))
            case .subject(let s): return "revoked:sub:" + ReplayGuard.hex(SHA256.hash(s))
            }
        }
    }

    let store: any Store
    /// How long a marker must live: the session lifetime, after which every session it could
    /// end has ended anyway.
    let lifetimeSeconds: Int64
    let clock: @Sendable () -> Int64

    public init(store: any Store, lifetimeSeconds: Int64, clock: @escaping @Sendable () -> Int64) {
        self.store = store
        self.lifetimeSeconds = lifetimeSeconds
        self.clock = clock
    }

    /// Sets the marker: sessions of `user` issued up to now are over. `completion` (on `loop`)
    /// gets the time written.
    public func revoke(_ user: User, on loop: EventLoop, _ completion: @escaping (Result<Int64, StoreError>) -> Void) {
        let now = clock()
        // One second more than a lifetime: a session issued in the second of the revocation
        // lives at most until now + lifetime.
        store.set(key: user.key, value: Array(String(now).utf8), ttlSeconds: lifetimeSeconds + 1, on: loop) { result in
            completion(result.map { now })
        }
    }

    /// Whether `session` was issued at or before a revocation of its subject or its address.
    /// (At, not only before: a session made in the very second of the revocation may predate
    /// it; signing in again a second later is the price of not letting it live.)
    func isRevoked(_ session: ProxySession, on loop: EventLoop, _ completion: @escaping (Result<Bool, StoreError>) -> Void) {
        var users = [User.subject(session.subject)]
        if let address = session.email.flatMap(EmailAddress.init) { users.append(.email(address.address)) }
        check(users[...], issuedAt: session.issuedAt, on: loop, completion)
    }

    private func check(_ users: ArraySlice<User>, issuedAt: Int64, on loop: EventLoop,
                       _ completion: @escaping (Result<Bool, StoreError>) -> Void) {
        guard let user = users.first else { return completion(.success(false)) }
        store.get(key: user.key, on: loop) { result in
            switch result {
            case .failure(let error): completion(.failure(error))
            case .success(let bytes):
                // A marker that does not read as a time is a revocation all the same (fail closed).
                if let bytes, issuedAt <= Int64(String(decoding: bytes, as: UTF8.self)) ?? .max {
                    return completion(.success(true))
                }
                check(users.dropFirst(), issuedAt: issuedAt, on: loop, completion)
            }
        }
    }
}
