import Testing
@testable import OAuthCallback

@Suite struct TokenResponseParsingTests {
    static let context = "idp token endpoint"

    func parse(_ status: Int, _ body: String) -> Result<TokenResponse, CallbackFailure> {
        TokenResponseParsing.parse(OutboundResponse(status: status, body: Array(body.utf8)), context: Self.context)
    }

    func detail(_ status: Int, _ body: String) -> String? { parse(status, body).refusal?.logDetail }

    // MARK: Accepted

    @Test func readsEveryMemberAndKeepsTheRawBody() throws {
        let body = #"{"access_token":"ya29.a0","token_type":"Bearer","id_token":"h.p.s","refresh_token":"1//0g","expires_in":3599,"scope":"openid email"}"#
        let tokens = try parse(200, body).get()
        #expect(tokens.accessToken == "ya29.a0")
        #expect(tokens.tokenType == "Bearer")
        #expect(tokens.idToken == "h.p.s")
        #expect(tokens.refreshToken == "1//0g")
        #expect(tokens.expiresIn == 3599)
        #expect(tokens.scope == "openid email")
        #expect(tokens.raw == Array(body.utf8))
    }

    @Test func onlyTheAccessTokenIsRequired() throws {
        let tokens = try parse(200, #"{"access_token":"t"}"#).get()
        #expect(tokens.tokenType == "Bearer")
        #expect(tokens.idToken == nil)
        #expect(tokens.expiresIn == nil)
    }

    @Test func nullOptionalMembersCountAsAbsent() throws {
        let tokens = try parse(200, #"{"access_token":"t","id_token":null,"refresh_token":null,"expires_in":null}"#).get()
        #expect(tokens.idToken == nil)
        #expect(tokens.refreshToken == nil)
    }

    @Test(arguments: [(#""3600""#, Int64(3600)), ("3600", 3600), ("0", 0), (#""0""#, 0)])
    func expiresInMayBeANumberOrANumericString(json: String, seconds: Int64) throws {
        #expect(try parse(200, #"{"access_token":"t","expires_in":\#(json)}"#).get().expiresIn == seconds)
    }

    @Test func acceptsAnySuccessStatus() {
        #expect(parse(201, #"{"access_token":"t"}"#).refusal == nil)
    }

    // MARK: Refused members

    @Test(arguments: [
        (#"{"token_type":"Bearer"}"#, "access_token"),
        (#"{"access_token":""}"#, "access_token"),
        (#"{"access_token":42}"#, "access_token"),
        (#"{"access_token":null}"#, "access_token"),
        (#"{"access_token":"t","token_type":1}"#, "token_type"),
        (#"{"access_token":"t","id_token":{"a":1}}"#, "id_token"),
        (#"{"access_token":"t","id_token":""}"#, "id_token"),
        (#"{"access_token":"t","refresh_token":true}"#, "refresh_token"),
        (#"{"access_token":"t","scope":["openid"]}"#, "scope"),
        (#"{"access_token":"t","expires_in":"soon"}"#, "expires_in"),
        (#"{"access_token":"t","expires_in":"-5"}"#, "expires_in"),
        (#"{"access_token":"t","expires_in":-5}"#, "expires_in"),
        (#"{"access_token":"t","expires_in":3599.5}"#, "expires_in"),
        (#"{"access_token":"t","expires_in":1e3}"#, "expires_in"),
        (#"{"access_token":"t","expires_in":""}"#, "expires_in"),
        (#"{"access_token":"t","expires_in":99999999999999999999}"#, "expires_in"),
    ])
    func membersOfTheWrongTypeAreRefused(body: String, member: String) {
        let failure = parse(200, body).refusal
        #expect(failure?.code == "exchange_failed")
        #expect(failure?.logDetail == "\(Self.context): HTTP 200 token response \(member) is missing or has the wrong type")
    }

    // MARK: Refused bodies

    @Test(arguments: ["", "not json", "[1,2]", "\"token\"", #"{"access_token":"t""#, #"{"access_token":"a","access_token":"b"}"#])
    func bodiesThatAreNotOneJSONObjectAreRefused(body: String) {
        let failure = parse(200, body).refusal
        #expect(failure?.code == "exchange_failed")
        #expect(failure?.source == .idp)
        #expect(failure?.logDetail == "\(Self.context): HTTP 200 body is not a JSON object")
    }

    @Test func anOversizedBodyIsRefusedWithItsStatus() {
        let padding = String(repeating: "x", count: TokenResponseParsing.maximumBodySize)
        let failure = parse(200, #"{"access_token":"t","pad":"\#(padding)"}"#).refusal
        #expect(failure?.code == "exchange_failed")
        #expect(failure?.logDetail == "\(Self.context): HTTP 200 body exceeds 65536 bytes")
    }

    /// The description says which setting to fix; token-shaped words in it are cut out.
    @Test func anOAuthErrorNamesTheProvidersCodeAndItsDescriptionWithoutTokens() {
        let failure = parse(400, #"{"error":"invalid_grant","error_description":"Code 4/0AX4XfWh2kLmq9Zx7 was already redeemed (\"ya29.a0AfB_byC3xYz12\")."}"#).refusal
        #expect(failure?.code == "exchange_failed")
        #expect(failure?.retryable == false)
        #expect(failure?.logDetail == "\(Self.context): HTTP 400 error=invalid_grant "
                + "error_description=\"Code <redacted> was already redeemed <redacted>\"")
        expectNothingSecret(in: failure, ["4/0AX4XfWh2kLmq9Zx7", "ya29.a0AfB_byC3xYz12"])
        let basic = detail(401, #"{"error":"invalid_client","error_description":"Client authentication failed: use client_secret_basic"}"#)
        #expect(basic == "\(Self.context): HTTP 401 error=invalid_client "
                + "error_description=\"Client authentication failed: use client_secret_basic\"")
        let long = detail(400, #"{"error":"invalid_request","error_description":"\#(String(repeating: "word ", count: 60))"}"#) ?? ""
        #expect(long.hasSuffix("…\"") && long.count < 300)
        #expect(detail(400, #"{"error":"invalid_request","error_description":"line\nbreak é"}"#)
                == "\(Self.context): HTTP 400 error=invalid_request error_description=\"line?break ?\"")
    }

    @Test func anErrorBodyWithASuccessStatusIsStillAnError() {
        #expect(detail(200, #"{"error":"invalid_client"}"#) == "\(Self.context): HTTP 200 error=invalid_client")
    }

    @Test func anErrorCodeThatIsNotAPlainWordIsNotEchoed() {
        #expect(detail(400, #"{"error":"bad\ncode with spaces and a token ya29.x"}"#) == "\(Self.context): HTTP 400 error=<unprintable>")
    }

    @Test func aGraphAPIErrorObjectIsSummarisedByTypeAndCodes() {
        let body = #"{"error":{"message":"This authorization code has been used.","type":"OAuthException","code":100,"error_subcode":36009,"fbtrace_id":"A1"}}"#
        #expect(detail(400, body) == "\(Self.context): HTTP 400 error=OAuthException code=100 subcode=36009")
    }

    @Test func aClientErrorWithoutAnOAuthBodySaysSo() {
        #expect(detail(403, "<html>Forbidden</html>") == "\(Self.context): HTTP 403 with no OAuth error in the body")
    }

    @Test func aRedirectIsAFailedExchange() {
        let failure = parse(302, "")
        #expect(failure.refusal?.code == "exchange_failed")
        #expect(failure.refusal?.logDetail == "\(Self.context): HTTP 302 with no OAuth error in the body")
    }

    @Test(arguments: [500, 502, 503, 504, 429])
    func serverErrorsAndThrottlingAreRetryable(status: Int) {
        let failure = parse(status, "<html>oops</html>").refusal
        #expect(failure?.code == "idp_unavailable")
        #expect(failure?.retryable == true)
        #expect(failure?.status == 502)
        #expect(failure?.logDetail == "\(Self.context): HTTP \(status)")
    }

    // MARK: Transport errors

    /// A certificate the configured trust refuses is a setting to fix, named, not an outage.
    @Test func aCertificateProblemIsAConfigFailureNamingTheCAFile() {
        let failure = TokenResponseParsing.transportFailure(OutboundError(.certificate, "SSL certificate problem"),
                                                            context: Self.context)
        #expect(failure.source == .config && failure.setting == "oauth.ca_file" && !failure.retryable)
        #expect(failure.status == 502 && failure.code == "idp_unavailable")
        #expect(failure.logDetail.contains("oauth.ca_file"))
    }

    @Test(arguments: [OutboundError.Kind.connect, .tls, .timeout, .protocolError])
    func transportErrorsAreRetryableIdPFailures(kind: OutboundError.Kind) {
        let failure = TokenResponseParsing.transportFailure(OutboundError(kind, "detail"), context: Self.context)
        #expect(failure.source == .idp)
        #expect(failure.code == "idp_unavailable")
        #expect(failure.retryable)
        #expect(failure.logDetail == "\(Self.context): \(kind.rawValue): detail")
    }

    @Test func anInternalFetcherErrorIsOurs() {
        let failure = TokenResponseParsing.transportFailure(OutboundError(.internalError, "curl_multi_add_handle"),
                                                            context: Self.context)
        #expect(failure.source == .internal)
        #expect(failure.retryable == false)
    }

    @Test func aFetcherDetailIsCutAtTheQueryAndScrubbedOfSecrets() {
        let error = OutboundError(.connect, "https://idp.example/x?code=abc&secret=s3cr3t (s3cr3t) refused")
        let failure = TokenResponseParsing.transportFailure(error, context: Self.context, hiding: ["s3cr3t"])
        #expect(failure.logDetail == "\(Self.context): connect: https://idp.example/x")
        let scrubbed = TokenResponseParsing.transportFailure(OutboundError(.connect, "host said s3cr3t twice: s3cr3t"),
                                                             context: Self.context, hiding: ["s3cr3t"])
        #expect(scrubbed.logDetail == "\(Self.context): connect: host said <redacted> twice: <redacted>")
    }

    @Test func theFetchResultOverloadMapsBothOutcomes() {
        let ok = TokenResponseParsing.parse(.success(OutboundResponse(status: 200, body: Array(#"{"access_token":"t"}"#.utf8))),
                                            context: Self.context)
        #expect(ok.refusal == nil)
        let failed = TokenResponseParsing.parse(.failure(OutboundError(.timeout, "10 s")), context: Self.context)
        #expect(failed.refusal?.code == "idp_unavailable")
    }
}
