import Foundation

/// Where a browser session returns: a custom scheme (every OS version), or an `https` URL on
/// a host and path (iOS 17.4 / macOS 14.4 `ASWebAuthenticationSession.Callback.https`).
public enum BrowserCallback: Sendable, Equatable {
    case scheme(String)
    case https(host: String, path: String)
}

/// What the flow asks the system browser to run.
public struct BrowserRequest: Sendable, Equatable {
    /// The URL the browser opens: the native request's (native), the site's own (hand-back).
    public let url: URL
    public let callback: BrowserCallback
    /// `prefersEphemeralWebBrowserSession`: no cookies shared with the user's browser.
    public let prefersEphemeralSession: Bool
    /// The sign-in this session is for, numbered from 1 in the order the flow started them.
    public let signIn: Int
    public let provider: String
    public let platform: Platform
    /// The site's state, carried unchanged.
    public let state: String
    /// The native request (client, redirect, PKCE verifier); nil for a hand-back sign-in,
    /// which sends the site's own client.
    public let native: AuthorizationRequest?
}

/// A running browser session the flow may cancel (a newer sign-in, the app's `cancel()`).
@MainActor
public protocol BrowserSession: AnyObject {
    func cancel()
}

/// The system browser, as the platform adapter runs it (`ASWebAuthenticationSession` on
/// Apple platforms; a fake in the tests and the simulator).
@MainActor
public protocol SignInBrowser: AnyObject {
    /// Whether `start` can wait for a `.https(host:path:)` callback (iOS 17.4, macOS 14.4).
    var supportsHTTPSCallbacks: Bool { get }

    /// Starts a session, or returns nil when it could not start (ASWebAuthenticationSession's
    /// `start()` returned false: no presentation anchor, another session on screen).
    ///
    /// `completion` runs on the main actor: the adapter hops there, because the system may
    /// report from any thread. The flow tolerates it being called more than once, late, or
    /// after `cancel()` — such calls are ignored.
    func start(_ request: BrowserRequest,
               completion: @escaping @MainActor @Sendable (BrowserResult) -> Void) -> (any BrowserSession)?

    /// Hand-back without https callbacks: asks the default browser to open the site's URL.
    /// `opened` tells whether it did; UIApplication.open reports that only later, in its own
    /// completion handler, so `opened` may run after this returns. It runs on the main actor.
    func openExternally(_ request: BrowserRequest, opened: @escaping @MainActor @Sendable (Bool) -> Void)
}
