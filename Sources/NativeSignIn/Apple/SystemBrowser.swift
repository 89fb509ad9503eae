// ASWebAuthenticationSession as the flow's `SignInBrowser`.
//
// NOT RUN IN THIS REPOSITORY: it builds only where WebKit and AuthenticationServices exist (iOS,
// macOS). scripts/test-apple-adapter type-checks it (Swift 6, warnings as errors) against
// declaration-only stubs of the members it calls (Apple/adapter-stubs): types and isolation, not
// behaviour. Every decision is `SignInFlow`'s, tested with fakes.
//
// A custom callback scheme is NOT registered in CFBundleURLTypes: the session catches its own
// scheme, and a registered one risks the redirect going to application(_:open:) instead.
#if canImport(WebKit) && canImport(AuthenticationServices)
import AuthenticationServices
import WebKit
#if canImport(UIKit)
import UIKit
#elseif canImport(AppKit)
import AppKit
#endif

@MainActor
final class SystemBrowser: NSObject, SignInBrowser, ASWebAuthenticationPresentationContextProviding {
    /// What the session presents over; `WebViewSignIn.attach(webView:)` replaces it.
    weak var webView: WKWebView?

    init(webView: WKWebView) {
        self.webView = webView
    }

    var supportsHTTPSCallbacks: Bool {
        if #available(iOS 17.4, macOS 14.4, *) { return true }
        return false
    }

    func start(_ request: BrowserRequest,
               completion: @escaping @MainActor @Sendable (BrowserResult) -> Void) -> (any BrowserSession)? {
        // The system calls this on a queue of its choosing; under Swift 6 a main-actor closure
        // run off the main thread traps (SE-0423), so it is @Sendable and hops explicitly.
        let handler: @Sendable (URL?, (any Error)?) -> Void = { url, error in
            let result: BrowserResult
            if let url {
                result = .redirect(url)
            } else if (error as? ASWebAuthenticationSessionError)?.code == .canceledLogin {
                result = .cancelled
            } else {
                result = .failed
            }
            Task { @MainActor in completion(result) }
        }
        let session: ASWebAuthenticationSession
        switch request.callback {
        case .scheme(let scheme):
            session = ASWebAuthenticationSession(url: request.url, callbackURLScheme: scheme, completionHandler: handler)
        case .https(let host, let path):
            guard #available(iOS 17.4, macOS 14.4, *) else { return nil }
            session = ASWebAuthenticationSession(url: request.url, callback: .https(host: host, path: path),
                                                 completionHandler: handler)
        }
        session.prefersEphemeralWebBrowserSession = request.prefersEphemeralSession
        session.presentationContextProvider = self
        // Without a window there is nothing to present over: report "did not start" instead of
        // presenting from a detached anchor, which shows nothing.
        guard webView?.window != nil, session.start() else { return nil }
        return RunningSession(session)
    }

    func openExternally(_ request: BrowserRequest, opened: @escaping @MainActor @Sendable (Bool) -> Void) {
        #if canImport(UIKit)
        // UIKit declares the completion `@MainActor @Sendable`: it runs on the main actor.
        UIApplication.shared.open(request.url, options: [:]) { success in
            opened(success)
        }
        #else
        opened(NSWorkspace.shared.open(request.url))
        #endif
    }

    // nonisolated: the SDKs disagree on this requirement — `@MainActor` in today's
    // (a `@preconcurrency` conformance is then an error under warnings-as-errors: "has no
    // effect"), nonisolated in older ones (a main-actor witness is then an error in Swift 6).
    // A nonisolated witness fits both; the system asks on the main thread, which
    // assumeIsolated checks (it traps otherwise, as a @preconcurrency conformance would).
    nonisolated func presentationAnchor(for session: ASWebAuthenticationSession) -> ASPresentationAnchor {
        MainActor.assumeIsolated {
            // start() checked the window; it can only be gone if the WebView left it since.
            webView?.window ?? ASPresentationAnchor()
        }
    }
}

/// Keeps the session alive while it runs (the flow holds this) and cancels it.
@MainActor
private final class RunningSession: BrowserSession {
    private let session: ASWebAuthenticationSession

    init(_ session: ASWebAuthenticationSession) {
        self.session = session
    }

    func cancel() {
        session.cancel()
    }
}
#endif
