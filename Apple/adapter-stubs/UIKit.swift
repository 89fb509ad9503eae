// Declaration-only stand-in for the part of UIKit that Sources/NativeSignIn/Apple (and the app
// in DocumentedApp.swift) calls — NOT UIKit. Compiled by scripts/test-apple-adapter into a module
// named UIKit so that the adapter type-checks on Linux; nothing here runs (bodies trap).
// Declarations and isolation copied from Apple's UIKit reference (developer.apple.com/documentation/uikit):
// every class below is `@MainActor` there, as is UIApplication's completion handler.
// Apple's framework modules re-export Foundation (`export *` in their module maps).
@_exported import Foundation

@MainActor
open class UIResponder: NSObject {
    public override init() { fatalError("declaration-only stub") }
}

@MainActor
open class UIView: UIResponder {
    /// `nil` while the view is in no window.
    open var window: UIWindow? { fatalError("declaration-only stub") }
}

@MainActor
open class UIWindow: UIView {}

@MainActor
open class UIViewController: UIResponder {
    open var view: UIView! {
        get { fatalError("declaration-only stub") }
        set { fatalError("declaration-only stub") }
    }

    open func viewDidLoad() { fatalError("declaration-only stub") }
}

@MainActor
open class UIApplication: UIResponder {
    open class var shared: UIApplication { fatalError("declaration-only stub") }

    public struct OpenExternalURLOptionsKey: Hashable, RawRepresentable, Sendable {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
    }

    // UIKit: `func open(_ url: URL, options: [UIApplication.OpenExternalURLOptionsKey : Any] = [:],
    //                   completionHandler completion: (@MainActor @Sendable (Bool) -> Void)? = nil)`
    open func open(_ url: URL, options: [UIApplication.OpenExternalURLOptionsKey: Any] = [:],
                   completionHandler completion: (@MainActor @Sendable (Bool) -> Void)? = nil) {
        fatalError("declaration-only stub")
    }
}
