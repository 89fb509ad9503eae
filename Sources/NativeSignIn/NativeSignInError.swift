/// Why the native sign-in refused something: a configuration it cannot run with, or a
/// navigation it will not turn into a sign-in. The message names what to fix (the plist key and
/// file, the missing parameter); it never carries a code, a verifier or a state value.
public struct NativeSignInError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        /// Info.plist / GoogleService-Info.plist or a provider description: fix the app.
        case configuration
        /// The site's authorization URL cannot be signed in safely (no `state`, …): fix the site.
        case navigation
        /// The `initialURL` the callback would be built on is not an http(s) origin.
        case initialURL
    }

    public let kind: Kind
    /// The file the problem is in (`Info.plist`, `GoogleService-Info.plist`), when there is one.
    public let file: String?
    /// The key or parameter the problem is about, when there is one.
    public let key: String?
    public let message: String

    init(_ kind: Kind, file: String? = nil, key: String? = nil, _ message: String) {
        self.kind = kind
        self.file = file
        self.key = key
        self.message = message
    }

    public var description: String {
        switch (file, key) {
        case let (file?, key?): return "\(file): \(key): \(message)"
        case let (file?, nil): return "\(file): \(message)"
        case let (nil, key?): return "\(key): \(message)"
        case (nil, nil): return message
        }
    }
}
