/// The phases of the optional plain-HTTP listener next to a TLS one: every request is
/// answered `308 Permanent Redirect` to the same host, path and query over HTTPS (308 keeps
/// the method and body, unlike 301). The `Host` is validated strictly before it is echoed into
/// `Location`: anything that is not a plain DNS name, IPv4 or bracketed IPv6 address (userinfo,
/// percent-encoding, backslashes, extra colons…) gets a 400 instead, so no `Host` can turn the
/// redirect towards another site.
public struct HTTPSRedirect: HTTPPhases {
    /// The HTTPS port to send clients to; omitted from `Location` when it is 443.
    public let httpsPort: UInt16

    public init(httpsPort: UInt16) { self.httpsPort = httpsPort }

    public func requestFilter(_ request: borrowing RequestView) -> RequestDecision {
        guard let host = request.host, let location = Self.location(host: host, target: request.target, httpsPort: httpsPort) else {
            return .respond(Response(status: 400, text: "400 Bad Request: this address only redirects to HTTPS, and the Host is not valid\n"))
        }
        return .respond(Response(status: 308, text: "Redirecting to HTTPS.\n", headers: [("Location", location)]))
    }

    /// `https://<host>[:port]<target>`, or nil when the `Host` value or the target cannot be
    /// redirected. The `Host`'s own port (that of this plain listener) is replaced by `httpsPort`.
    public static func location(host: String, target: String, httpsPort: UInt16) -> String? {
        guard let (name, _) = HostSyntax.splitHost(host) else { return nil }
        // Origin-form only: `*` (OPTIONS) has no HTTPS equivalent; the parser already refused
        // targets with spaces or control characters.
        guard target.hasPrefix("/") else { return nil }
        let port = httpsPort == 443 ? "" : ":\(httpsPort)"
        return "https://\(name.lowercased())\(port)\(target)"
    }
}
