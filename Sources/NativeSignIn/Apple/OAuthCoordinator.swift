// The iOS adapter: WebKit and AuthenticationServices around the tested core.
//
// NOT COMPILED OR TESTED IN THIS REPOSITORY: it builds only where WebKit and
// AuthenticationServices exist (iOS, macOS), and the package is built and tested on Linux.
// It is kept to the platform calls; every decision (what to intercept, the native request,
// the callback URL) is `SignInInterceptor` and `AuthorizationRequest`, which the tests cover.
//
// The callback scheme is NOT registered in CFBundleURLTypes: ASWebAuthenticationSession
// catches its own `callbackURLScheme`, and a registered scheme risks the redirect being routed
// to application(_:open:) instead of the session.
#if canImport(WebKit) && canImport(AuthenticationServices)
import AuthenticationServices
import Foundation
import WebKit

@MainActor
public final class OAuthCoordinator: NSObject, WKNavigationDelegate, WKUIDelegate,
    ASWebAuthenticationPresentationContextProviding {
    private let interceptor: SignInInterceptor
    private let initialURL: URL
    private weak var webView: WKWebView?
    private var session: ASWebAuthenticationSession?
    /// Told when a provider URL is refused (no state, …): show the user a message.
    public var onRefusal: ((NativeSignInError) -> Void)?

    public init(interceptor: SignInInterceptor, initialURL: URL) {
        self.interceptor = interceptor
        self.initialURL = initialURL
    }

    /// Becomes the web view's navigation and UI delegate.
    public func attach(to webView: WKWebView) {
        self.webView = webView
        webView.navigationDelegate = self
        webView.uiDelegate = self
    }

    // A navigation whose targetFrame is nil opens a new window (target=_blank, window.open).
    public func webView(_ webView: WKWebView, decidePolicyFor navigationAction: WKNavigationAction,
                        decisionHandler: @escaping @MainActor (WKNavigationActionPolicy) -> Void) {
        guard let url = navigationAction.request.url else { return decisionHandler(.allow) }
        let target: Navigation.Target = navigationAction.targetFrame.map { $0.isMainFrame ? .mainFrame : .subframe } ?? .popup
        decisionHandler(handle(Navigation(url: url, target: target)) ? .cancel : .allow)
    }

    // window.open and target=_blank: a sign-in runs natively and no window opens. Other
    // popups get WKWebView's default without a UI delegate: none.
    public func webView(_ webView: WKWebView, createWebViewWith configuration: WKWebViewConfiguration,
                        for navigationAction: WKNavigationAction, windowFeatures: WKWindowFeatures) -> WKWebView? {
        if let url = navigationAction.request.url { _ = handle(Navigation(url: url, target: .popup)) }
        return nil
    }

    /// True when the WebView's load must be cancelled.
    private func handle(_ navigation: Navigation) -> Bool {
        switch interceptor.decide(navigation) {
        case .allow:
            return false
        case .refuse(let error):
            onRefusal?(error)
            return true
        case .startNativeSignIn(let request):
            // One sign-in at a time: a popup reported through both delegate methods, or a
            // double tap, must not open a second browser.
            if session == nil { start(request) }
            return true
        }
    }

    private func start(_ request: AuthorizationRequest) {
        let session = ASWebAuthenticationSession(url: request.url, callbackURLScheme: request.callbackScheme) {
            url, error in
            let result: BrowserResult
            if let url {
                result = .redirect(url)
            } else if (error as? ASWebAuthenticationSessionError)?.code == .canceledLogin {
                result = .cancelled
            } else {
                result = .failed
            }
            Task { @MainActor [weak self] in self?.finish(request, result) }
        }
        session.presentationContextProvider = self
        self.session = session
        if !session.start() { finish(request, .failed) }
    }

    // A full navigation, not a client-side route: the site's callback sees a normal page load.
    private func finish(_ request: AuthorizationRequest, _ result: BrowserResult) {
        session = nil
        guard let url = try? request.callbackURL(initialURL: initialURL, result: result) else { return }
        webView?.load(URLRequest(url: url))
    }

    public func presentationAnchor(for session: ASWebAuthenticationSession) -> ASPresentationAnchor {
        webView?.window ?? ASPresentationAnchor()
    }
}
#endif
