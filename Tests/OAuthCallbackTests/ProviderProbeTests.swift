import ProxyCore
import Testing
@testable import OAuthCallback

/// What `check --online` (and the background provider probe) says of an OIDC provider's
/// discovery document beyond "usable": the `offline_access` note for session refresh.
@Suite struct ProviderProbeTests {
    let idp = FakeIdP()

    func provider(handoff: HandoffMode = .session) -> ProviderSettings {
        var p = ProviderSettings(name: "corp", kind: .oidc)
        p.endpoints.issuer = FakeIdP.URLs.oidcIssuer
        p.handoff = handoff
        p.native["ios"] = NativeClient(clientID: "native-public", redirectURI: "com.example.app:/oidc")
        return p
    }

    func probe(refreshInterval: Int64? = 900) -> ProviderProbe {
        var o = OAuthSettings()
        var s = SessionSettings()
        s.refreshIntervalSeconds = refreshInterval
        o.session = s
        return ProviderProbe(http: idp, settings: o)
    }

    func discovery(scopes: [String]?) -> [UInt8] {
        var d: [String: JSONValue] = ["issuer": .string(FakeIdP.URLs.oidcIssuer)]
        if let scopes { d["scopes_supported"] = .array(scopes.map { .string($0) }) }
        return JSONValue.object(d).serialized()
    }

    @Test func aDocumentListingScopesWithoutOfflineAccessGetsANote() throws {
        let note = try #require(probe().offlineAccessNote(discovery(scopes: ["openid", "email", "profile"]), provider()))
        #expect(note.isNote)
        #expect(note.setting == "oauth.session.refresh_interval")
        #expect(note.message.hasPrefix("providers.corp: the discovery document's scopes_supported (openid email profile) does not list offline_access"))
    }

    @Test(arguments: [
        (["openid", "offline_access"] as [String]?, Int64(900) as Int64?, HandoffMode.session),   // listed
        (nil, 900, .session),                                      // no list: nothing to go by
        ([], 900, .session),
        (["openid"], nil, .session),                               // refresh off: not asked for
        (["openid"], 900, .verify),                                // not a session-mode provider
    ])
    func noNoteOtherwise(scopes: [String]?, interval: Int64?, handoff: HandoffMode) {
        #expect(probe(refreshInterval: interval).offlineAccessNote(discovery(scopes: scopes), provider(handoff: handoff)) == nil)
    }

    @Test func theProbeReturnsTheNoteBesideNoProblem() throws {
        idp.publishKeys(FakeIdP.URLs.oidcJWKS, [Mint.jwk(TestKeys.rsaA, kid: "rsa-a")])
        var document = try #require(JSONParser.parse(idp.discoveryBody()).objectValue)
        document["scopes_supported"] = .array([.string("openid"), .string("email")])
        idp.override(FakeIdP.URLs.oidcDiscovery, .response(FakeIdP.json(200, document)))
        let probe = probe()
        let found = TestLoop.shared.ask { loop, done in probe.probe(provider(), on: loop) { done($0) } }
        #expect(found?.count == 1 && found?.first?.isNote == true, "\(found ?? [])")
    }
}
