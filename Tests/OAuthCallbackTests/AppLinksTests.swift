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

    @Test func nothingConfiguredServesNothing() {
        #expect(AppLinkFiles(nil) == nil)
        #expect(AppLinkFiles(AppLinks()) == nil)
        #expect(AppLinks(android: []).androidDocument == nil && AppLinks().appleDocument == nil)
    }
}
