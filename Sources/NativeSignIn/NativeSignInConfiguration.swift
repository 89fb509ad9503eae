import Foundation

/// The wrapper app's sign-in settings, read from its plists with the keys below (and nothing
/// else). Every problem is a thrown `NativeSignInError` naming the file and key: a setting that
/// silently disabled interception would leave users at the provider's refusal of embedded
/// browsers with nothing in any log.
///
/// | file | key | type | default | meaning |
/// |---|---|---|---|---|
/// | Info.plist | `OAuthEnabled` | Bool, or the string `YES`/`NO` | off | interception on; `$(OAUTH_ENABLED)` in Xcode substitutes a string, so both forms are read |
/// | Info.plist | `FacebookAppID` | String of digits | empty: no Facebook | `$(FACEBOOK_APP_ID)`; also forms `fb<appid>://authorize` |
/// | Info.plist | `OAuthHandBackUniversalLinks` | Bool, or the string `YES`/`NO` | off | hand-back returns through a universal link even where the browser session could wait for the https callback (iOS 17.4): no `webcredentials:` entitlement needed |
/// | GoogleService-Info.plist | `CLIENT_ID` | String | (file absent: no Google) | the iOS client, `….apps.googleusercontent.com` |
/// | GoogleService-Info.plist | `REVERSED_CLIENT_ID` | String | required with `CLIENT_ID` | `com.googleusercontent.apps.…`, the redirect's scheme |
///
/// Other OpenID providers have no plist keys; pass them as `extraProviders`. Sign in with Apple
/// is not intercepted: a provider at appleid.apple.com is refused (see `Provider`).
public struct NativeSignInConfiguration: Sendable, Equatable {
    public static let infoPlistName = "Info.plist"
    public static let googleServiceInfoName = "GoogleService-Info.plist"

    public var enabled: Bool
    public var providers: [Provider]
    /// `OAuthHandBackUniversalLinks`: pass it to `WebViewSignIn` (`SignInFlow`). From iOS 17.4 a
    /// hand-back sign-in otherwise waits for the site's https callback in the browser session,
    /// which needs the site in the app's `webcredentials:` associated domains.
    public var handBackThroughUniversalLinks: Bool

    public init(enabled: Bool, providers: [Provider], handBackThroughUniversalLinks: Bool = false) {
        self.enabled = enabled
        self.providers = providers
        self.handBackThroughUniversalLinks = handBackThroughUniversalLinks
    }

    /// The interceptor for this configuration, or nil when `OAuthEnabled` is off.
    public func interceptor(platform: Platform = .ios, callbackPath: String = "/_oauth_callback") -> SignInInterceptor? {
        enabled ? SignInInterceptor(providers: providers, platform: platform, callbackPath: callbackPath) : nil
    }

    /// From the app bundle: its Info.plist, and GoogleService-Info.plist when the bundle has one
    /// (`url(forResource:)` looks in the resources directory on both layouts).
    public static func load(bundle: Bundle = .main, extraProviders: [Provider] = []) throws -> Self {
        try load(infoPlist: infoPlistURL(bundleURL: bundle.bundleURL),
                 googleServiceInfo: bundle.url(forResource: "GoogleService-Info", withExtension: "plist"),
                 extraProviders: extraProviders)
    }

    /// Where a bundle keeps its Info.plist. An iOS app bundle is flat (`App.app/Info.plist`);
    /// a macOS one has a `Contents` directory (`App.app/Contents/Info.plist`, resources in
    /// `Contents/Resources`) — the layout CFBundle itself tells apart by that directory.
    static func infoPlistURL(bundleURL: URL) -> URL {
        let contents = bundleURL.appendingPathComponent("Contents", isDirectory: true)
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: contents.path, isDirectory: &isDirectory), isDirectory.boolValue {
            return contents.appendingPathComponent(infoPlistName)
        }
        return bundleURL.appendingPathComponent(infoPlistName)
    }

    /// From plist files. A `googleServiceInfo` URL that is given must be readable.
    public static func load(infoPlist: URL, googleServiceInfo: URL?, extraProviders: [Provider] = []) throws -> Self {
        try parse(infoPlist: read(infoPlist, as: infoPlistName),
                  googleServiceInfo: googleServiceInfo.map { try read($0, as: googleServiceInfoName) },
                  extraProviders: extraProviders)
    }

    /// From plist contents (XML or binary).
    public static func parse(infoPlist: Data, googleServiceInfo: Data?, extraProviders: [Provider] = []) throws -> Self {
        let info = try PlistKeys(infoPlist, file: infoPlistName)
        guard try info.flag("OAuthEnabled") else { return Self(enabled: false, providers: []) }

        var providers: [Provider] = []
        if let google = googleServiceInfo {
            providers.append(try googleProvider(PlistKeys(google, file: googleServiceInfoName)))
        }
        if let appID = try info.string("FacebookAppID"), !appID.isEmpty {
            guard appID.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }) else {
                throw NativeSignInError(.configuration, file: infoPlistName, key: "FacebookAppID",
                                        "a Facebook app id is digits only, not \"\(appID)\" (is FACEBOOK_APP_ID set?)")
            }
            providers.append(try Provider.facebook(appID: appID))
        }
        providers += extraProviders
        guard !providers.isEmpty else {
            throw NativeSignInError(.configuration, file: infoPlistName, key: "OAuthEnabled",
                                    "sign-in is enabled but no provider is configured "
                                    + "(no \(googleServiceInfoName), FacebookAppID empty, no extra provider)")
        }
        let names = providers.map(\.name)
        if let twice = names.first(where: { name in names.filter { $0 == name }.count > 1 }) {
            throw NativeSignInError(.configuration, key: twice, "the provider \(twice) is configured twice")
        }
        return Self(enabled: true, providers: providers,
                    handBackThroughUniversalLinks: try info.flag("OAuthHandBackUniversalLinks"))
    }

    private static func googleProvider(_ plist: PlistKeys) throws -> Provider {
        guard let clientID = try plist.string("CLIENT_ID"), !clientID.isEmpty else {
            throw plist.problem("CLIENT_ID", "is missing or empty")
        }
        guard let reversed = try plist.string("REVERSED_CLIENT_ID"), !reversed.isEmpty else {
            throw plist.problem("REVERSED_CLIENT_ID", "is missing or empty")
        }
        guard clientID.hasSuffix(".apps.googleusercontent.com") else {
            throw plist.problem("CLIENT_ID", "is not a Google client id (….apps.googleusercontent.com): \"\(clientID)\"")
        }
        // Google derives the one from the other; a mismatch means the two keys come from
        // different clients, and the redirect would be refused after the user signed in.
        let expected = clientID.split(separator: ".", omittingEmptySubsequences: false).reversed().joined(separator: ".")
        guard reversed == expected else {
            throw plist.problem("REVERSED_CLIENT_ID", "is \"\(reversed)\", but CLIENT_ID reversed is \"\(expected)\"")
        }
        return try Provider.google(clientID: clientID, reversedClientID: reversed)
    }

    private static func read(_ url: URL, as name: String) throws -> Data {
        do {
            return try Data(contentsOf: url)
        } catch {
            throw NativeSignInError(.configuration, file: name, "cannot be read at \(url.path)")
        }
    }
}
