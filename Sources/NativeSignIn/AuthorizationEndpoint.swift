import Foundation

/// Recognises a provider's authorization URL: `https`, one of the exact hosts, the default or
/// the given port, one of the exact paths — nothing else.
///
/// Exactness is the point. A prefix or substring test (`url.starts(with:
/// "https://accounts.google.com")`) also matches `https://accounts.google.com.evil.test/`, and a
/// test on the whole string matches `https://evil.test/accounts.google.com` or
/// `https://accounts.google.com@evil.test/` (a user name, not a host). A URL with any user info
/// is never a provider's. Comparison is on the URL as written (percent-encoded): a URL
/// spelled differently from the provider's own is not intercepted, and the WebView then meets
/// the provider's own refusal of embedded browsers, which is harmless.
public struct AuthorizationEndpoint: Sendable, Equatable {
    public let hosts: Set<String>
    /// `nil`: the https default, 443.
    public let port: Int?
    public let paths: Set<String>
    /// Facebook versions its dialog: `/v26.0/dialog/oauth` as well as `/dialog/oauth`.
    let allowsGraphVersion: Bool

    /// Both paths Google serves: `/o/oauth2/v2/auth` (current) and `/o/oauth2/auth`
    /// (omniauth-google-oauth2 and other older clients).
    public static let google = AuthorizationEndpoint(hosts: ["accounts.google.com"], port: nil,
                                                     paths: ["/o/oauth2/v2/auth", "/o/oauth2/auth"],
                                                     allowsGraphVersion: false)
    public static let facebook = AuthorizationEndpoint(hosts: ["www.facebook.com", "m.facebook.com"], port: nil,
                                                       paths: ["/dialog/oauth"], allowsGraphVersion: true)
    /// Recognised only to be refused as a native provider (`Provider` explains why).
    public static let apple = AuthorizationEndpoint(hosts: ["appleid.apple.com"], port: nil,
                                                    paths: ["/auth/authorize"], allowsGraphVersion: false)

    init(hosts: Set<String>, port: Int?, paths: Set<String>, allowsGraphVersion: Bool) {
        self.hosts = hosts
        self.port = port
        self.paths = paths
        self.allowsGraphVersion = allowsGraphVersion
    }

    /// The endpoint at exactly this URL (an OpenID provider's `authorization_endpoint`).
    public init(_ url: URL) throws {
        guard let parts = URLComponents(url: url, resolvingAgainstBaseURL: false),
              parts.scheme?.lowercased() == "https", let host = parts.percentEncodedHost, !host.isEmpty,
              parts.percentEncodedUser == nil, parts.percentEncodedPassword == nil else {
            throw NativeSignInError(.configuration, key: "authorization_endpoint",
                                    "an authorization endpoint is an https URL with a host: \(url.absoluteString)")
        }
        self.init(hosts: [host.lowercased()], port: parts.port == 443 ? nil : parts.port,
                  paths: [parts.percentEncodedPath.isEmpty ? "/" : parts.percentEncodedPath],
                  allowsGraphVersion: false)
    }

    public func matches(_ url: URL) -> Bool {
        guard let parts = URLComponents(url: url, resolvingAgainstBaseURL: false),
              parts.scheme?.lowercased() == "https",
              parts.percentEncodedUser == nil, parts.percentEncodedPassword == nil,
              let host = parts.percentEncodedHost?.lowercased(), hosts.contains(host),
              (parts.port == 443 ? nil : parts.port) == port else { return false }
        let path = parts.percentEncodedPath
        return paths.contains(path) || (allowsGraphVersion && paths.contains(Self.droppingGraphVersion(path)))
    }

    /// `/v26.0/dialog/oauth` → `/dialog/oauth`; any other path unchanged.
    private static func droppingGraphVersion(_ path: String) -> String {
        guard path.hasPrefix("/v") else { return path }
        let afterV = path.dropFirst(2)
        guard let slash = afterV.firstIndex(of: "/") else { return path }
        let version = afterV[..<slash].split(separator: ".", omittingEmptySubsequences: false)
        let isNumber = { (part: Substring) in
            !part.isEmpty && part.utf8.allSatisfy { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }
        }
        guard version.count == 2, version.allSatisfy(isNumber) else { return path }
        return String(afterV[slash...])
    }
}
