import Testing
@testable import OAuthCallback

@Suite struct AppLinksTests {
    @Test(arguments: ["ABCDE12345.com.example.app", "A1B2C3D4E5.io.x-y_z.app"])
    func appIDsAreTeamIDDotBundleID(id: String) { #expect(AppLinks.isAppID(id)) }

    @Test(arguments: ["abcde12345.com.example.app", "ABCDE1234.com.example.app", "ABCDE12345", "ABCDE12345.app",
                      "ABCDE12345.com..app", "ABCDE12345.com.exa mple.app"])
    func otherAppIDsAreRefused(id: String) { #expect(!AppLinks.isAppID(id)) }

    @Test func fingerprintsAre32UpperCaseHexPairs() {
        let good = Array(repeating: "A0", count: 32).joined(separator: ":")
        #expect(AppLinks.isFingerprint(good))
        #expect(!AppLinks.isFingerprint(good.lowercased()))
        #expect(!AppLinks.isFingerprint(Array(repeating: "A0", count: 31).joined(separator: ":")))
        #expect(!AppLinks.isFingerprint(good.replacingOccurrences(of: ":", with: "")))
    }

    /// iOS 17.4's hand-back waits for the https callback in the browser session, which Apple
    /// allows only for a host whose file lists the app under webcredentials.
    @Test func theAppleFileListsTheAppsUnderWebcredentialsToo() throws {
        let links = AppLinks(apple: .init(appIDs: ["ABCDE12345.com.example.app"], paths: ["/cb"]))
        let text = String(decoding: try #require(links.appleDocument), as: UTF8.self)
        #expect(text.contains(#""webcredentials":{"apps":["ABCDE12345.com.example.app"]}"#), "\(text)")
        #expect(text.contains(#""applinks":"#))
    }

    @Test func theDefaultPathsAreTheSitesCallbacksThenTheCallbackPath() {
        #expect(AppLinks.defaultPaths(appCallbacks: ["/users/auth/google_oauth2/callback", "/users/auth/facebook/callback",
                                                     "/users/auth/google_oauth2/callback"], callbackPath: "/_oauth_callback")
                == ["/users/auth/facebook/callback", "/users/auth/google_oauth2/callback", "/_oauth_callback*"])
        #expect(AppLinks.defaultPaths(appCallbacks: [], callbackPath: "/cb") == ["/cb*"])
    }

    @Test(arguments: [("/users/auth/google/callback", "/users/auth/google/callback", true),
                      ("/users/auth/google/callback", "/users/*", true),
                      ("/users/auth/google/callback", "/users/auth/*/callback", true),
                      ("/users/auth/google/callback", "*", true),
                      ("/users/auth/google/callback", "/users/auth/google/callbac?", true),
                      ("/users/auth/google/callback", "/_oauth_callback*", false),
                      ("/users/auth/google/callback", "/users/auth/google/callback/*", false),
                      ("/users/auth/google/callback", "/users/auth/google", false),
                      ("/a", "/a?", false),
                      ("/abcbd", "/a*bd", true)])
    func applePathPatterns(path: String, pattern: String, matches: Bool) {
        #expect(AppLinks.path(path, matches: pattern) == matches)
    }

    @Test func callbacksThePathsDoNotClaimAreNamed() {
        let links = AppLinks(apple: .init(appIDs: ["ABCDE12345.com.example.app"], paths: ["/_oauth_callback*", "/users/auth/google/*"]))
        let uncovered = links.uncoveredCallbacks([(provider: "google", path: "/users/auth/google/callback"),
                                                  (provider: "facebook", path: "/users/auth/facebook/callback")])
        #expect(uncovered.map(\.provider) == ["facebook"])
        #expect(AppLinks(android: [.init(package: "com.example.app", fingerprints: [])])
                    .uncoveredCallbacks([(provider: "google", path: "/x")]).isEmpty, "no Apple links, no universal links")
    }

    @Test func nothingConfiguredServesNothing() {
        #expect(AppLinkFiles(nil) == nil)
        #expect(AppLinkFiles(AppLinks()) == nil)
        #expect(AppLinks(android: []).androidDocument == nil && AppLinks().appleDocument == nil)
    }
}
