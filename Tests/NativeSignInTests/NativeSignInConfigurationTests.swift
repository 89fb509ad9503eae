import Foundation
import Testing
@testable import NativeSignIn

@Suite struct NativeSignInConfigurationTests {
    static func plist(_ body: String) -> Data {
        Data("""
        <?xml version="1.0" encoding="UTF-8"?>
        <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
        <plist version="1.0"><dict>\(body)</dict></plist>
        """.utf8)
    }

    static let info = plist("<key>OAuthEnabled</key><string>YES</string><key>FacebookAppID</key><string>4242</string>"
                            + "<key>CFBundleIdentifier</key><string>com.example.app</string>")
    static let googleInfo = plist("""
        <key>CLIENT_ID</key><string>123-ios.apps.googleusercontent.com</string>
        <key>REVERSED_CLIENT_ID</key><string>com.googleusercontent.apps.123-ios</string>
        <key>IS_SIGNIN_ENABLED</key><true/><key>PLIST_VERSION</key><string>1</string>
        """)

    @Test func aCompleteConfigurationGivesGoogleAndFacebook() throws {
        let config = try NativeSignInConfiguration.parse(infoPlist: Self.info, googleServiceInfo: Self.googleInfo)
        #expect(config.enabled)
        #expect(config.providers == [Fixtures.google, Fixtures.facebook])
        #expect(config.interceptor(platform: .ios)?.providers.count == 2)
    }

    @Test func handBackThroughUniversalLinksIsOffUnlessSet() throws {
        #expect(try !NativeSignInConfiguration.parse(infoPlist: Self.info, googleServiceInfo: nil).handBackThroughUniversalLinks)
        for value in ["<true/>", "<string>YES</string>"] {
            let info = Self.plist("<key>OAuthEnabled</key><true/><key>FacebookAppID</key><string>4242</string>"
                                  + "<key>OAuthHandBackUniversalLinks</key>\(value)")
            #expect(try NativeSignInConfiguration.parse(infoPlist: info, googleServiceInfo: nil).handBackThroughUniversalLinks)
        }
        let bad = Self.plist("<key>OAuthEnabled</key><true/><key>FacebookAppID</key><string>4242</string>"
                             + "<key>OAuthHandBackUniversalLinks</key><string>$(HAND_BACK_LINKS)</string>")
        let error = #expect(throws: NativeSignInError.self) {
            try NativeSignInConfiguration.parse(infoPlist: bad, googleServiceInfo: nil)
        }
        #expect(error?.key == "OAuthHandBackUniversalLinks" && error?.file == "Info.plist")
    }

    @Test(arguments: ["<true/>", "<string>YES</string>"])
    func oauthEnabledIsReadAsAPlistBoolOrXcodesYES(_ value: String) throws {
        let info = Self.plist("<key>OAuthEnabled</key>\(value)<key>FacebookAppID</key><string>4242</string>")
        #expect(try NativeSignInConfiguration.parse(infoPlist: info, googleServiceInfo: nil).enabled)
    }

    @Test(arguments: ["", "<key>OAuthEnabled</key><false/>", "<key>OAuthEnabled</key><string>NO</string>"])
    func signInIsOffByDefaultAndWhenSetOff(_ body: String) throws {
        // Off means nothing else is read: a missing Google file or an empty app id is fine.
        let config = try NativeSignInConfiguration.parse(infoPlist: Self.plist(body), googleServiceInfo: Self.plist(""))
        #expect(!config.enabled)
        #expect(config.interceptor() == nil)
    }

    struct Bad: CustomTestStringConvertible, Sendable {
        let info: String
        let google: String?
        let file: String
        let key: String?
        var testDescription: String { "\(file) \(key ?? "-")" }
    }

    static let enabled = "<key>OAuthEnabled</key><true/>"
    static let google = "<key>CLIENT_ID</key><string>123-ios.apps.googleusercontent.com</string>"

    @Test(arguments: [
        Bad(info: "<key>OAuthEnabled</key><integer>1</integer>", google: nil, file: "Info.plist", key: "OAuthEnabled"),
        Bad(info: "<key>OAuthEnabled</key><string>$(OAUTH_ENABLED)</string>", google: nil, file: "Info.plist", key: "OAuthEnabled"),
        Bad(info: "<key>OAuthEnabled</key><string>yes please</string>", google: nil, file: "Info.plist", key: "OAuthEnabled"),
        Bad(info: enabled, google: nil, file: "Info.plist", key: "OAuthEnabled"),     // enabled, no provider
        Bad(info: enabled + "<key>FacebookAppID</key><string></string>", google: nil, file: "Info.plist", key: "OAuthEnabled"),
        Bad(info: enabled + "<key>FacebookAppID</key><integer>4242</integer>", google: nil, file: "Info.plist", key: "FacebookAppID"),
        Bad(info: enabled + "<key>FacebookAppID</key><string>$(FACEBOOK_APP_ID)</string>", google: nil,
            file: "Info.plist", key: "FacebookAppID"),
        Bad(info: enabled, google: "", file: "GoogleService-Info.plist", key: "CLIENT_ID"),
        Bad(info: enabled, google: google, file: "GoogleService-Info.plist", key: "REVERSED_CLIENT_ID"),
        Bad(info: enabled, google: google + "<key>REVERSED_CLIENT_ID</key><string>com.googleusercontent.apps.999-ios</string>",
            file: "GoogleService-Info.plist", key: "REVERSED_CLIENT_ID"),
        Bad(info: enabled, google: google + "<key>REVERSED_CLIENT_ID</key><array/>",
            file: "GoogleService-Info.plist", key: "REVERSED_CLIENT_ID"),
        Bad(info: enabled, google: "<key>CLIENT_ID</key><true/>", file: "GoogleService-Info.plist", key: "CLIENT_ID"),
        Bad(info: enabled, google: "<key>CLIENT_ID</key><string>123-ios</string><key>REVERSED_CLIENT_ID</key><string>123-ios</string>",
            file: "GoogleService-Info.plist", key: "CLIENT_ID"),
    ])
    func aMissingWrongOrInconsistentValueIsAnErrorNamingFileAndKey(_ c: Bad) {
        let error = #expect(throws: NativeSignInError.self) {
            try NativeSignInConfiguration.parse(infoPlist: Self.plist(c.info), googleServiceInfo: c.google.map(Self.plist))
        }
        #expect(error?.kind == .configuration)
        #expect(error?.file == c.file)
        #expect(error?.key == c.key)
        #expect(error.map { $0.description.hasPrefix(c.file + ": " + (c.key.map { $0 + ": " } ?? "")) } == true)
    }

    @Test func aFileThatIsNotAPropertyListIsNamed() {
        let error = #expect(throws: NativeSignInError.self) {
            try NativeSignInConfiguration.parse(infoPlist: Data("not a plist".utf8), googleServiceInfo: nil)
        }
        #expect(error?.file == "Info.plist")
    }

    @Test func filesAreReadAndAMissingOneIsNamed() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("native-sign-in-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let info = dir.appendingPathComponent("Info.plist")
        let google = dir.appendingPathComponent("GoogleService-Info.plist")
        try Self.info.write(to: info)
        try Self.googleInfo.write(to: google)

        let config = try NativeSignInConfiguration.load(infoPlist: info, googleServiceInfo: google)
        #expect(config.providers.map(\.name) == ["google", "facebook"])

        let missingGoogle = #expect(throws: NativeSignInError.self) {
            try NativeSignInConfiguration.load(infoPlist: info, googleServiceInfo: dir.appendingPathComponent("nope.plist"))
        }
        #expect(missingGoogle?.file == "GoogleService-Info.plist")
        let missingInfo = #expect(throws: NativeSignInError.self) {
            try NativeSignInConfiguration.load(infoPlist: dir.appendingPathComponent("absent"), googleServiceInfo: nil)
        }
        #expect(missingInfo?.file == "Info.plist")
    }

    @Test func extraProvidersJoinThePlistOnesAndNamesAreUnique() throws {
        let config = try NativeSignInConfiguration.parse(infoPlist: Self.info, googleServiceInfo: nil,
                                                         extraProviders: [Fixtures.corp])
        #expect(config.providers.map(\.name) == ["facebook", "corp"])
        let twice = #expect(throws: NativeSignInError.self) {
            try NativeSignInConfiguration.parse(infoPlist: Self.info, googleServiceInfo: nil, extraProviders: [Fixtures.facebook])
        }
        #expect(twice?.key == "facebook")
    }

    @Test(arguments: ["", "has space", "a/b", String(repeating: "p", count: 65)])
    func aProviderNameThatTheProxyWouldRefuseIsAnError(_ name: String) {
        #expect(throws: NativeSignInError.self) {
            try Provider.oidc(name: name, authorizationEndpoint: URL(string: "https://login.example.com/auth")!,
                              clientID: "c", redirectURI: "com.example.app:/cb")
        }
    }

    @Test func aRedirectWithoutSchemeIsAnError() {
        let error = #expect(throws: NativeSignInError.self) {
            try Provider.oidc(name: "corp", authorizationEndpoint: URL(string: "https://login.example.com/auth")!,
                              clientID: "com.example.app", redirectURI: "/relative")
        }
        #expect(error?.key == "redirect_uri")
    }
}

@Suite struct AppleAndBundleTests {
    @Test(arguments: ["https://appleid.apple.com/auth/authorize", "https://APPLEID.apple.com/auth/authorize"])
    func anAppleProviderIsRefusedAtConfigurationNamingIt(_ endpoint: String) {
        let error = #expect(throws: NativeSignInError.self) {
            try Provider.oidc(name: "apple", authorizationEndpoint: URL(string: endpoint)!,
                              clientID: "com.example.app.signin", redirectURI: "https://app.example.com/apple/return")
        }
        #expect(error?.kind == .configuration)
        #expect(error?.key == "apple")
        #expect(error?.message.contains("web flow run in the WebView") == true)
    }

    @Test func anIOSBundleKeepsInfoPlistAtItsRootAndAMacOSBundleInContents() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("bundles-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        let ios = root.appendingPathComponent("App.app")
        let mac = root.appendingPathComponent("Mac.app")
        try FileManager.default.createDirectory(at: ios, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: mac.appendingPathComponent("Contents/Resources"), withIntermediateDirectories: true)
        #expect(NativeSignInConfiguration.infoPlistURL(bundleURL: ios).path == ios.appendingPathComponent("Info.plist").path)
        #expect(NativeSignInConfiguration.infoPlistURL(bundleURL: mac).path
                == mac.appendingPathComponent("Contents/Info.plist").path)

        try NativeSignInConfigurationTests.info.write(to: mac.appendingPathComponent("Contents/Info.plist"))
        let bundle = try #require(Bundle(url: mac))
        #expect(try NativeSignInConfiguration.load(bundle: bundle).providers.map(\.name) == ["facebook"])
    }
}
