/// User-facing texts used in more than one place (pages the proxy answers itself, and the
/// `userMessage` of failures). Plain sentences: they end up in HTML after escaping, and never
/// say anything about the inside.
enum Messages {
    static let internalError = "Something went wrong on our side. Please try signing in again."
    static let unavailable = "Sign-in is temporarily unavailable. Please try again in a moment."
    static let crossSiteSignOut = "You are still signed in: another site asked to sign you out. To sign out, use this site's own sign-out link."
    static let forbidden = "You are signed in, but this account is not allowed here. Ask the site's administrator for access, or sign out and use another account."
    static let rateLimited = "Too many sign-in attempts from your network. Please wait a moment and try again."
}
