// Declaration-only stand-in for the part of AppKit that Sources/NativeSignIn/Apple calls on macOS
// — NOT AppKit. Compiled by scripts/test-apple-adapter into a module named AppKit for the macOS
// variant of the check (the stubs built with -D APPKIT, no UIKit module on the search path).
// Declarations and isolation copied from Apple's AppKit reference
// (developer.apple.com/documentation/appkit): `@MainActor` NSResponder, NSView and NSWindow;
// `class NSWorkspace`, not main-actor isolated, whose `open(_:)` "you can call safely from any
// thread".
// Apple's framework modules re-export Foundation (`export *` in their module maps).
@_exported import Foundation

@MainActor
open class NSResponder: NSObject {
    public override init() { fatalError("declaration-only stub") }
}

@MainActor
open class NSView: NSResponder {
    /// `nil` while the view is in no window.
    open var window: NSWindow? { fatalError("declaration-only stub") }
}

/// A responder, not a view, in AppKit.
@MainActor
open class NSWindow: NSResponder {}

open class NSWorkspace: NSObject {
    open class var shared: NSWorkspace { fatalError("declaration-only stub") }

    /// True if the location was opened.
    open func open(_ url: URL) -> Bool { fatalError("declaration-only stub") }
}
