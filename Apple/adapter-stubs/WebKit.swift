// Declaration-only stand-in for the part of WebKit (iOS; macOS with -D APPKIT) that Sources/NativeSignIn/Apple (and the
// app in DocumentedApp.swift) calls — NOT WebKit. Compiled by scripts/test-apple-adapter into a
// module named WebKit; nothing here runs (bodies trap).
// Declarations and isolation copied from Apple's WebKit reference (developer.apple.com/documentation/webkit):
// `@MainActor class WKWebView`, `@MainActor class WKNavigationAction`, `@MainActor class WKFrameInfo`,
// `@MainActor protocol WKNavigationDelegate`, a decision handler `@escaping @MainActor @Sendable`.
// Not copyable here: the delegates' requirements are `@objc optional` in WebKit, which needs the
// Objective-C runtime; they are declared as ordinary requirements, so a conforming type must
// implement each one (stricter than WebKit, never looser, for the members declared).
// Apple's framework modules re-export Foundation (`export *` in their module maps).
@_exported import Foundation
// Linux only: URLRequest lives in FoundationNetworking there (in Foundation on Apple platforms);
// re-exported so that the adapter, which imports Foundation and WebKit, sees it as on iOS.
#if canImport(FoundationNetworking)
@_exported import FoundationNetworking
#endif
#if APPKIT
import AppKit
#else
import UIKit
#endif

/// WebKit's navigation token; only passed through (its isolation is not copied).
open class WKNavigation: NSObject {}

/// Passed through only (isolation not copied).
open class WKWebViewConfiguration: NSObject {}

/// Passed through only (isolation not copied).
open class WKWindowFeatures: NSObject {}

@MainActor
open class WKFrameInfo: NSObject {
    open var isMainFrame: Bool { fatalError("declaration-only stub") }
}

@MainActor
open class WKNavigationAction: NSObject {
    open var request: URLRequest { fatalError("declaration-only stub") }
    /// `nil` for a new window (`window.open`, `target=_blank`).
    open var targetFrame: WKFrameInfo? { fatalError("declaration-only stub") }
}

/// An Objective-C NS_ENUM: not frozen (the stubs are built with library evolution, so a `switch`
/// needs `@unknown default` as it does against WebKit).
public enum WKNavigationActionPolicy: Int, Sendable {
    case cancel = 0
    case allow = 1
    case download = 2
}

// A UIView on iOS, an NSView on macOS (-D APPKIT).
#if APPKIT
@MainActor
open class WKWebView: NSView {
    public init(frame: CGRect, configuration: WKWebViewConfiguration) { fatalError("declaration-only stub") }
}
#else
@MainActor
open class WKWebView: UIView {
    public init(frame: CGRect, configuration: WKWebViewConfiguration) { fatalError("declaration-only stub") }
}
#endif

// `public`, not `open`: a Swift extension cannot declare overridable members (nothing here
// overrides them).
extension WKWebView {
    // Objective-C methods are imported with a discardable result.
    @discardableResult
    public func load(_ request: URLRequest) -> WKNavigation? { fatalError("declaration-only stub") }

    public var navigationDelegate: (any WKNavigationDelegate)? {
        get { fatalError("declaration-only stub") }
        set { fatalError("declaration-only stub") }
    }

    public var uiDelegate: (any WKUIDelegate)? {
        get { fatalError("declaration-only stub") }
        set { fatalError("declaration-only stub") }
    }
}

@MainActor
public protocol WKNavigationDelegate: NSObjectProtocol {
    func webView(_ webView: WKWebView, decidePolicyFor navigationAction: WKNavigationAction,
                 decisionHandler: @escaping @MainActor @Sendable (WKNavigationActionPolicy) -> Void)
}

@MainActor
public protocol WKUIDelegate: NSObjectProtocol {
    func webView(_ webView: WKWebView, createWebViewWith configuration: WKWebViewConfiguration,
                 for navigationAction: WKNavigationAction, windowFeatures: WKWindowFeatures) -> WKWebView?
}
