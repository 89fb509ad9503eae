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
}
