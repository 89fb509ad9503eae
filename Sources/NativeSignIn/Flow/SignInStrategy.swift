import Foundation

/// How a recognised sign-in leaves the WebView and comes back.
public enum SignInStrategy: Sendable, Equatable {
    /// The app's own native client: the library's request (native `client_id`, custom-scheme
    /// redirect, PKCE) in a browser session, handed back through `/_oauth_callback`. Needs the
    /// native clients registered at the providers and in the proxy; no associated domains.
    case native
    /// No native client: the site's own provider URL, unchanged, in the system browser, and
    /// the provider's redirect to the site's own callback loaded back into the WebView —
    /// caught by the browser session (`.https(host:path:)`, where the browser supports it) or
    /// arriving as a universal link. `linkPaths` are the site's callback paths the app claims
    /// as universal links (`/users/auth/google_oauth2/callback`); only a link on the site's
    /// origin with one of these paths, while a hand-back sign-in runs, is taken.
    case handBack(linkPaths: Set<String>)
}
