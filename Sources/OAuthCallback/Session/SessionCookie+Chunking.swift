/// Splitting a value across cookies, and the `Set-Cookie` headers.
///
/// Browsers keep at most 4,096 bytes of name and value per cookie. A value up to
/// `maximumChunkLength` is one cookie `name`; a longer one becomes `name_0` … `name_{n-1}`,
/// the first carrying the count (`"<n>."`, a character base64url never uses), so a missing,
/// extra or stray chunk is refused outright rather than left to fail decryption.
extension SessionCookie {
    /// Bytes of value per cookie, the count prefix included (oauth2-proxy uses 4,000 minus
    /// the name; 3,800 leaves room for a long name under every browser's 4,096).
    public static let maximumChunkLength = 3800
    /// More would crowd out the app's own cookies and the request header limits.
    public static let maximumChunks = 10
    private static let pieceLength = maximumChunkLength - 3  // room for "10."

    /// `Set-Cookie` values that store `session`, followed by expiring ones for every session
    /// cookie in `present` (names the request carried) that the new value no longer uses —
    /// a shorter session must not leave stale chunks behind.
    /// - Throws: `.invalidInput` when the session needs more than `maximumChunks` cookies.
    public func setCookies(for session: ProxySession, now: Int64, present: [String] = []) throws(CryptoError) -> [String] {
        try setCookies(value: seal(session), maxAge: max(0, session.expiresAt - now), present: present)
    }

    /// The same for a server-side session's reference (one short cookie).
    public func setCookies(reference id: [UInt8], maxAge: Int64, present: [String] = []) throws(CryptoError) -> [String] {
        try setCookies(value: sealReference(id), maxAge: max(0, maxAge), present: present)
    }

    private func setCookies(value: String, maxAge: Int64, present: [String]) throws(CryptoError) -> [String] {
        let cookies = try chunks(of: value)
        var headers = cookies.map { setCookie($0.name, $0.value, maxAge: maxAge) }
        let written = Set(cookies.map(\.name))
        headers += clearingCookies(present: present.filter { !written.contains($0) })
        return headers
    }

    /// `Max-Age=0` for every session cookie (whole or chunk) among `present`; other names
    /// are ignored. For sign-out, pass every cookie name the request carried.
    public func clearingCookies(present: [String]) -> [String] {
        var seen = Set<String>()
        return present.filter { isSessionCookieName($0) && seen.insert($0).inserted }
            .map { setCookie($0, "", maxAge: 0) }
    }

    /// The session carried by a request's cookies (all of them, as name/value pairs in
    /// header order), or nil: none, malformed, altered, expired, or chunks missing, extra,
    /// duplicated or mixed with an unsplit value.
    public func session(from cookies: [(name: String, value: String)], now: Int64) -> ProxySession? {
        guard let value = joined(cookies) else { return nil }
        return open(value, now: now)
    }

    /// The server-side session id carried by a request's cookies, or nil.
    public func reference(from cookies: [(name: String, value: String)]) -> [UInt8]? {
        joined(cookies).flatMap(openReference)
    }

    /// Whether `cookieName` is this session's cookie or one of its chunks.
    public func isSessionCookieName(_ cookieName: String) -> Bool {
        cookieName == name || chunkIndex(cookieName) != nil
    }

    // MARK: Splitting and joining

    func chunks(of value: String) throws(CryptoError) -> [(name: String, value: String)] {
        let bytes = Array(value.utf8)
        guard bytes.count > Self.maximumChunkLength else { return [(name, value)] }
        let count = (bytes.count + Self.pieceLength - 1) / Self.pieceLength
        guard count <= Self.maximumChunks else {
            throw CryptoError(.invalidInput, "session needs more than \(Self.maximumChunks) cookies")
        }
        return (0..<count).map { index in
            let piece = bytes[(index * Self.pieceLength)..<min(bytes.count, (index + 1) * Self.pieceLength)]
            let text = String(decoding: piece, as: UTF8.self)
            return (chunkName(index), index == 0 ? "\(count).\(text)" : text)
        }
    }

    func joined(_ cookies: [(name: String, value: String)]) -> String? {
        var whole: String?
        var pieces = [String?](repeating: nil, count: Self.maximumChunks)
        var chunkCount = 0
        for cookie in cookies {
            if cookie.name == name {
                guard whole == nil else { return nil }  // duplicated (e.g. tossed from a subdomain)
                whole = cookie.value
            } else if let index = chunkIndex(cookie.name) {
                guard pieces[index] == nil else { return nil }
                pieces[index] = cookie.value
                chunkCount += 1
            }
        }
        if let whole { return chunkCount == 0 ? whole : nil }
        guard chunkCount > 0, let first = pieces[0], let dot = first.firstIndex(of: "."),
              let declared = Int(first[..<dot]), String(declared) == first[..<dot],
              (2...Self.maximumChunks).contains(declared), declared == chunkCount else { return nil }
        var value = String(first[first.index(after: dot)...])
        for index in 1..<declared {
            guard let piece = pieces[index] else { return nil }
            value += piece
        }
        return value
    }

    private func chunkName(_ index: Int) -> String { "\(name)_\(index)" }

    /// `name_<i>` with `i` in `0..<maximumChunks`, written without leading zeros.
    private func chunkIndex(_ cookieName: String) -> Int? {
        guard cookieName.hasPrefix(name + "_") else { return nil }
        let digits = cookieName.dropFirst(name.count + 1)
        guard let index = Int(digits), String(index) == digits, (0..<Self.maximumChunks).contains(index) else {
            return nil
        }
        return index
    }

    // MARK: Set-Cookie

    /// `name=value; Path=/; [Domain=…; ]Max-Age=…; [Secure; ]HttpOnly; SameSite=Lax`.
    /// `Lax` so the cookie comes along on the top-level navigation back from the IdP.
    func setCookie(_ cookieName: String, _ value: String, maxAge: Int64) -> String {
        var header = "\(cookieName)=\(value); Path=/"
        if let domain { header += "; Domain=\(domain)" }
        header += "; Max-Age=\(maxAge)"
        if secure { header += "; Secure" }
        header += "; HttpOnly; SameSite=Lax"
        return header
    }
}
