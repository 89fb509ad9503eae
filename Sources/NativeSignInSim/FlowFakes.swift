import Foundation
import NativeSignIn

/// What the flow did, in order, as the protocol's events.
@MainActor
final class EventLog {
    var events: [[String: Any]] = []

    func take() -> [[String: Any]] {
        defer { events = [] }
        return events
    }

    static func session(_ signIn: Int?) -> Any {
        signIn.map { "s\($0)" } ?? NSNull()
    }
}

/// The system browser the flow starts: records each start, keeps each completion for
/// `browser_complete`, and fails the next start when told.
@MainActor
final class SimBrowser: SignInBrowser {
    let supportsHTTPSCallbacks: Bool
    private let log: EventLog
    private var failNextStart: String?
    private var completions: [String: @MainActor @Sendable (BrowserResult) -> Void] = [:]

    init(supportsHTTPSCallbacks: Bool, log: EventLog) {
        self.supportsHTTPSCallbacks = supportsHTTPSCallbacks
        self.log = log
    }

    func failNext(_ reason: String) {
        failNextStart = reason
    }

    func start(_ request: BrowserRequest,
               completion: @escaping @MainActor @Sendable (BrowserResult) -> Void) -> (any BrowserSession)? {
        let id = "s\(request.signIn)"
        if let reason = failNextStart {
            failNextStart = nil
            FileHandle.standardError.write(Data("browser session \(id) did not start: \(reason)\n".utf8))
            return nil
        }
        let callback: [String: Any]
        switch request.callback {
        case .scheme(let scheme): callback = ["scheme": scheme]
        case .https(let host, let path): callback = ["https": ["host": host, "path": path]]
        }
        log.events.append(["event": "browser_started", "session": id, "url": request.url.absoluteString,
                           "callback": callback, "ephemeral": request.prefersEphemeralSession,
                           "provider": request.provider, "platform": request.platform.rawValue,
                           "client_id": request.native?.clientID ?? NSNull(),
                           "redirect_uri": request.native?.redirectURI ?? NSNull(), "state": request.state,
                           "code_verifier": request.native?.codeVerifier ?? NSNull()])
        completions[id] = completion
        return SimBrowserSession(id: id, log: log)
    }

    func openExternally(_ request: BrowserRequest, opened: @escaping @MainActor @Sendable (Bool) -> Void) {
        if let reason = failNextStart {
            failNextStart = nil
            FileHandle.standardError.write(Data("the default browser did not open: \(reason)\n".utf8))
            return opened(false)
        }
        log.events.append(["event": "external_browser_opened", "url": request.url.absoluteString])
        opened(true)
    }

    /// The session's completion handler fires; false when no such session was started.
    func complete(_ id: String, _ result: BrowserResult) -> Bool {
        guard let completion = completions[id] else { return false }
        completion(result)
        return true
    }
}

@MainActor
final class SimBrowserSession: BrowserSession {
    private let id: String
    private let log: EventLog

    init(id: String, log: EventLog) {
        self.id = id
        self.log = log
    }

    func cancel() {
        log.events.append(["event": "browser_cancelled", "session": id])
    }
}

@MainActor
final class SimWebView: SignInWebView {
    private let log: EventLog

    init(log: EventLog) {
        self.log = log
    }

    func load(_ url: URL) {
        log.events.append(["event": "load", "url": url.absoluteString])
    }
}
