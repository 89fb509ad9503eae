import Foundation

/// How one sign-in ended. Every sign-in the flow starts (or refuses) ends exactly once.
public struct SignInOutcome: Sendable, Equatable, CustomStringConvertible {
    public enum Kind: String, Sendable, Equatable {
        /// A redirect with the right state and a code: the callback with the code was loaded.
        case completed
        /// The browser reported the user closed it: `error=access_denied` was loaded.
        case userCancelled = "user_cancelled"
        /// The provider redirected with `error=` (`reason`: the word passed on).
        case providerError = "provider_error"
        /// `reason`: `state_mismatch`, `invalid_response`, `browser_failed`, `browser_did_not_start`,
        /// `process_ended`; the callback with that error was loaded.
        case failed
        /// A provider URL that cannot be signed in safely (`reason`: the message); nothing loaded.
        case refused
        /// A newer sign-in started while this one ran; nothing loaded for this one.
        case superseded
        /// The app called `cancel()`; nothing loaded.
        case cancelled
        /// The session ended after the WebView was released; nothing loaded.
        case webViewGone = "webview_gone"
        /// A sign-in of a previous process (`SignInFlow.restore`) this configuration no longer
        /// recognises (`reason`: `process_ended`); nothing loaded.
        case lost
    }

    public enum Reason {
        public static let stateMismatch = "state_mismatch"
        public static let invalidResponse = "invalid_response"
        public static let browserFailed = "browser_failed"
        public static let browserDidNotStart = "browser_did_not_start"
        /// The browser session ended with the app's process (`SignInFlow.restore`).
        public static let processEnded = "process_ended"
    }

    public let kind: Kind
    /// The sign-in's number (`BrowserRequest.signIn`); nil for a refusal, which starts nothing.
    public let signIn: Int?
    public let reason: String?

    public init(_ kind: Kind, signIn: Int?, reason: String? = nil) {
        self.kind = kind
        self.signIn = signIn
        self.reason = reason
    }

    public var description: String {
        "\(kind.rawValue)" + (signIn.map { " #\($0)" } ?? "") + (reason.map { " (\($0))" } ?? "")
    }
}
