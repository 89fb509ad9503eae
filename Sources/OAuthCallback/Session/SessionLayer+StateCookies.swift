import ProxyCore

/// One state cookie per sign-in in flight, like oauth2-proxy's per-request CSRF cookies.
///
/// A browser may start several sign-ins before finishing one (two tabs opened on protected
/// pages, a page that started a sign-in and then another): with a single state cookie the
/// second `/_oauth/start` replaced the first's, and the first came back to a state the browser
/// no longer held. So each sign-in's cookie is named after its state —
/// `_oauth_state_<first 12 hex digits of SHA-256(state)>`, prefixed as the session cookie — and a
/// callback looks up the cookie for the `state` it carries. The digest only names the cookie:
/// it says nothing about the state a callback needs, and the sealed value (associated data: the
/// full cookie name) must still open and hold exactly that state, so login CSRF is refused as
/// before — a callback whose state has no cookie in this browser is refused before any IdP call.
///
/// Browsers cap cookies per site (and every byte of these goes with every request for up to
/// `stateLifetime`), so at most `maximumStateCookies` are kept: `/_oauth/start` clears the
/// oldest live ones (by the expiry sealed in each) beyond that, and any that no longer open or
/// have expired (a secret no longer configured, a clock step, a cookie we never set).
extension SessionLayer {
    /// How many hex digits of the state's digest name its cookie: 48 bits, so that a handful of
    /// cookies in one browser never collide, and short enough to cost little on every request.
    static let stateCookieDigestLength = 12

    func stateCookieName(for state: String) -> String {
        stateCookiePrefix + String(ReplayGuard.hex(SHA256.hash(state)).prefix(Self.stateCookieDigestLength))
    }

    /// The record sealed in this browser's state cookie for `state`, if there is one, intact,
    /// unexpired and holding that very state.
    func stateRecord(_ cookies: [(name: String, value: String)], state: String) -> StateRecord? {
        let name = stateCookieName(for: state)
        // Every cookie of that name is tried: one tossed in by a sibling host with a longer
        // `Path` would come first, and must not hide ours.
        for cookie in cookies where cookie.name == name {
            if let record = openStateCookie(cookie), ConstantTime.equals(record.state, state) { return record }
        }
        return nil
    }

    private func openStateCookie(_ cookie: (name: String, value: String)) -> StateRecord? {
        guard let box = Base64URL.decode(cookie.value) else { return nil }
        let aad = Array(cookie.name.utf8)
        for sealer in stateSealers {
            if let plain = try? sealer.open(box, authenticating: aad) {
                guard let record = StateRecord(json: plain), record.expiresAt > clock() else { return nil }
                return record
            }
        }
        return nil
    }

    /// The state cookies `/_oauth/start` clears before adding one more: those that no longer
    /// open (or have expired), then the oldest beyond `maximumStateCookies - 1`.
    func stateCookiesToClear(_ cookies: [(name: String, value: String)]) -> [String] {
        var live: [(name: String, expiresAt: Int64, order: Int)] = []
        var unusable: [String] = []
        for (order, cookie) in cookies.enumerated() where cookie.name.hasPrefix(stateCookiePrefix) {
            if let record = openStateCookie(cookie) {
                live.append((cookie.name, record.expiresAt, order))
            } else {
                unusable.append(cookie.name)
            }
        }
        // Oldest first; equal expiries (same second) in the order the browser sent them.
        live.sort { ($0.expiresAt, $0.order) < ($1.expiresAt, $1.order) }
        let excess = max(0, live.count - (Self.maximumStateCookies - 1))
        let kept = Set(live.dropFirst(excess).map(\.name))
        var out: [String] = []
        // A name is cleared once, and never one that is kept: clearing a name that another,
        // unopenable cookie shares (one tossed in with another `Path`) would clear ours too.
        for name in live.prefix(excess).map(\.name) + unusable where !kept.contains(name) && !out.contains(name) {
            out.append(name)
        }
        return out
    }

    /// Expires one state cookie: each is single use.
    func clearStateCookie(named name: String) -> String {
        name + "=" + stateCookieAttributes + "; Max-Age=0; HttpOnly; SameSite=Lax" + (settings.secure ? "; Secure" : "")
    }
}
