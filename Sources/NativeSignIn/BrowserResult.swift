import Foundation

/// How the system browser session ended, as the platform adapter saw it.
public enum BrowserResult: Sendable, Equatable {
    /// The session caught a load of the callback scheme (ASWebAuthenticationSession's
    /// callback URL; AppAuth: the redirect its RedirectUriReceiverActivity received).
    case redirect(URL)
    /// The user closed the browser (ASWebAuthenticationSessionError.canceledLogin; AppAuth:
    /// GeneralErrors.USER_CANCELED_AUTH_FLOW).
    case cancelled
    /// The session could not run or ended otherwise (no presentation anchor, no browser).
    case failed
}
