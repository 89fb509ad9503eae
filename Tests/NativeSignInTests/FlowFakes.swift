import Foundation
@testable import NativeSignIn

/// A system browser that records what the flow asked of it; the test fires completions.
@MainActor
final class FakeBrowser: SignInBrowser {
    var supportsHTTPSCallbacks = true
    /// The next `start` (or external open) fails, as ASWebAuthenticationSession.start() → false.
    var failNextStart = false
    private(set) var started: [BrowserRequest] = []
    private(set) var openedExternally: [BrowserRequest] = []
    private(set) var cancelled: [Int] = []
    private var completions: [Int: @MainActor @Sendable (BrowserResult) -> Void] = [:]

    func start(_ request: BrowserRequest,
               completion: @escaping @MainActor @Sendable (BrowserResult) -> Void) -> (any BrowserSession)? {
        started.append(request)
        if failNextStart {
            failNextStart = false
            return nil
        }
        completions[request.signIn] = completion
        return FakeSession(browser: self, signIn: request.signIn)
    }

    /// An external open whose answer the test gives later (`reportExternalOpen`), as UIKit does.
    var answerExternalOpensLater = false
    private var externalOpenAnswers: [Int: @MainActor @Sendable (Bool) -> Void] = [:]

    func openExternally(_ request: BrowserRequest, opened: @escaping @MainActor @Sendable (Bool) -> Void) {
        openedExternally.append(request)
        if answerExternalOpensLater {
            externalOpenAnswers[request.signIn] = opened
        } else if failNextStart {
            failNextStart = false
            opened(false)
        } else {
            opened(true)
        }
    }

    func reportExternalOpen(_ signIn: Int, _ success: Bool) {
        externalOpenAnswers[signIn]!(success)
    }

    /// The session's completion handler fires (as often as the test says).
    func complete(_ signIn: Int, _ result: BrowserResult) {
        completions[signIn]!(result)
    }

    fileprivate func recordCancel(_ signIn: Int) {
        cancelled.append(signIn)
    }
}

@MainActor
final class FakeSession: BrowserSession {
    private weak var browser: FakeBrowser?
    let signIn: Int

    init(browser: FakeBrowser, signIn: Int) {
        self.browser = browser
        self.signIn = signIn
    }

    func cancel() {
        browser?.recordCancel(signIn)
    }
}

/// Where a fake WebView writes its loads: it outlives the WebView, so that a test can see that
/// nothing was loaded after the app released it.
@MainActor
final class LoadLog {
    var loads: [URL] = []
}

@MainActor
final class FakeWebView: SignInWebView {
    let log: LoadLog

    init(log: LoadLog = LoadLog()) {
        self.log = log
    }

    func load(_ url: URL) {
        log.loads.append(url)
    }
}

/// One app: a flow over the fakes, and every outcome it reported.
@MainActor
final class FlowApp {
    nonisolated static let site = URL(string: "https://site.example/home")!
    let browser = FakeBrowser()
    private let log = LoadLog()
    var webView: FakeWebView?
    let flow: SignInFlow
    private(set) var outcomes: [SignInOutcome] = []

    init(strategy: SignInStrategy = .native, ephemeral: Bool = false, httpsCallbacks: Bool = true,
         universalLinks: Bool = false) throws {
        browser.supportsHTTPSCallbacks = httpsCallbacks
        let webView = FakeWebView(log: log)
        self.webView = webView
        flow = try SignInFlow(interceptor: Fixtures.interceptor, initialURL: Self.site, strategy: strategy,
                              prefersEphemeralSession: ephemeral, handBackThroughUniversalLinks: universalLinks,
                              browser: browser, webView: webView)
        flow.onOutcome = { [unowned self] in self.outcomes.append($0) }
    }

    /// The loads, kept after the WebView is released.
    var loads: [URL] { log.loads }

    func tap(_ url: String, _ target: Navigation.Target = .mainFrame) -> SignInFlow.Policy {
        flow.decide(Navigation(url: URL(string: url)!, target: target))
    }

    nonisolated static func google(state: String) -> String {
        "https://accounts.google.com/o/oauth2/v2/auth?client_id=web&scope=openid&state=\(state)"
            + "&redirect_uri=https%3A%2F%2Fsite.example%2Fusers%2Fauth%2Fgoogle%2Fcallback"
    }

    nonisolated static func googleRedirect(_ query: String) -> BrowserResult {
        .redirect(URL(string: "com.googleusercontent.apps.123-ios:/oauth2redirect?" + query)!)
    }
}
