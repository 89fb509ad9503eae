// Declaration-only stand-in for the part of AuthenticationServices that
// Sources/NativeSignIn/Apple/SystemBrowser.swift calls (iOS; macOS with -D APPKIT) — NOT
// AuthenticationServices. Compiled by scripts/test-apple-adapter into a module named
// AuthenticationServices; nothing here runs.
// Declarations and isolation copied from Apple's reference
// (developer.apple.com/documentation/authenticationservices):
// - `class ASWebAuthenticationSession` — not main-actor isolated, not Sendable;
// - `typealias CompletionHandler = (URL?, (any Error)?) -> Void` — neither `@Sendable` nor
//   `@MainActor`: the system may call it on any queue;
// - `@MainActor protocol ASWebAuthenticationPresentationContextProviding : NSObjectProtocol` (see below);
// - `init(url:callback:completionHandler:)` and `Callback` from iOS 17.4 / macOS 14.4.
// `@available` is copied but NOT checked on Linux: the compiler ignores iOS and macOS
// availability when it builds for Linux.
// Apple's framework modules re-export Foundation (`export *` in their module maps).
@_exported import Foundation
#if APPKIT
import AppKit

public typealias ASPresentationAnchor = NSWindow
#else
import UIKit

public typealias ASPresentationAnchor = UIWindow
#endif

// Today's SDK declares the protocol `@MainActor`; older SDKs (before the concurrency annotations,
// e.g. the one of Apple's developer-forum thread 714151, Xcode 14) left it nonisolated. The check
// compiles the adapter against both (`-D PRESENTATION_CONTEXT_NONISOLATED`).
#if !PRESENTATION_CONTEXT_NONISOLATED
@MainActor
#endif
public protocol ASWebAuthenticationPresentationContextProviding: NSObjectProtocol {
    func presentationAnchor(for session: ASWebAuthenticationSession) -> ASPresentationAnchor
}

open class ASWebAuthenticationSession: NSObject {
    public typealias CompletionHandler = (URL?, (any Error)?) -> Void

    public init(url URL: URL, callbackURLScheme: String?, completionHandler: @escaping CompletionHandler) {
        fatalError("declaration-only stub")
    }

    @available(iOS 17.4, macOS 14.4, *)
    public init(url URL: URL, callback: Callback, completionHandler: @escaping CompletionHandler) {
        fatalError("declaration-only stub")
    }

    @available(iOS 13.0, macOS 10.15, *)
    weak open var presentationContextProvider: (any ASWebAuthenticationPresentationContextProviding)?

    @available(iOS 13.0, macOS 10.15, *)
    open var prefersEphemeralWebBrowserSession: Bool {
        get { fatalError("declaration-only stub") }
        set { fatalError("declaration-only stub") }
    }

    /// False when the session could not start (no presentation anchor, another session on screen).
    @discardableResult
    open func start() -> Bool { fatalError("declaration-only stub") }

    open func cancel() { fatalError("declaration-only stub") }
}

extension ASWebAuthenticationSession {
    @available(iOS 17.4, macOS 14.4, *)
    open class Callback: NSObject {
        open class func customScheme(_ customScheme: String) -> Self { fatalError("declaration-only stub") }
        open class func https(host: String, path: String) -> Self { fatalError("declaration-only stub") }
    }
}

/// The NS_ERROR_ENUM as Swift imports it: a struct with a non-frozen `Code`.
public struct ASWebAuthenticationSessionError: CustomNSError, Hashable {
    public static var errorDomain: String { fatalError("declaration-only stub") }

    public enum Code: Int, Sendable {
        case canceledLogin = 1
        case presentationContextNotProvided = 2
        case presentationContextInvalid = 3
    }

    public var code: Code { fatalError("declaration-only stub") }
    public static var canceledLogin: Code { .canceledLogin }
}
