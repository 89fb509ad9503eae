import Testing
import ProxyCore
@testable import OAuthCallback

@Suite struct ExtraJWTIssuerTests {
    static let jwks = "https://keys.partner.example/jwks"
    static let api = "api://orders"

    let clock = TestClock()
    let idp: FakeIdP

    init() {
        idp = FakeIdP(clock: clock)
        idp.publishKeys(Self.jwks, [Mint.jwk(TestKeys.rsaA, kid: "rsa-a"), Mint.jwk(TestKeys.ecA, kid: "ec-a")])
    }

    func issuer(jwksURI: String? = jwks, issuer: String = Mint.issuer) -> ExtraJWTIssuer {
        ExtraJWTIssuer(.init(issuer: issuer, audiences: [Self.api], jwksURI: jwksURI), index: 2, http: idp, clock: clock.function)
    }

    func token(_ overrides: [String: JSONValue?] = [:]) -> String {
        var claims: [String: JSONValue?] = ["aud": .string(Self.api), "iat": .number(clock.now), "exp": .number(clock.now + 600), "nonce": nil]
        claims.merge(overrides) { $1 }
        return Mint.rs256(Mint.claims(claims))
    }

    func verify(_ issuer: ExtraJWTIssuer, _ token: String, audience: String = api) async -> Result<VerifiedClaims, CallbackFailure> {
        await onLoop { loop, done in issuer.verifyIDToken(token, audience: audience, on: loop, done) }.result
    }

    @Test func aTokenOfTheIssuerForItsAudienceVerifiesWithTheKeysAtItsJWKSURI() async throws {
        let claims = try await verify(issuer(), token()).get()
        #expect(claims.subject == "110169484474386276334" && claims.issuer == Mint.issuer)
        #expect(idp.requests(to: Self.jwks).count == 1)
        #expect(issuer().acceptedIssuers == [Mint.issuer])
    }

    @Test(arguments: [
        ("another audience", ["aud": .string("api://other")]),
        ("another issuer", ["iss": .string("https://evil.example")]),
        ("expired", ["exp": .number(Mint.now - 3_600)]),
        ("not yet valid", ["nbf": .number(Mint.now + 3_600)]),
        ("azp of another party", ["azp": .string("someone-else")]),
    ] as [(String, [String: JSONValue?])])
    func theSameChecksAsAProvidersIDTokensRefuse(_ what: String, overrides: [String: JSONValue?]) async {
        let failure = await verify(issuer(), token(overrides)).refusal
        #expect(failure?.code == "invalid_id_token", "\(what)")
        #expect(failure?.retryable == false)
    }

    @Test func algNoneAndHMACAreRefused() async {
        let body = Mint.encoded(Mint.claims(["aud": .string(Self.api), "iat": .number(clock.now), "nonce": nil]))
        for alg in ["none", "HS256"] {
            let forged = Mint.encoded(["alg": .string(alg)]) + "." + body + "."
            #expect(await verify(issuer(), forged).refusal?.code == "invalid_id_token", "\(alg)")
        }
    }

    @Test func unreachableKeysAreAnUnavailableFailureAndNeverASuccess() async {
        idp.override(Self.jwks, .response(OutboundResponse(status: 503)))
        let failure = await verify(issuer(), token()).refusal
        #expect(failure?.code == "idp_unavailable")
        #expect(issuer().setting == "oauth.session.extra_jwt_issuers[2].jwks_uri")
    }

    @Test func withoutAJWKSURITheKeysComeFromTheIssuersDiscoveryDocument() async throws {
        let oidc = issuer(jwksURI: nil, issuer: FakeIdP.URLs.oidcIssuer)
        idp.publishKeys(FakeIdP.URLs.oidcJWKS, [Mint.jwk(TestKeys.rsaA, kid: "rsa-a")])
        let claims = try await verify(oidc, token(["iss": .string(FakeIdP.URLs.oidcIssuer)])).get()
        #expect(claims.issuer == FakeIdP.URLs.oidcIssuer)
        #expect(idp.requests(to: FakeIdP.URLs.oidcDiscovery).count == 1)
        #expect(oidc.setting.hasPrefix("oauth.session.extra_jwt_issuers[2].issuer"))
    }

    @Test func aDiscoveryDocumentWithoutATokenEndpointStillGivesItsKeys() async throws {
        // GitHub Actions' and Kubernetes' issuers publish keys and no token endpoint.
        let issuer = "https://token.actions.example"
        idp.override(issuer + "/.well-known/openid-configuration", .response(FakeIdP.json(200, [
            "issuer": .string(issuer), "jwks_uri": .string(Self.jwks),
            "id_token_signing_alg_values_supported": .array([.string("RS256")]),
        ])))
        let claims = try await verify(self.issuer(jwksURI: nil, issuer: issuer), token(["iss": .string(issuer)])).get()
        #expect(claims.issuer == issuer)
        // Its document must still name itself: another issuer's keys are never taken.
        idp.override(issuer + "/.well-known/openid-configuration", .response(FakeIdP.json(200, [
            "issuer": .string("https://other.example"), "jwks_uri": .string(Self.jwks),
        ])))
        let fresh = self.issuer(jwksURI: nil, issuer: issuer)
        #expect(await verify(fresh, token(["iss": .string(issuer)])).refusal?.code == "idp_unavailable")
    }
}
