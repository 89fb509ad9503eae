import Foundation

/// One identity provider as the wrapper app signs in with it: where the site's authorization
/// URL goes (to recognise it), and the native client the app uses instead of the site's.
///
/// The `name` is the `provider=` value of `/_oauth_callback`, so it must equal the provider's
/// key in the proxy's configuration (`providers.<name>`).
public struct Provider: Sendable, Equatable {
    public let name: String
    public let endpoint: AuthorizationEndpoint
    /// The native client id (iOS or Android client), never the site's web client.
    public let clientID: String
    /// The custom-scheme redirect registered for the native client, sent as `redirect_uri`.
    public let redirectURI: String
    /// Whether a PKCE challenge is sent (and the verifier handed to `/_oauth_callback`).
    public let usesPKCE: Bool

    /// The scheme the system browser session waits for (ASWebAuthenticationSession's
    /// `callbackURLScheme`, AppAuth's `appAuthRedirectScheme`).
    public var callbackScheme: String {
        URLComponents(string: redirectURI)?.scheme ?? ""
    }

    public init(name: String, endpoint: AuthorizationEndpoint, clientID: String,
                redirectURI: String, usesPKCE: Bool) throws {
        // The proxy accepts `provider` as a short token; anything else would be refused there.
        guard (1...64).contains(name.utf8.count),
              name.utf8.allSatisfy({ QueryString.isUnreserved($0) && $0 != UInt8(ascii: "~") }) else {
            throw NativeSignInError(.configuration, key: "name",
                                    "a provider name is 1 to 64 of A-Z a-z 0-9 . _ -, not \"\(name)\"")
        }
        guard !clientID.isEmpty else {
            throw NativeSignInError(.configuration, key: "client_id", "the native client id of \(name) is empty")
        }
        guard let scheme = URLComponents(string: redirectURI)?.scheme, !scheme.isEmpty else {
            throw NativeSignInError(.configuration, key: "redirect_uri",
                                    "the redirect of \(name) has no scheme: \"\(redirectURI)\"")
        }
        // Apple answers with response_mode=form_post when the site asks for name or email — a
        // POST no browser session returns to an app — and redirects to an https URL. Its web
        // sign-in works inside a WebView, so the site's own flow is left alone there.
        guard endpoint.hosts.isDisjoint(with: AuthorizationEndpoint.apple.hosts) else {
            throw NativeSignInError(.configuration, key: name,
                                    "Sign in with Apple (appleid.apple.com) is not intercepted natively: remove the "
                                    + "provider \(name) and let the site's web flow run in the WebView, where Apple "
                                    + "allows it (or use the hand-back strategy for a site that asks for no name or email)")
        }
        self.name = name
        self.endpoint = endpoint
        self.clientID = clientID
        self.redirectURI = redirectURI
        self.usesPKCE = usesPKCE
    }

    /// Google with the app's iOS (or Android) client. The redirect is the one Google gives
    /// native clients, `<REVERSED_CLIENT_ID>:/oauth2redirect`; Google's native clients are
    /// public, so PKCE is what protects the code.
    public static func google(clientID: String, reversedClientID: String) throws -> Provider {
        try Provider(name: "google", endpoint: .google, clientID: clientID,
                     redirectURI: "\(reversedClientID):/oauth2redirect", usesPKCE: true)
    }

    /// Facebook with the app id. Facebook's client is confidential (the proxy exchanges with
    /// the app secret), so no PKCE; the redirect is the one Facebook registers for apps,
    /// `fb<appid>://authorize`.
    public static func facebook(appID: String) throws -> Provider {
        try Provider(name: "facebook", endpoint: .facebook, clientID: appID,
                     redirectURI: "fb\(appID)://authorize", usesPKCE: false)
    }

    /// Any OpenID provider: its `authorization_endpoint` (as its discovery document spells it)
    /// and the native client registered there.
    public static func oidc(name: String, authorizationEndpoint: URL, clientID: String,
                            redirectURI: String, usesPKCE: Bool = true) throws -> Provider {
        try Provider(name: name, endpoint: AuthorizationEndpoint(authorizationEndpoint),
                     clientID: clientID, redirectURI: redirectURI, usesPKCE: usesPKCE)
    }
}
