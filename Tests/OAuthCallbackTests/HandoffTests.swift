import ProxyCore
import Testing
@testable import OAuthCallback

@Suite struct HandoffTests {
    let tokens = TokenResponse(accessToken: "at", tokenType: "Bearer", idToken: "it", refreshToken: "rt", expiresIn: 3599,
                               raw: Array(#"{"access_token":"at","token_type":"Bearer","id_token":"it","refresh_token":"rt","expires_in":3599,"scope":"openid"}"#.utf8))

    @Test func theAppGetsTheProvidersOwnBodyUnlessSomethingIsOmitted() throws {
        #expect(RelayCodes.tokenBody(tokens, omitIDToken: false, omitRefreshToken: false) == tokens.raw)
        let trimmed = try JSONParser.parse(RelayCodes.tokenBody(tokens, omitIDToken: true, omitRefreshToken: true))
        let object = try #require(trimmed.objectValue)
        #expect(object["id_token"] == nil)
        #expect(object["refresh_token"] == nil)
        #expect(object["access_token"]?.stringValue == "at")
        #expect(object["scope"]?.stringValue == "openid")
        #expect(object["expires_in"]?.int64Value == 3599)
    }

    @Test(arguments: [
        (["client_id": "web", "client_secret": "s"], nil as String?, "web", "s"),
        ([:], "Basic " + Base64.encode(Array("web:s%3Ax".utf8), .standard), "web", "s:x"),
        (["client_id": "web"], "Basic " + Base64.encode(Array("web:s".utf8), .standard), "web", "s"),
    ])
    func clientCredentialsComeFromTheBodyOrBasicAuth(form: [String: String], authorization: String?, id: String, secret: String) {
        let c = RelayTokenEndpoint.clientCredentials(form: form, authorization: authorization)
        #expect(c.id == id)
        #expect(c.secret == secret)
    }

    @Test(arguments: [
        // Both methods at once, a body id that disagrees with Basic, undecodable Basic.
        (["client_secret": "s"], "Basic " + Base64.encode(Array("web:s".utf8), .standard)),
        (["client_id": "other"], "Basic " + Base64.encode(Array("web:s".utf8), .standard)),
        ([:], "Basic !!!"),
        ([:], "Basic " + Base64.encode(Array("no-colon".utf8), .standard)),
    ])
    func ambiguousClientAuthenticationIsRefused(form: [String: String], authorization: String) {
        #expect(RelayTokenEndpoint.clientCredentials(form: form, authorization: authorization).id == nil)
    }

    @Test func handoffTargetsAreFormEncodedQueriesOnTheAppsCallback() {
        #expect(HandoffTarget.relay("/cb", code: "cpr1.a-b_c", state: "s t&u") == "/cb?code=cpr1.a-b_c&state=s+t%26u")
        #expect(HandoffTarget.failure("/cb", error: "access_denied", state: "x") == "/cb?error=access_denied&state=x")
        #expect(HandoffTarget.params("/cb", tokens: tokens, state: "x")
                == "/cb?access_token=at&token_type=Bearer&id_token=it&expires_in=3599&state=x")
    }

    @Test func relayRecordsRoundTripAndRejectGarbage() {
        let r = RelayRecord(provider: "google", body: Array("{\"a\":0}".utf8))
        #expect(RelayRecord(encoded: r.encoded()) == r)
        #expect(RelayRecord(encoded: Array("no separator".utf8)) == nil)
    }

    @Test func relayCodesAreRecognisedByTheirPrefixOnly() {
        #expect(RelayCodes.isRelayCode("cpr1.abc"))
        #expect(!RelayCodes.isRelayCode("4/0AX4XfWh-google-style-code"))
    }

    /// relay/params: which failures reach the app's own callback (its failure flow) and which
    /// get the proxy's page. A replay is the genuine wrapper's URL loaded again: the app answers it.
    @Test(arguments: [
        // (failure, the callback reported error=, hand-off mode, expected target)
        (CallbackFailure(.client, code: ReplayGuard.replayedCode, userMessage: "", logDetail: ""), false, HandoffMode.relay,
         "/cb?error=replayed_code&state=st" as String?),
        (CallbackFailure(.client, code: ReplayGuard.replayedCode, userMessage: "", logDetail: ""), false, .params,
         "/cb?error=replayed_code&state=st"),
        (CallbackFailure(.idp, code: "exchange_failed", userMessage: "", logDetail: ""), false, .relay,
         "/cb?error=exchange_failed&state=st"),
        (CallbackFailure(.client, code: "access_denied", userMessage: "", logDetail: ""), true, .params,
         "/cb?error=access_denied&state=st"),
        // The store lost mid-callback: the app's failure flow, in OAuth's word for it.
        (CallbackFailure(.internal, code: ReplayGuard.storeUnavailableCode, userMessage: "", logDetail: "", retryable: true),
         false, .relay, "/cb?error=temporarily_unavailable&state=st"),
        (CallbackFailure(.internal, code: ReplayGuard.storeUnavailableCode, userMessage: "", logDetail: "", retryable: true),
         false, .params, "/cb?error=temporarily_unavailable&state=st"),
        // Contract violations and other faults of ours: the proxy's own page.
        (CallbackFailure(.client, code: "client_mismatch", userMessage: "", logDetail: ""), false, .relay, nil),
        (CallbackFailure(.client, code: "invalid_request", userMessage: "", logDetail: ""), false, .params, nil),
        (CallbackFailure(.internal, code: "server_error", userMessage: "", logDetail: ""), false, .relay, nil),
        // Modes without an app callback to run: the proxy's page, replays included.
        (CallbackFailure(.client, code: ReplayGuard.replayedCode, userMessage: "", logDetail: ""), false, .session, nil),
        (CallbackFailure(.client, code: ReplayGuard.replayedCode, userMessage: "", logDetail: ""), false, .verify, nil),
    ])
    func failuresTheAppCanAnswerGoToItsCallback(failure: CallbackFailure, reported: Bool, mode: HandoffMode, target: String?) {
        var provider = ProviderSettings(name: "google", kind: .google)
        provider.handoff = mode
        provider.appCallback = "/cb"
        var settings = OAuthSettings()
        settings.providers["google"] = provider
        let response: CallbackParameters.Response = reported
            ? .error(.init(reported: failure.code, description: nil)) : .code("c", verifier: nil)
        let parameters = CallbackParameters(provider: "google", platform: "ios", clientID: "i", redirectURI: "r",
                                            state: "st", response: response)
        #expect(Handoff.appFailureTarget(failure, parameters, settings: settings) == target)
        // Nothing in the URL could be trusted: never the app.
        #expect(Handoff.appFailureTarget(failure, nil, settings: settings) == nil)
    }

    /// The never-redeemed check runs while the code still lives, at every allowed TTL (1–60 s):
    /// at 1 s it used to wait the whole second and find the code already gone.
    @Test(arguments: [(Int64(1), UInt64(750_000_000)), (2, 1_500_000_000), (4, 3_000_000_000), (60, 59_000_000_000)])
    func theRedemptionCheckComesBeforeTheCodeExpires(_ c: (Int64, UInt64)) {
        let delay = Handoff.redemptionCheckDelay(ttlSeconds: c.0)
        #expect(delay == c.1)
        #expect(delay < UInt64(c.0) * 1_000_000_000)
    }
}
