// Not a stub: the integration docs/native.md shows an app (“The adapter, composed with your own
// delegates”, “Hand-back”), written out as one view controller and type-checked by
// scripts/test-apple-adapter against NativeSignIn and the stubs, so that the documented
// delegate methods, labels and isolation stay those of the adapter and of WebKit's declarations.
// Keep it in step with the snippets in docs/native.md.
import NativeSignIn
import UIKit
import WebKit

@MainActor
final class DocumentedWebViewController: UIViewController, WKNavigationDelegate, WKUIDelegate {
    private var webView: WKWebView!
    private var signIn: WebViewSignIn?

    override func viewDidLoad() {
        super.viewDidLoad()
        webView = WKWebView(frame: .zero, configuration: WKWebViewConfiguration())
        webView.navigationDelegate = self
        webView.uiDelegate = self
        do {
            // Once, where the WebView is made. Keep a strong reference to `signIn`.
            let configuration = try NativeSignInConfiguration.load(bundle: .main)
            if let interceptor = configuration.interceptor(platform: .ios) {
                signIn = try WebViewSignIn(webView: webView, interceptor: interceptor,
                                           initialURL: URL(string: "https://app.example.com")!,
                                           prefersEphemeralSession: false,
                                           handBackThroughUniversalLinks: configuration.handBackThroughUniversalLinks)
                signIn?.flow.onOutcome = { outcome in print("sign-in \(outcome)") }
            }
        } catch {
            print("sign-in is misconfigured: \(error)")
        }
        webView.load(URLRequest(url: URL(string: "https://app.example.com")!))
        // The app's lifecycle ("The phone's lifecycle", iOS).
        signIn?.flow.onSaved = { UserDefaults.standard.set($0, forKey: "NativeSignIn.saved") }
        signIn?.flow.restore(UserDefaults.standard.string(forKey: "NativeSignIn.saved"))
    }

    /// A view made again while `signIn` lives on.
    func viewMadeAgain(with newWebView: WKWebView) {
        signIn?.attach(webView: newWebView)
    }

    // WKNavigationDelegate
    func webView(_ webView: WKWebView, decidePolicyFor action: WKNavigationAction,
                 decisionHandler: @escaping @MainActor @Sendable (WKNavigationActionPolicy) -> Void) {
        if signIn?.policy(for: action) == .cancel { return decisionHandler(.cancel) }
        decisionHandler(.allow)                       // …or whatever your app decides
    }

    // WKUIDelegate
    func webView(_ webView: WKWebView, createWebViewWith configuration: WKWebViewConfiguration,
                 for action: WKNavigationAction, windowFeatures: WKWindowFeatures) -> WKWebView? {
        guard signIn?.shouldCreateWindow(for: action) ?? true else { return nil }
        return nil                                    // …or your own popup handling
    }

    /// Hand-back: from `onOpenURL` / `application(_:continue:restorationHandler:)`.
    func open(link url: URL) -> Bool {
        if signIn?.open(link: url) == true { return true }
        return false                                  // …the app's own link handling
    }
}
