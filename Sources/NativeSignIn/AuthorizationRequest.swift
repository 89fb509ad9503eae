import Foundation

/// One native sign-in under way: the URL the system browser opens, and what the hand-back to
/// `/_oauth_callback` needs from it. Built by `SignInInterceptor.decide`; keep it until the
/// browser returns (it holds the PKCE verifier, which never leaves the app except in the
/// callback to the site's own origin).
public struct AuthorizationRequest: Sendable, Equatable {
    /// `provider=` of the callback (the proxy's provider key).
    public let provider: String
    public let platform: Platform
    /// The native client id sent, echoed as `client_id=`.
    public let clientID: String
    /// The redirect sent, echoed as `redirect_uri=` (the exchange must repeat it exactly).
    public let redirectURI: String
    /// The scheme the browser session waits for.
    public let callbackScheme: String
    /// The native authorization URL: the provider's endpoint with the native client's
    /// parameters, the site's scope/state/allowlisted hints, and the PKCE challenge.
    public let url: URL
    /// The site's state, as sent; the redirect must carry it back unchanged.
    public let state: String
    /// The PKCE verifier, when the provider uses PKCE.
    public let codeVerifier: String?
    let callbackPath: String
}
