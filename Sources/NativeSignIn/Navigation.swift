import Foundation

/// A load the WebView is about to make, as the platform adapter describes it.
public struct Navigation: Sendable, Equatable {
    public enum Target: Sendable, Equatable {
        /// The top-level document (WKNavigationAction.targetFrame?.isMainFrame == true;
        /// Android: shouldOverrideUrlLoading for the WebView itself).
        case mainFrame
        /// A new window: `window.open`, `target=_blank` (WKNavigationAction.targetFrame == nil,
        /// or WKUIDelegate createWebViewWith; Android: onCreateWindow). Sites open sign-in in
        /// a popup, and a popup is as much a top-level browsing context as the main frame.
        case popup
        /// An iframe. Never a sign-in: providers refuse to be framed for the authorization
        /// page, and what does load in frames (Google's One Tap, Facebook's plugins) must keep
        /// working inside the WebView.
        case subframe
    }

    public var url: URL
    public var target: Target

    public init(url: URL, target: Target) {
        self.url = url
        self.target = target
    }
}

/// The `platform=` value of `/_oauth_callback`; the proxy picks the native client by it.
public enum Platform: String, Sendable, Equatable {
    case ios
    case android
}
