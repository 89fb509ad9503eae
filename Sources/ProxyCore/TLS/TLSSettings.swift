/// What a TLS listener serves: a default certificate chain and key, optional per-name ones
/// (SNI), and the lowest protocol version accepted. Paths only: the files are read when a
/// `TLSCredentials` is built (start-up) or reloaded (SIGHUP), never per connection.
public struct TLSServerSettings: Sendable, Equatable {
    /// PEM: the certificate first, then its intermediates.
    public var certFile: String
    /// PEM private key (RSA, ECDSA or Ed25519; not passphrase-protected).
    public var keyFile: String
    public var minVersion: TLSVersion = .tls12
    /// Certificates chosen by the client's server name; the default one serves every other name.
    public var sni: [SNICertificate] = []
    /// Offer `h2` in ALPN (preferred; `http/1.1` stays offered). Off: HTTP/1.1 only.
    public var http2 = true
    /// Files of 80 bytes each (nginx's `ssl_session_ticket_key` format: a 16-byte name, a
    /// 32-byte HMAC-SHA256 key, a 32-byte AES-256 key): the first encrypts new tickets, all of
    /// them decrypt. Instances that share the files resume each other's sessions; a reload
    /// (SIGHUP) re-reads them, so rotation is a file change. Empty: a random key per process
    /// generation, which no other instance knows.
    public var sessionTicketKeyFiles: [String] = []
    /// `Strict-Transport-Security` on every response of this listener (never on plain HTTP).
    public var hsts: HSTS? = nil
    /// Staple each certificate's OCSP response (`OCSPStaple`, fetched by the application).
    public var ocspStapling = false

    public init(certFile: String, keyFile: String, minVersion: TLSVersion = .tls12, sni: [SNICertificate] = [],
                http2: Bool = true, sessionTicketKeyFiles: [String] = [], hsts: HSTS? = nil) {
        self.certFile = certFile
        self.keyFile = keyFile
        self.minVersion = minVersion
        self.sni = sni
        self.http2 = http2
        self.sessionTicketKeyFiles = sessionTicketKeyFiles
        self.hsts = hsts
    }
}

/// HTTP Strict Transport Security (RFC 6797): browsers that saw it go to https:// by themselves
/// for `maxAge` seconds, and refuse to click through certificate errors.
public struct HSTS: Sendable, Equatable {
    /// Seconds; two years by default (Mozilla's recommendation; hstspreload.org asks ≥ one year).
    public var maxAge: UInt64 = 63_072_000
    public var includeSubdomains = false
    /// Ask to be in browsers' preload lists: needs `includeSubdomains` and a year or more.
    public var preload = false

    public init(maxAge: UInt64 = 63_072_000, includeSubdomains: Bool = false, preload: Bool = false) {
        self.maxAge = maxAge
        self.includeSubdomains = includeSubdomains
        self.preload = preload
    }

    /// The `Strict-Transport-Security` field's value.
    public var headerValue: String {
        "max-age=\(maxAge)" + (includeSubdomains ? "; includeSubDomains" : "") + (preload ? "; preload" : "")
    }
}

/// A certificate served to clients that ask for one of `names` (exact, or `*.example.com`
/// for any single label under example.com).
public struct SNICertificate: Sendable, Equatable {
    public var names: [String]
    public var certFile: String
    public var keyFile: String

    public init(names: [String], certFile: String, keyFile: String) {
        self.names = names
        self.certFile = certFile
        self.keyFile = keyFile
    }

    /// Whether `name` can be a server name pattern: a DNS name (letters, digits, hyphens,
    /// dots; labels of 1–63 characters, not starting or ending with a hyphen), optionally
    /// with `*.` as its whole first label. Case-insensitive.
    public static func isValidPattern(_ name: String) -> Bool {
        var rest = Substring(name)
        if rest.hasPrefix("*.") { rest = rest.dropFirst(2) }
        return HostSyntax.isDNSName(rest.utf8, maxLength: 253)
    }
}

/// The lowest TLS version a listener accepts. TLS 1.0 and 1.1 are never offered.
public enum TLSVersion: Sendable, Equatable, CustomStringConvertible {
    case tls12, tls13

    /// `1.2` or `1.3` (also `TLSv1.2`, `tls1.3`).
    public init?(_ text: String) {
        var t = text.lowercased()
        if t.hasPrefix("tlsv") { t.removeFirst(4) } else if t.hasPrefix("tls") { t.removeFirst(3) }
        switch t {
        case "1.2": self = .tls12
        case "1.3": self = .tls13
        default: return nil
        }
    }

    public var description: String { self == .tls12 ? "1.2" : "1.3" }
}

/// How the proxy talks to an `https://` upstream. Verification is always on: against the
/// system's CA store, or against `caFile` when one is given (private CAs, tests).
public struct UpstreamTLSSettings: Sendable, Equatable {
    /// PEM bundle of the CAs to trust instead of the system store.
    public var caFile: String? = nil
    /// Client certificate chain and key, for upstreams that require mutual TLS.
    public var clientCertFile: String? = nil
    public var clientKeyFile: String? = nil
    /// The name sent as SNI and checked against the upstream's certificate. Default: the
    /// host of the upstream URL (an IP address is checked against the certificate's IP SANs
    /// and sent without SNI).
    public var serverName: String? = nil

    public init(caFile: String? = nil, clientCertFile: String? = nil, clientKeyFile: String? = nil, serverName: String? = nil) {
        self.caFile = caFile
        self.clientCertFile = clientCertFile
        self.clientKeyFile = clientKeyFile
        self.serverName = serverName
    }

    public var isDefault: Bool { self == UpstreamTLSSettings() }

    /// A DNS name or an IP address (the forms a certificate can be checked against).
    public static func isValidServerName(_ name: String) -> Bool {
        HostSyntax.isDNSName(name.utf8, maxLength: 253) || HostSyntax.isIPAddress(name)
    }
}

/// A TLS set-up problem found while reading certificates and keys: which file, and what is
/// wrong with it. Never carries file contents.
public struct TLSSetupError: Error, Sendable, CustomStringConvertible {
    /// The file at fault, when one is.
    public let file: String?
    public let message: String

    init(file: String?, _ message: String) {
        self.file = file
        self.message = message
    }

    public var description: String {
        guard let file else { return message }
        return "'\(file)': \(message)"
    }
}
