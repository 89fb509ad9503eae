// The WKWebView side of the flow: the app's own delegates ask it first.
//
// NOT RUN IN THIS REPOSITORY: it builds only where WebKit and AuthenticationServices exist (iOS,
// macOS). scripts/test-apple-adapter type-checks it against declaration-only stubs
// (Apple/adapter-stubs): types and isolation, not behaviour.
//
// Composition: this object is NOT a delegate. The app keeps its WKNavigationDelegate and
// WKUIDelegate (didFinish, didFail, webViewWebContentProcessDidTerminate, JavaScript panels,
// its own popups) and calls `policy(for:)` in decidePolicyFor and `shouldCreateWindow(for:)`
// in createWebViewWith — two lines, and nothing of the app's is hidden behind a forwarder.
#if canImport(WebKit) && canImport(AuthenticationServices)
import Foundation
import WebKit

/// The flow loads into the WebView itself; held weakly, so a released WebView is seen.
extension WKWebView: SignInWebView {
    public func load(_ url: URL) {
        _ = load(URLRequest(url: url))
    }
}

@MainActor
public final class WebViewSignIn {
    public let flow: SignInFlow
    private let browser: SystemBrowser

    /// `prefersEphemeralSession`: ASWebAuthenticationSession's prefersEphemeralWebBrowserSession.
    /// `handBackThroughUniversalLinks`: the configuration's `OAuthHandBackUniversalLinks`.
    public init(webView: WKWebView, interceptor: SignInInterceptor, initialURL: URL,
                strategy: SignInStrategy = .native, prefersEphemeralSession: Bool = false,
                handBackThroughUniversalLinks: Bool = false) throws {
        browser = SystemBrowser(webView: webView)
        flow = try SignInFlow(interceptor: interceptor, initialURL: initialURL, strategy: strategy,
                              prefersEphemeralSession: prefersEphemeralSession,
                              handBackThroughUniversalLinks: handBackThroughUniversalLinks, browser: browser, webView: webView)
    }

    /// In `webView(_:decidePolicyFor:decisionHandler:)`, first: `.cancel` means the flow took
    /// the navigation (call the handler with `.cancel`); `.allow` means decide as you would.
    /// A nil targetFrame is a new window (`window.open`, `target=_blank`).
    public func policy(for action: WKNavigationAction) -> WKNavigationActionPolicy {
        guard let url = action.request.url else { return .allow }
        let target: Navigation.Target = action.targetFrame.map { $0.isMainFrame ? .mainFrame : .subframe } ?? .popup
        return flow.decide(Navigation(url: url, target: target)) == .cancel ? .cancel : .allow
    }

    /// In `webView(_:createWebViewWith:for:windowFeatures:)`, first: false means the flow took
    /// the popup (return nil); true means create (or refuse) the window as you would.
    public func shouldCreateWindow(for action: WKNavigationAction) -> Bool {
        guard let url = action.request.url else { return true }
        return flow.decide(Navigation(url: url, target: .popup)) == .allow
    }

    /// Hand-back: from `onOpenURL` / `application(_:continue:restorationHandler:)`. True when
    /// the link was the running sign-in's and has been loaded into the WebView.
    public func open(link url: URL) -> Bool {
        flow.open(link: url)
    }

    public func cancel() {
        flow.cancel()
    }

    /// The view that shows the site was made again (a SwiftUI view with a new identity, a scene
    /// connected again) while this object lives on — keep it in the scene delegate or the app's
    /// model, not in the view: the sign-in under way, and later ones, present over and load into
    /// `webView`.
    public func attach(webView: WKWebView) {
        browser.webView = webView
        flow.attach(webView: webView)
    }
}
#endif
