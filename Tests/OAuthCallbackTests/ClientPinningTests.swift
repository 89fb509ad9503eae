import Testing
@testable import OAuthCallback

@Suite struct ClientPinningTests {
    let pinning = ClientPinning(settings: CallbackFixtures.settings)

    func parameters(provider: String = "google", platform: String = "android",
                    clientID: String = CallbackFixtures.googleAndroidID,
                    redirectURI: String = CallbackFixtures.googleAndroidRedirect,
                    verifier: String? = CallbackFixtures.verifier) -> CallbackParameters {
        CallbackParameters(provider: provider, platform: platform, clientID: clientID, redirectURI: redirectURI,
                           state: CallbackFixtures.state, response: .code(CallbackFixtures.code, verifier: verifier))
    }

    func refusal(_ parameters: CallbackParameters, using pinning: ClientPinning? = nil) -> CallbackFailure? {
        if case .failure(let failure) = (pinning ?? self.pinning).pin(parameters) { return failure }
        return nil
    }

    // MARK: Accepted

    @Test func theConfiguredClientIsPinned() throws {
        let pinned = try (pinning.pin(parameters())).get()
        #expect(pinned.provider.name == "google")
        #expect(pinned.platform == "android")
        #expect(pinned.client == CallbackFixtures.settings.providers["google"]!.native["android"]!)
        #expect(pinned.requiresPKCE)
    }

    @Test func googleIOSRedirectDerivedFromTheReversedClientIDIsAccepted() throws {
        #expect(CallbackFixtures.googleIOSRedirect == "com.googleusercontent.apps.123-ios:/oauth2redirect")
        let pinned = try pinning.pin(parameters(platform: "ios", clientID: CallbackFixtures.googleIOSID,
                                                redirectURI: "com.googleusercontent.apps.123-ios:/oauth2redirect")).get()
        #expect(pinned.client.clientID == CallbackFixtures.googleIOSID)
        #expect(pinned.client.redirectURI == "com.googleusercontent.apps.123-ios:/oauth2redirect")
    }

    @Test func aGoogleIOSClientConfiguredWithoutARedirectExpectsTheDerivedOne() throws {
        var settings = CallbackFixtures.settings
        settings.providers["google"]!.native["ios"] = NativeClient(clientID: CallbackFixtures.googleIOSID, redirectURI: "")
        let pinning = ClientPinning(settings: settings)
        let pinned = try pinning.pin(parameters(platform: "ios", clientID: CallbackFixtures.googleIOSID,
                                                redirectURI: CallbackFixtures.googleIOSRedirect)).get()
        // The exchange must send the redirect the code was issued for.
        #expect(pinned.client.redirectURI == CallbackFixtures.googleIOSRedirect)
        #expect(refusal(parameters(platform: "ios", clientID: CallbackFixtures.googleIOSID,
                                   redirectURI: "com.example.app:/oauth2redirect"), using: pinning)?.code == "client_mismatch")
    }

    @Test func anEmptyConfiguredRedirectIsNotDerivedForOtherKindsOrPlatforms() {
        var settings = CallbackFixtures.settings
        settings.providers["google"]!.native["android"]!.redirectURI = ""
        settings.providers["corp"]!.native["ios"] = NativeClient(clientID: CallbackFixtures.googleIOSID, redirectURI: "")
        let pinning = ClientPinning(settings: settings)
        let derived = NativeClient.googleIOSRedirect(for: CallbackFixtures.googleAndroidID)!
        #expect(refusal(parameters(redirectURI: derived), using: pinning)?.code == "client_mismatch")
        #expect(refusal(parameters(provider: "corp", platform: "ios", clientID: CallbackFixtures.googleIOSID,
                                   redirectURI: CallbackFixtures.googleIOSRedirect), using: pinning)?.code == "client_mismatch")
    }

    // MARK: Refused

    @Test func anUnknownProviderIsRefused() throws {
        let failure = try #require(refusal(parameters(provider: "github")))
        #expect(failure.source == .client)
        #expect(failure.code == "unknown_client")
        #expect(failure.logDetail.contains("`github`"))
    }

    @Test func anUnknownPlatformIsRefused() throws {
        let failure = try #require(refusal(parameters(platform: "windows")))
        #expect(failure.source == .client)
        #expect(failure.code == "unknown_client")
        #expect(failure.logDetail.contains("`windows`"))
    }

    @Test func aForeignClientIDIsRefused() throws {
        let failure = try #require(refusal(parameters(clientID: "999-web.apps.googleusercontent.com")))
        #expect(failure.source == .client)
        #expect(failure.code == "client_mismatch")
        #expect(failure.status == 400)
        #expect(failure.logDetail.contains("client_id"))
    }

    @Test func anotherPlatformsClientIDIsRefused() {
        #expect(refusal(parameters(clientID: CallbackFixtures.googleIOSID))?.code == "client_mismatch")
    }

    @Test func aForeignRedirectURIIsRefused() throws {
        let failure = try #require(refusal(parameters(redirectURI: "com.attacker.app:/oauth2redirect")))
        #expect(failure.code == "client_mismatch")
        #expect(failure.logDetail.contains("redirect_uri"))
    }

    @Test(arguments: [
        "COM.EXAMPLE.APP:/oauth2redirect",
        "com.example.app:/oauth2redirect/",
        "com.example.app%3A/oauth2redirect",
        "com.example.app:/oauth2redirect ",
        " com.example.app:/oauth2redirect",
        "com.example.app://oauth2redirect",
        "com.example.app:/oauth2Redirect",
        "com.example.app:/oauth2redirect?x=1",
    ])
    func aRedirectIsComparedWithoutNormalisation(claimed: String) {
        #expect(refusal(parameters(redirectURI: claimed))?.code == "client_mismatch")
    }

    @Test(arguments: [
        "123-AND.apps.googleusercontent.com",
        "123-and.apps.googleusercontent.com.",
        "123-and.apps.googleusercontent.com ",
        "123-and",
    ])
    func aClientIDIsComparedWithoutNormalisation(claimed: String) {
        #expect(refusal(parameters(clientID: claimed))?.code == "client_mismatch")
    }

    @Test func canonicallyEquivalentButDifferentBytesDoNotMatch() {
        let composed = "com.example.caf\u{E9}:/cb"
        let decomposed = "com.example.cafe\u{301}:/cb"
        // Swift's String equality would accept this pair; the IdP would not.
        #expect(composed == decomposed)
        var settings = CallbackFixtures.settings
        settings.providers["google"]!.native["android"]!.redirectURI = composed
        #expect(refusal(parameters(redirectURI: composed), using: ClientPinning(settings: settings)) == nil)
        #expect(refusal(parameters(redirectURI: decomposed), using: ClientPinning(settings: settings))?.code == "client_mismatch")
    }

    @Test func refusalsDoNotLogTheCodeStateOrVerifier() throws {
        for failure in [refusal(parameters(provider: "github")), refusal(parameters(platform: "windows")),
                        refusal(parameters(clientID: "x")), refusal(parameters(redirectURI: "x:/y")),
                        refusal(parameters(verifier: nil))] {
            let failure = try #require(failure)
            #expect(!failure.logDetail.contains("SECRET"))
            #expect(!failure.userMessage.contains("SECRET"))
        }
    }

    // MARK: PKCE

    @Test(arguments: [
        // provider, platform, client id, redirect, verifier present, refused
        ("google", "android", CallbackFixtures.googleAndroidID, CallbackFixtures.googleAndroidRedirect, false, true),
        ("google", "android", CallbackFixtures.googleAndroidID, CallbackFixtures.googleAndroidRedirect, true, false),
        ("corp", "android", "corp-android", "com.example.app:/corp", false, true),
        ("corp", "android", "corp-android", "com.example.app:/corp", true, false),
        ("corp-confidential", "android", "corp-conf-android", "com.example.app:/corpc", false, false),
        ("facebook", "ios", "1234567890", "fb1234567890://authorize", false, false),
        ("facebook", "android", "1234567890", "fb1234567890://authorize", true, false),
        ("apple", "ios", "com.example.app", "com.example.app:/apple", false, false),
    ])
    func aPublicClientWithoutAVerifierIsRefusedBeforeAnyExchange(provider: String, platform: String, clientID: String,
                                                                   redirect: String, hasVerifier: Bool, refused: Bool) {
        let failure = refusal(parameters(provider: provider, platform: platform, clientID: clientID, redirectURI: redirect,
                                         verifier: hasVerifier ? CallbackFixtures.verifier : nil))
        if refused {
            #expect(failure?.code == "invalid_request")
            #expect(failure?.source == .client)
            #expect(failure?.logDetail.contains("code_verifier") == true)
        } else {
            #expect(failure == nil)
        }
    }

    @Test func anErrorCallbackNeedsNoVerifier() {
        let parameters = CallbackParameters(
            provider: "google", platform: "android", clientID: CallbackFixtures.googleAndroidID,
            redirectURI: CallbackFixtures.googleAndroidRedirect, state: CallbackFixtures.state,
            response: .error(.init(reported: "access_denied", description: nil)))
        #expect(refusal(parameters) == nil)
    }

    @Test func pkceIsRequiredExactlyForPublicClients() {
        let publicClient = NativeClient(clientID: "a", redirectURI: "b")
        let confidential = NativeClient(clientID: "a", redirectURI: "b", clientSecret: Secret("s"))
        #expect(ClientPinning.requiresPKCE(kind: .google, client: publicClient))
        #expect(ClientPinning.requiresPKCE(kind: .oidc, client: publicClient))
        #expect(!ClientPinning.requiresPKCE(kind: .oidc, client: confidential))
        #expect(!ClientPinning.requiresPKCE(kind: .facebook, client: publicClient))
        #expect(!ClientPinning.requiresPKCE(kind: .apple, client: publicClient))
    }
}

// MARK: - Shared fixtures (parameters, pinning and pipeline suites)

/// One configuration with every kind of provider, and a valid Google Android callback.
/// The secret values contain `SECRET` so a test can check that no log text carries them.
enum CallbackFixtures {
    static let googleAndroidID = "123-and.apps.googleusercontent.com"
    static let googleAndroidRedirect = "com.example.app:/oauth2redirect"
    static let googleIOSID = "123-ios.apps.googleusercontent.com"
    static let googleIOSRedirect = NativeClient.googleIOSRedirect(for: googleIOSID)!
    static let code = "4/0AX4XfWh-SECRETCODE_abc"
    static let state = "SECRETSTATE.0123456789"
    /// 55 characters of the RFC 7636 alphabet.
    static let verifier = "SECRETVERIFIER-" + String(repeating: "aZ9._~", count: 6) + "0123"

    static let settings: OAuthSettings = {
        var settings = OAuthSettings()
        var google = ProviderSettings(name: "google", kind: .google)
        google.native = [
            "ios": NativeClient(clientID: googleIOSID, redirectURI: googleIOSRedirect),
            "android": NativeClient(clientID: googleAndroidID, redirectURI: googleAndroidRedirect),
        ]
        var facebook = ProviderSettings(name: "facebook", kind: .facebook)
        facebook.native = [
            "ios": NativeClient(clientID: "1234567890", redirectURI: "fb1234567890://authorize"),
            "android": NativeClient(clientID: "1234567890", redirectURI: "fb1234567890://authorize"),
        ]
        var corp = ProviderSettings(name: "corp", kind: .oidc)
        corp.native = ["android": NativeClient(clientID: "corp-android", redirectURI: "com.example.app:/corp")]
        var corpConfidential = ProviderSettings(name: "corp-confidential", kind: .oidc)
        corpConfidential.native = ["android": NativeClient(clientID: "corp-conf-android", redirectURI: "com.example.app:/corpc",
                                                           clientSecret: Secret("native-secret"))]
        var apple = ProviderSettings(name: "apple", kind: .apple)
        apple.native = ["ios": NativeClient(clientID: "com.example.app", redirectURI: "com.example.app:/apple")]
        for provider in [google, facebook, corp, corpConfidential, apple] {
            settings.providers[provider.name] = provider
        }
        settings.replayWindowSeconds = 600
        return settings
    }()

    /// A valid Google Android callback as (name, raw value) pairs, values already encoded.
    static let googleAndroidFields: [(String, String)] = [
        ("provider", "google"),
        ("platform", "android"),
        ("client_id", googleAndroidID),
        ("redirect_uri", "com.example.app%3A%2Foauth2redirect"),
        ("code", "4%2F0AX4XfWh-SECRETCODE_abc"),
        ("state", state),
        ("code_verifier", verifier),
    ]

    static var googleAndroidQuery: String { join(googleAndroidFields) }

    static func join(_ fields: [(String, String)]) -> String {
        fields.map { "\($0.0)=\($0.1)" }.joined(separator: "&")
    }

    /// The Google Android callback with `name` set to the raw `value` (nil: removed); a name
    /// not in it is appended.
    static func googleAndroid(_ name: String, _ value: String?) -> String {
        var fields = googleAndroidFields
        if let index = fields.firstIndex(where: { $0.0 == name }) {
            if let value { fields[index].1 = value } else { fields.remove(at: index) }
        } else if let value {
            fields.append((name, value))
        }
        return join(fields)
    }

    /// A failure callback for Google Android (`error=` and no code).
    static func googleAndroidError(_ error: String, extra: [(String, String)] = []) -> String {
        join(googleAndroidFields.filter { $0.0 != "code" && $0.0 != "code_verifier" } + [("error", error)] + extra)
    }
}
