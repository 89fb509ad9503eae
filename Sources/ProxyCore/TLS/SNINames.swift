/// Which `tls.sni` entry serves a server name: an exact name, else a `*.example.com` pattern
/// for its first label; nil for the default certificate. Names are matched without regard to
/// case; a later entry naming the same name wins. Shared by TCP (OpenSSL contexts,
/// `TLSServerContext`) and QUIC (GnuTLS credentials, `QUICCredentials`), so both pick the same
/// certificate for a name.
struct SNINames: Sendable {
    /// Lower-cased exact names → entry index.
    private var exact: [String: Int] = [:]
    /// Lower-cased `example.com` of a `*.example.com` pattern → entry index.
    private var wildcard: [String: Int] = [:]

    init(_ entries: [SNICertificate]) {
        for (index, entry) in entries.enumerated() {
            for name in entry.names {
                let lower = name.lowercased()
                if lower.hasPrefix("*.") { wildcard[String(lower.dropFirst(2))] = index } else { exact[lower] = index }
            }
        }
    }

    func index(for serverName: String) -> Int? {
        let name = serverName.lowercased()
        if let index = exact[name] { return index }
        guard let dot = name.firstIndex(of: ".") else { return nil }
        return wildcard[String(name[name.index(after: dot)...])]
    }
}
