import Foundation

/// The WebView as the flow needs it: a page load. The flow holds it weakly, so that a
/// completion arriving after the app released its WebView is seen (`webViewGone`) instead
/// of loading into nothing or keeping a dead WebView alive.
@MainActor
public protocol SignInWebView: AnyObject {
    /// A full navigation, not a client-side route: the site's callback sees a normal page load.
    func load(_ url: URL)
}
