import Foundation

/// The wrapper app's one sign-in flow: what the WebView's navigations start, which browser
/// session is current, and what is loaded back into the WebView when it ends. Every decision
/// the platform adapter used to make is here, behind `SignInBrowser` and `SignInWebView`, so
/// that it is tested without WebKit; the adapter only maps the platform's calls onto it.
///
/// Policies:
/// - **Latest sign-in wins.** A navigation that starts a sign-in while another runs cancels the
///   old session (the site already stored the newer `state`, so the old one could only fail)
///   and reports it `superseded`; the old session's late completion is ignored.
/// - **Exactly once.** Each sign-in ends with one outcome and at most one WebView load; a second
///   completion, or one after `cancel()` or supersession, does nothing.
/// - **The same navigation twice** (a popup that WebKit reports through both `decidePolicyFor`
///   and `createWebViewWith`) while its sign-in runs is cancelled and starts nothing.
/// - **A browser that does not start** loads the callback with `error=sign_in_failed` (the
///   site shows its failure page; the proxy logs the cause) and ends `failed` /
///   `browser_did_not_start`, instead of leaving the user on a button that did nothing.
/// - **The app's lifecycle** (iOS): the flow outlives the view that shows the WebView
///   (`attach(webView:)`); a process that dies while a browser session is up is named by the
///   next one (`saved`, `restore(_:)`, SignInFlow+Saved.swift).
@MainActor
public final class SignInFlow {
    /// What the WebView does with a navigation.
    public enum Policy: Sendable, Equatable {
        case allow
        /// The flow took it (a sign-in started, was already running, or was refused).
        case cancel
    }

    public let interceptor: SignInInterceptor
    public let initialURL: URL
    public let strategy: SignInStrategy
    /// `prefersEphemeralWebBrowserSession`: the browser shares no cookies with the user's
    /// browser (no "signed in already", no prompt about sharing website data).
    public let prefersEphemeralSession: Bool
    /// Hand-back returns through a universal link (`open(link:)`) even where the browser could
    /// wait for the https callback itself (`NativeSignInConfiguration.handBackThroughUniversalLinks`).
    public let handBackThroughUniversalLinks: Bool
    private let browser: any SignInBrowser
    /// Weak: the app owns its WebView; a sign-in ending after it is gone loads nothing.
    public private(set) weak var webView: (any SignInWebView)?
    /// Told how each sign-in ended (one call per sign-in), on the main actor.
    public var onOutcome: ((SignInOutcome) -> Void)?
    /// Told `saved` each time a sign-in starts or ends (nil: none runs), on the main actor. Keep
    /// it where it survives the process (UserDefaults) and hand it to `restore(_:)` at the next
    /// launch: iOS ends the browser session with the process, and nothing else would tell.
    public var onSaved: ((String?) -> Void)?

    var running: Running? {
        didSet {
            if running?.number != oldValue?.number { onSaved?(saved) }
        }
    }
    var started = 0

    struct Running {
        let number: Int
        /// The site's navigation that started it, to recognise the same one reported twice.
        let siteURL: URL
        let state: String
        let route: Route
        /// Hand-back through the default browser: it runs outside the app, and the result comes
        /// back as a universal link, even to a process started again.
        let external: Bool
        var session: (any BrowserSession)?
    }

    enum Route {
        case native(AuthorizationRequest)
        /// The site's own callback (its `redirect_uri`), where the result is loaded.
        case handBack(SiteCallback)
    }

    /// Throws when `initialURL` is not an http(s) origin (the callback is built on it), or a
    /// hand-back strategy names no link path or one that is not a path.
    public init(interceptor: SignInInterceptor, initialURL: URL, strategy: SignInStrategy = .native,
                prefersEphemeralSession: Bool = false, handBackThroughUniversalLinks: Bool = false,
                browser: any SignInBrowser, webView: any SignInWebView) throws {
        guard SiteCallback.origin(of: initialURL) != nil else {
            throw NativeSignInError(.initialURL, key: "initialURL",
                                    "the callback needs an http(s) URL with a host: \(initialURL.absoluteString)")
        }
        if case .handBack(let paths) = strategy {
            guard !paths.isEmpty, paths.allSatisfy({ $0.hasPrefix("/") }) else {
                throw NativeSignInError(.configuration, key: "linkPaths",
                                        "the hand-back strategy needs the site's callback paths (\"/users/auth/…/callback\")")
            }
        }
        self.interceptor = interceptor
        self.initialURL = initialURL
        self.strategy = strategy
        self.prefersEphemeralSession = prefersEphemeralSession
        self.handBackThroughUniversalLinks = handBackThroughUniversalLinks
        self.browser = browser
        self.webView = webView
    }

    /// Whether a hand-back sign-in's browser session waits for the site's https callback; if
    /// not, the default browser opens the site's URL and the callback returns as a link.
    private var handBackWaitsForHTTPSCallback: Bool {
        browser.supportsHTTPSCallbacks && !handBackThroughUniversalLinks
    }

    /// Whether a sign-in is under way.
    public var isRunning: Bool { running != nil }

    /// The view that shows the site was made again while the flow lives on (kept in the scene
    /// delegate or the app's model, not in the view): a sign-in under way, or any later one,
    /// loads into `webView` — held weakly, as the first one.
    public func attach(webView: any SignInWebView) {
        self.webView = webView
    }

    /// The WebView asks about a navigation (decidePolicyFor, createWebViewWith).
    public func decide(_ navigation: Navigation) -> Policy {
        let request: AuthorizationRequest
        switch interceptor.decide(navigation) {
        case .allow:
            return .allow
        case .refuse(let error):
            report(SignInOutcome(.refused, signIn: nil, reason: error.description))
            return .cancel
        case .startNativeSignIn(let made):
            request = made
        }
        if let running, running.siteURL == navigation.url, running.state == request.state {
            return .cancel
        }
        let route: Route
        do {
            route = try self.route(siteURL: navigation.url, request: request, external: !handBackWaitsForHTTPSCallback)
        } catch {
            report(SignInOutcome(.refused, signIn: nil, reason: error.description))
            return .cancel
        }
        if let old = running {
            running = nil
            old.session?.cancel()
            report(SignInOutcome(.superseded, signIn: old.number))
        }
        start(siteURL: navigation.url, request: request, route: route)
        return .cancel
    }

    /// `external`: a hand-back sign-in's result can only come back as a universal link, so the
    /// site's callback must be one of the link paths.
    func route(siteURL: URL, request: AuthorizationRequest, external: Bool) throws(NativeSignInError) -> Route {
        switch strategy {
        case .native:
            return .native(request)
        case .handBack(let linkPaths):
            return .handBack(try SiteCallback(siteURL: siteURL, initialURL: initialURL, linkPaths: external ? linkPaths : nil))
        }
    }

    /// Ends the running sign-in, if any: its session is cancelled and nothing is loaded.
    public func cancel() {
        guard let old = running else { return }
        running = nil
        old.session?.cancel()
        report(SignInOutcome(.cancelled, signIn: old.number))
    }

    private func start(siteURL: URL, request: AuthorizationRequest, route: Route) {
        started += 1
        let number = started
        let browserRequest: BrowserRequest
        switch route {
        case .native(let native):
            let callback: BrowserCallback
            if let https = SiteCallback.httpsCallback(native.redirectURI) {
                callback = https
            } else {
                callback = .scheme(native.callbackScheme)
            }
            browserRequest = BrowserRequest(url: native.url, callback: callback, prefersEphemeralSession: prefersEphemeralSession,
                                            signIn: number, provider: native.provider, platform: native.platform,
                                            state: native.state, native: native)
        case .handBack(let site):
            browserRequest = BrowserRequest(url: siteURL, callback: .https(host: site.host, path: site.path),
                                            prefersEphemeralSession: prefersEphemeralSession, signIn: number,
                                            provider: request.provider, platform: request.platform,
                                            state: request.state, native: nil)
        }
        let external: Bool
        if case .handBack = route { external = !handBackWaitsForHTTPSCallback } else { external = false }
        running = Running(number: number, siteURL: siteURL, state: request.state, route: route, external: external,
                          session: nil)

        if external {
            // The default browser, then a universal link (`open(link:)`): nothing to cancel.
            browser.openExternally(browserRequest) { [weak self] opened in
                if !opened { self?.didNotStart(number) }
            }
            return
        } else if let session = browser.start(browserRequest, completion: { [weak self] result in
            self?.complete(number, result)
        }) {
            // A completion delivered during start() has already ended the sign-in.
            if running?.number == number { running?.session = session }
            return
        }
        didNotStart(number)
    }

    /// Only the sign-in that did not start ends: a newer one, or a link that already finished
    /// this one, is left alone.
    private func didNotStart(_ number: Int) {
        guard let failed = running, failed.number == number else { return }
        running = nil
        finish(failed, .browserFailed, reason: SignInOutcome.Reason.browserDidNotStart, redirect: nil)
    }

    /// The browser session's completion, on the main actor. Ignored unless it belongs to the
    /// running sign-in: a superseded or cancelled session, or a second call, does nothing.
    private func complete(_ number: Int, _ result: BrowserResult) {
        guard let ended = running, ended.number == number else { return }
        running = nil
        switch ended.route {
        case .native(let request):
            finish(ended, request.outcome(of: result), reason: nil, redirect: nil)
        case .handBack(let site):
            switch result {
            case .cancelled: finish(ended, .cancelled, reason: nil, redirect: nil)
            case .failed: finish(ended, .browserFailed, reason: nil, redirect: nil)
            case .redirect(let url):
                guard let parts = URLComponents(url: url, resolvingAgainstBaseURL: false), site.isRedirect(parts) else {
                    return finish(ended, .invalidResponse, reason: nil, redirect: nil)
                }
                finish(ended, AuthorizationRequest.outcome(ofRedirectQuery: parts.percentEncodedQuery, state: ended.state),
                       reason: nil, redirect: url)
            }
        }
    }

    /// A universal link that reached the app. Taken only while a hand-back sign-in runs, only
    /// on the site's origin with one of the configured callback paths, and only once; then
    /// loaded into the WebView (a code) or turned into the site's callback with the error.
    /// False: not ours, let the app handle it otherwise.
    public func open(link url: URL) -> Bool {
        guard case .handBack(let linkPaths) = strategy, let ended = running, case .handBack(let site) = ended.route,
              let parts = URLComponents(url: url, resolvingAgainstBaseURL: false),
              SiteCallback.origin(of: url) == site.origin, linkPaths.contains(parts.percentEncodedPath) else {
            return false
        }
        running = nil
        // The link finished it; a browser session still on screen has nothing left to do.
        ended.session?.cancel()
        finish(ended, AuthorizationRequest.outcome(ofRedirectQuery: parts.percentEncodedQuery, state: ended.state),
               reason: nil, redirect: url)
        return true
    }

    /// Loads the result into the WebView (if it is still there) and reports the outcome.
    /// `redirect`: the hand-back redirect, loaded unchanged when it carries the code.
    func finish(_ ended: Running, _ outcome: AuthorizationRequest.Outcome, reason: String?, redirect: URL?) {
        let load: URL?
        switch ended.route {
        case .native(let request):
            load = try? request.callbackURL(initialURL: initialURL, outcome: outcome)
        case .handBack(let site):
            if case .code = outcome { load = redirect } else { load = site.url(state: ended.state, error: outcome.errorWord!) }
        }
        guard let webView else {
            return report(SignInOutcome(.webViewGone, signIn: ended.number))
        }
        if let load { webView.load(load) }
        report(Self.outcome(outcome, signIn: ended.number, reason: reason))
    }

    static func outcome(_ outcome: AuthorizationRequest.Outcome, signIn: Int, reason: String?) -> SignInOutcome {
        switch outcome {
        case .code: return SignInOutcome(.completed, signIn: signIn)
        case .cancelled: return SignInOutcome(.userCancelled, signIn: signIn)
        case .providerError(let word): return SignInOutcome(.providerError, signIn: signIn, reason: word)
        case .browserFailed: return SignInOutcome(.failed, signIn: signIn, reason: reason ?? SignInOutcome.Reason.browserFailed)
        case .invalidResponse: return SignInOutcome(.failed, signIn: signIn, reason: SignInOutcome.Reason.invalidResponse)
        case .stateMismatch: return SignInOutcome(.failed, signIn: signIn, reason: SignInOutcome.Reason.stateMismatch)
        }
    }

    func report(_ outcome: SignInOutcome) {
        onOutcome?(outcome)
    }
}
