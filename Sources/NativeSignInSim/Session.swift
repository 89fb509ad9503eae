import Foundation
import NativeSignIn

/// One wrapper app: its interceptor once configured, the sign-ins under way by id (`decide` /
/// `callback`, the library's pure functions), and its one `SignInFlow` over a fake browser and a
/// fake WebView (`navigate`, `browser_complete`, …). Every decision is the library's; this only
/// translates JSON to its calls and back. The protocol: IntegrationTests/e2e/sim-protocol.md.
///
/// The lifecycle ops as iOS has them: `activity_recreated` is the view showing the WebView made
/// again while the flow lives on (a new WebView attached to it); `process_restarted` ends the
/// process with its browser sessions and starts a new flow that restores what the app kept in
/// UserDefaults (`onSaved`); `activity_finished` is the screen closed for good (`cancel()`).
/// `activity_result` is Android's: iOS reports each session through its own completion.
///
/// Anything else, or a request the library throws on, is answered `{"error":message}`.
@MainActor
final class Session {
    private var configured = false
    /// nil when `OAuthEnabled` is off: the app then lets the WebView load everything.
    private var interceptor: SignInInterceptor?
    private var requests: [String: AuthorizationRequest] = [:]
    private var issued = 0
    private let log = EventLog()
    private var flow: SignInFlow?
    private var browser: SimBrowser?
    /// The app's strong reference to its WebView; `webview_gone` drops it.
    private var webView: SimWebView?
    /// Makes the app's flow (again, after `process_restarted`).
    private var newFlow: (() throws -> (SignInFlow, SimBrowser, SimWebView))?
    /// What the app keeps in UserDefaults: the flow's last `onSaved`.
    private var persisted: String?

    func handle(_ line: String) -> [String: Any] {
        do {
            let request = try JSONLine(line)
            switch try request.string("op") {
            case "configure": return try configure(request)
            case "decide": return try decide(request)
            case "callback": return try callback(request)
            case "navigate": return try navigate(request)
            case "browser_complete": return try browserComplete(request)
            case "fail_next_start": return try failNextStart(request)
            case "cancel": return try flowOp(request) { $0.cancel() }
            case "webview_gone": return try flowOp(request) { _ in self.webView = nil }
            case "open_link": return try openLink(request)
            case "activity_recreated": return try viewRecreated(request)
            case "process_restarted": return try processRestarted(request)
            case "activity_finished": return try screenClosed(request)
            case "activity_result":
                throw SimError("activity_result is Android's: on iOS each browser session completes through its own "
                               + "handler (browser_complete)")
            case let op: throw SimError("unknown op \"\(op)\"")
            }
        } catch {
            return ["error": "\(error)"]
        }
    }

    private func configure(_ request: JSONLine) throws -> [String: Any] {
        guard !configured else { throw SimError("configure comes once") }
        let app = try AppSettings(request)
        let interceptor = app.configuration.interceptor(platform: app.platform, callbackPath: app.callbackPath)
        // Nothing is kept until the flow is made too: a configure the flow refuses (its initial_url,
        // its link paths) changes nothing, and a corrected one may follow.
        if let interceptor, let initialURL = app.initialURL {
            let newFlow = { [log, weak self] () throws -> (SignInFlow, SimBrowser, SimWebView) in
                let browser = SimBrowser(supportsHTTPSCallbacks: app.httpsCallbacks, log: log)
                let webView = SimWebView(log: log)
                let flow = try SignInFlow(interceptor: interceptor, initialURL: initialURL, strategy: app.strategy,
                                          prefersEphemeralSession: app.ephemeral,
                                          handBackThroughUniversalLinks: app.configuration.handBackThroughUniversalLinks,
                                          browser: browser, webView: webView)
                flow.onOutcome = { [log] outcome in
                    log.events.append(["event": "outcome", "session": EventLog.session(outcome.signIn),
                                       "outcome": outcome.kind.rawValue, "reason": outcome.reason ?? NSNull()])
                }
                flow.onSaved = { saved in self?.persisted = saved }
                return (flow, browser, webView)
            }
            (flow, browser, webView) = try newFlow()
            self.newFlow = newFlow
        }
        self.interceptor = interceptor
        configured = true
        return ["enabled": app.configuration.enabled,
                "providers": app.configuration.providers.map { provider -> [String: Any] in
                    ["name": provider.name, "client_id": provider.clientID, "redirect_uri": provider.redirectURI,
                     "callback_scheme": provider.callbackScheme, "pkce": provider.usesPKCE]
                }]
    }

    private func decide(_ request: JSONLine) throws -> [String: Any] {
        try request.only(["op", "url", "target"])
        guard configured else { throw SimError("decide before configure") }
        let navigation = Navigation(url: try request.url("url"), target: try Self.target(request.string("target")))
        guard let interceptor else { return ["decision": "allow"] }
        switch interceptor.decide(navigation) {
        case .allow:
            return ["decision": "allow"]
        case .refuse(let error):
            return ["decision": "refuse", "error": error.description, "key": error.key ?? NSNull()]
        case .startNativeSignIn(let started):
            issued += 1
            let id = "r\(issued)"
            requests[id] = started
            return ["decision": "start", "id": id, "url": started.url.absoluteString,
                    "provider": started.provider, "platform": started.platform.rawValue,
                    "client_id": started.clientID, "redirect_uri": started.redirectURI,
                    "callback_scheme": started.callbackScheme, "state": started.state,
                    "code_verifier": started.codeVerifier ?? NSNull()]
        }
    }

    private func callback(_ request: JSONLine) throws -> [String: Any] {
        try request.only(["op", "id", "initial_url", "result"])
        let id = try request.string("id")
        guard let started = requests[id] else { throw SimError("no sign-in under way with id \"\(id)\"") }
        let url = try started.callbackURL(initialURL: request.url("initial_url"),
                                          result: Self.result(request.value("result")))
        requests[id] = nil
        return ["url": url.absoluteString]
    }

    // MARK: the flow

    /// The flow, or nil when `OAuthEnabled` is off (the app then lets everything through).
    private func configuredFlow() throws -> SignInFlow? {
        guard configured else { throw SimError("a flow op before configure") }
        guard interceptor != nil else { return nil }
        guard let flow else { throw SimError("the flow ops need configure's initial_url") }
        return flow
    }

    private func flowOp(_ request: JSONLine, _ action: (SignInFlow) -> Void) throws -> [String: Any] {
        try request.only(["op"])
        if let flow = try configuredFlow() { action(flow) }
        return ["events": log.take()]
    }

    // MARK: the app's lifecycle (iOS)

    /// The view showing the site made again (a SwiftUI view with a new identity, a scene
    /// connected again) while the flow, kept outside it, lives on: a new WebView is attached.
    private func viewRecreated(_ request: JSONLine) throws -> [String: Any] {
        try request.only(["op"])
        guard let flow = try configuredFlow() else { return ["events": [], "saved": NSNull()] }
        let webView = SimWebView(log: log)
        flow.attach(webView: webView)
        self.webView = webView
        return ["events": log.take(), "saved": persisted ?? NSNull()]
    }

    /// The process ended (its browser sessions with it: their completions never come) and a
    /// new one starts, restoring what the old one kept in UserDefaults.
    private func processRestarted(_ request: JSONLine) throws -> [String: Any] {
        try request.only(["op"])
        guard try configuredFlow() != nil, let newFlow else { return ["events": [], "saved": NSNull()] }
        let kept = persisted
        (flow, browser, webView) = try newFlow()
        flow?.restore(kept)
        return ["events": log.take(), "saved": kept ?? NSNull()]
    }

    /// The screen holding the WebView closed for good: the app calls `cancel()`.
    private func screenClosed(_ request: JSONLine) throws -> [String: Any] {
        try request.only(["op"])
        guard let flow = try configuredFlow() else { return ["events": [], "close": NSNull()] }
        flow.cancel()
        return ["events": log.take(), "close": "ended"]
    }

    private func navigate(_ request: JSONLine) throws -> [String: Any] {
        try request.only(["op", "url", "target"])
        let navigation = Navigation(url: try request.url("url"), target: try Self.target(request.string("target")))
        guard let flow = try configuredFlow() else { return ["policy": "allow", "events": []] }
        let policy = flow.decide(navigation)
        return ["policy": policy == .allow ? "allow" : "cancel", "events": log.take()]
    }

    private func browserComplete(_ request: JSONLine) throws -> [String: Any] {
        try request.only(["op", "session", "result"])
        let id = try request.string("session")
        let result: BrowserResult
        switch request.value("result") {
        case let word as String where word == "cancelled":
            result = .cancelled
        case let object?:
            let fields = try JSONLine(object: object, field: "result")
            if let reason = try fields.optionalString("failed") {
                try fields.only(["failed"])
                FileHandle.standardError.write(Data("browser session \(id) failed: \(reason)\n".utf8))
                result = .failed
            } else {
                try fields.only(["redirect"])
                result = .redirect(try fields.url("redirect"))
            }
        case nil:
            throw SimError("result is {\"redirect\": URL}, \"cancelled\" or {\"failed\": reason}")
        }
        guard try configuredFlow() != nil, let browser, browser.complete(id, result) else {
            throw SimError("no browser session \"\(id)\" was started")
        }
        return ["events": log.take()]
    }

    private func failNextStart(_ request: JSONLine) throws -> [String: Any] {
        try request.only(["op", "reason"])
        let reason = try request.string("reason")
        if try configuredFlow() != nil { browser?.failNext(reason) }
        return ["events": log.take()]
    }

    private func openLink(_ request: JSONLine) throws -> [String: Any] {
        try request.only(["op", "url"])
        let url = try request.url("url")
        guard let flow = try configuredFlow() else { return ["handled": false, "events": []] }
        let handled = flow.open(link: url)
        return ["handled": handled, "events": log.take()]
    }

    private static func target(_ name: String) throws -> Navigation.Target {
        switch name {
        case "mainFrame": return .mainFrame
        case "popup": return .popup
        case "subframe": return .subframe
        default: throw SimError("target is mainFrame, popup or subframe, not \"\(name)\"")
        }
    }

    private static func result(_ value: Any?) throws -> BrowserResult {
        switch value {
        case let word as String where word == "cancelled": return .cancelled
        case let word as String where word == "failed": return .failed
        case let object?:
            let redirect = try JSONLine(object: object, field: "result")
            try redirect.only(["redirect"])
            return .redirect(try redirect.url("redirect"))
        case nil:
            throw SimError("result is {\"redirect\": URL}, \"cancelled\" or \"failed\"")
        }
    }
}
