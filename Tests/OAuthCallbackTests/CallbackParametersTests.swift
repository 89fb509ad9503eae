import Testing
@testable import OAuthCallback

@Suite struct CallbackParametersTests {
    typealias F = CallbackFixtures

    func parsed(_ query: String) throws -> CallbackParameters {
        try CallbackParameters.parse(query: query).get()
    }

    // MARK: Accepted

    @Test func aGoogleCallbackParsesIntoItsDecodedValues() throws {
        let p = try parsed(F.googleAndroidQuery)
        #expect(p.provider == "google")
        #expect(p.platform == "android")
        #expect(p.clientID == F.googleAndroidID)
        #expect(p.redirectURI == "com.example.app:/oauth2redirect")
        #expect(p.state == F.state)
        #expect(p.response == .code("4/0AX4XfWh-SECRETCODE_abc", verifier: F.verifier))
        #expect(p.code == F.code)
        #expect(p.codeVerifier == F.verifier)
        #expect(p.providerError == nil)
    }

    @Test func theOrderOfParametersDoesNotMatter() throws {
        let reversed = F.join(F.googleAndroidFields.reversed())
        #expect(try parsed(reversed) == parsed(F.googleAndroidQuery))
    }

    @Test func bytesAndStringsParseAlike() throws {
        let fromBytes = try CallbackParameters.parse(query: Array(F.googleAndroidQuery.utf8)).get()
        #expect(try fromBytes == parsed(F.googleAndroidQuery))
    }

    @Test func aCallbackWithoutVerifierParsesForProvidersWithoutPKCE() throws {
        let p = try parsed(F.googleAndroid("code_verifier", nil))
        #expect(p.response == .code(F.code, verifier: nil))
    }

    @Test(arguments: [
        ("state=a+b", "a b"),
        ("state=a%20b", "a b"),
        ("state=a%2bb", "a+b"),
        ("state=a%2Bb", "a+b"),
        ("state=abc==", "abc=="),
        ("state=a/b?c:d@e!$'()*,;", "a/b?c:d@e!$'()*,;"),
        ("state=%7E~", "~~"),
    ])
    func valuesAreFormDecoded(field: String, expected: String) throws {
        let query = F.googleAndroid("state", nil) + "&" + field
        #expect(try parsed(query).state == expected)
    }

    @Test func redirectsMayCarryRawSchemeAndPathCharacters() throws {
        #expect(try parsed(F.googleAndroid("redirect_uri", "com.example.app:/oauth2redirect")).redirectURI
            == "com.example.app:/oauth2redirect")
    }

    @Test func aPercentEncodedNameIsTheParameterItSpells() throws {
        let query = F.googleAndroid("code", nil) + "&co%64e=abc"
        #expect(try parsed(query).code == "abc")
    }

    @Test func multiByteUTF8IsAcceptedWhereTextIsAllowed() throws {
        #expect(try parsed(F.googleAndroid("client_id", "caf%C3%A9")).clientID == "caf\u{E9}")
    }

    @Test(arguments: [
        ("code", 2_048), ("state", 1_024), ("client_id", 512), ("redirect_uri", 512),
        ("provider", 64), ("platform", 32), ("code_verifier", 43), ("code_verifier", 128),
    ])
    func valuesAtTheirLimitAreAccepted(name: String, length: Int) {
        let query = F.googleAndroid(name, String(repeating: "a", count: length))
        #expect(throws: Never.self) { try CallbackParameters.parse(query: query).get() }
    }

    @Test func aQueryOfExactlyEightKiBIsAccepted() throws {
        // Percent-encoding triples the raw size, so every value can stay within its own limit.
        let encodedA = { (count: Int) in String(repeating: "%41", count: count) }
        let base = F.join([("provider", "google"), ("platform", "android"), ("client_id", encodedA(512)),
                           ("redirect_uri", encodedA(512)), ("state", F.state), ("error", encodedA(1_024)),
                           ("error_description", "")])
        let room = 8 * 1024 - base.utf8.count
        let query = base + encodedA(room / 3) + String(repeating: "x", count: room % 3)
        #expect(query.utf8.count == 8 * 1024)
        let p = try parsed(query)
        #expect(p.clientID == String(repeating: "A", count: 512))
        #expect(p.providerError?.code == "sign_in_failed")
    }

    // MARK: error=

    @Test func accessDeniedIsAFailedSignInForwardedAsSuch() throws {
        let p = try parsed(F.googleAndroidError("access_denied"))
        let error = try #require(p.providerError)
        #expect(error.code == "access_denied")
        #expect(error.recognised)
        #expect(p.code == nil)
        #expect(p.state == F.state)
        let failure = error.failure
        #expect(failure.source == .client)
        #expect(failure.code == "access_denied")
        #expect(failure.status == 400)
        #expect(failure.logDetail.contains("error=access_denied"))
    }

    @Test(arguments: CallbackParameters.ProviderError.forwardedCodes.sorted())
    func allowlistedErrorCodesAreKept(code: String) throws {
        #expect(try parsed(F.googleAndroidError(code)).providerError?.code == code)
    }

    @Test(arguments: [
        "The%20operation%20couldn%E2%80%99t%20be%20completed.",
        "invalid_client",
        "ACCESS_DENIED",
        "access_denied%20",
    ])
    func anyOtherErrorValueBecomesSignInFailed(error: String) throws {
        let reported = try #require(parsed(F.googleAndroidError(error)).providerError)
        #expect(reported.code == "sign_in_failed")
        #expect(!reported.recognised)
        #expect(reported.failure.code == "sign_in_failed")
        #expect(reported.failure.logDetail.contains("unrecognised"))
    }

    @Test func errorDescriptionIsKeptShortenedForTheLogOnly() throws {
        let long = String(repeating: "dxd", count: 100)
        let p = try parsed(F.googleAndroidError("access_denied", extra: [("error_description", long)]))
        let error = try #require(p.providerError)
        let kept = String(long.prefix(128))
        #expect(error.detailForLog == kept + "…")
        #expect(error.failure.logDetail.contains(kept + "…"))
        #expect(!error.failure.logDetail.contains(String(long.prefix(129))))
        #expect(!error.failure.userMessage.contains("dxd"))
    }

    @Test func aVerifierOnAFailureCallbackIsDropped() throws {
        let p = try parsed(F.googleAndroidError("access_denied", extra: [("code_verifier", F.verifier)]))
        #expect(p.codeVerifier == nil)
        #expect(p.providerError?.code == "access_denied")
    }

    // MARK: Refused

    struct Refusal: Sendable, CustomTestStringConvertible {
        var label: String
        var query: String
        /// A fragment the log detail must contain.
        var reason: String
        var testDescription: String { label }

        init(_ label: String, _ query: String, _ reason: String) {
            self.label = label
            self.query = query
            self.reason = reason
        }
    }

    static let longVerifier = String(repeating: "v", count: 129)

    static let refusals: [Refusal] = [
        // Missing
        Refusal("missing provider", F.googleAndroid("provider", nil), "`provider` is missing"),
        Refusal("missing platform", F.googleAndroid("platform", nil), "`platform` is missing"),
        Refusal("missing client_id", F.googleAndroid("client_id", nil), "`client_id` is missing"),
        Refusal("missing redirect_uri", F.googleAndroid("redirect_uri", nil), "`redirect_uri` is missing"),
        Refusal("missing state", F.googleAndroid("state", nil), "`state` is missing"),
        Refusal("missing code and error", F.googleAndroid("code", nil), "neither `code` nor `error`"),
        Refusal("empty query", "", "neither `code` nor `error`"),
        Refusal("failure callback without state", F.googleAndroidError("access_denied").replacingState(), "`state` is missing"),
        Refusal("empty state", F.googleAndroid("state", ""), "`state` is empty"),
        Refusal("empty code", F.googleAndroid("code", ""), "`code` is empty"),
        Refusal("empty provider", F.googleAndroid("provider", ""), "`provider` is empty"),
        Refusal("empty error", F.googleAndroidError(""), "`error` is empty"),
        // Duplicated
        Refusal("code twice", F.googleAndroidQuery + "&code=other", "duplicated parameter `code`"),
        Refusal("state twice, same value", F.googleAndroidQuery + "&state=" + F.state, "duplicated parameter `state`"),
        Refusal("provider twice", F.googleAndroidQuery + "&provider=google", "duplicated parameter `provider`"),
        Refusal("verifier twice", F.googleAndroidQuery + "&code_verifier=" + F.verifier, "duplicated parameter `code_verifier`"),
        Refusal("code twice, once percent-encoded", F.googleAndroidQuery + "&co%64e=x", "duplicated parameter `code`"),
        // Unknown
        Refusal("nonce", F.googleAndroid("nonce", "n-0S6"), "unknown parameter `nonce`"),
        Refusal("name in another case", F.googleAndroid("Code", "x"), "unknown parameter `Code`"),
        Refusal("access_token", F.googleAndroid("access_token", "ya29"), "unknown parameter `access_token`"),
        Refusal("empty value of unknown name", F.googleAndroid("foo", ""), "unknown parameter `foo`"),
        Refusal("code pasted as a name", F.googleAndroidQuery + "&4/0AX4XfWh-SECRETCODE_abc=1", "name not shown"),
        // Oversized
        Refusal("code 2049", F.googleAndroid("code", String(repeating: "c", count: 2_049)), "`code` exceeds 2048 bytes"),
        Refusal("state 1025", F.googleAndroid("state", String(repeating: "s", count: 1_025)), "`state` exceeds 1024 bytes"),
        Refusal("client_id 513", F.googleAndroid("client_id", String(repeating: "i", count: 513)), "`client_id` exceeds 512 bytes"),
        Refusal("redirect_uri 513", F.googleAndroid("redirect_uri", String(repeating: "r", count: 513)), "`redirect_uri` exceeds 512 bytes"),
        Refusal("provider 65", F.googleAndroid("provider", String(repeating: "p", count: 65)), "`provider` exceeds 64 bytes"),
        Refusal("platform 33", F.googleAndroid("platform", String(repeating: "p", count: 33)), "`platform` exceeds 32 bytes"),
        Refusal("error 1025", F.googleAndroidError(String(repeating: "e", count: 1_025)), "`error` exceeds 1024 bytes"),
        Refusal("error_description 1025",
                F.googleAndroidError("access_denied", extra: [("error_description", String(repeating: "d", count: 1_025))]),
                "`error_description` exceeds 1024 bytes"),
        Refusal("multi-byte client_id over 512 bytes", F.googleAndroid("client_id", String(repeating: "%C3%A9", count: 257)),
                "`client_id` exceeds 512 bytes"),
        Refusal("query over 8 KiB", F.googleAndroidError("access_denied", extra: [("error_description", String(repeating: "d", count: 8_192))]),
                "exceeds 8192 bytes"),
        // Percent-encoding
        Refusal("lone % at the end", F.googleAndroid("state", "abc%"), "bad percent-encoding in the value of `state`"),
        Refusal("% with one digit", F.googleAndroid("state", "abc%4"), "bad percent-encoding in the value of `state`"),
        Refusal("% with a non-hex digit", F.googleAndroid("state", "%G1abc"), "bad percent-encoding in the value of `state`"),
        Refusal("double %", F.googleAndroid("code", "%%41"), "bad percent-encoding in the value of `code`"),
        Refusal("% + sign", F.googleAndroid("code", "%+1"), "bad percent-encoding in the value of `code`"),
        Refusal("bad % in a name", F.googleAndroidQuery + "&co%6=x", "bad percent-encoding in a parameter name"),
        Refusal("bad % in an unknown name's value", F.googleAndroidQuery + "&foo=%", "in the value of an unknown parameter"),
        // UTF-8
        Refusal("lone 0xFF", F.googleAndroid("client_id", "%FF"), "invalid UTF-8 in the value of `client_id`"),
        Refusal("overlong slash", F.googleAndroid("client_id", "%C0%AF"), "invalid UTF-8 in the value of `client_id`"),
        Refusal("surrogate", F.googleAndroid("client_id", "%ED%A0%80"), "invalid UTF-8 in the value of `client_id`"),
        Refusal("truncated sequence", F.googleAndroid("client_id", "%E2%82"), "invalid UTF-8 in the value of `client_id`"),
        Refusal("beyond U+10FFFF", F.googleAndroid("client_id", "%F4%90%80%80"), "invalid UTF-8 in the value of `client_id`"),
        Refusal("invalid UTF-8 in a name", F.googleAndroidQuery + "&%FF=x", "invalid UTF-8 in a parameter name"),
        // Control characters
        Refusal("NUL", F.googleAndroid("redirect_uri", "a%00b"), "a control character in the value of `redirect_uri`"),
        Refusal("LF", F.googleAndroid("redirect_uri", "a%0Ab"), "a control character in the value of `redirect_uri`"),
        Refusal("CR LF", F.googleAndroid("redirect_uri", "a%0D%0Ab"), "a control character in the value of `redirect_uri`"),
        Refusal("TAB", F.googleAndroid("state", "a%09b"), "a control character in the value of `state`"),
        Refusal("ESC", F.googleAndroid("client_id", "a%1Bb"), "a control character in the value of `client_id`"),
        Refusal("DEL", F.googleAndroid("client_id", "a%7Fb"), "a control character in the value of `client_id`"),
        Refusal("C1 NEL", F.googleAndroid("client_id", "a%C2%85b"), "a control character in the value of `client_id`"),
        Refusal("LF in error_description",
                F.googleAndroidError("access_denied", extra: [("error_description", "x%0Ay")]),
                "a control character in the value of `error_description`"),
        Refusal("control character in a name", F.googleAndroidQuery + "&%0Acode=x", "a control character in a parameter name"),
        // Raw characters not allowed in a query
        Refusal("raw space", F.googleAndroid("state", "a b"), "a character not allowed in a URI query"),
        Refusal("raw quote", F.googleAndroid("state", "a\"b"), "a character not allowed in a URI query"),
        Refusal("raw angle bracket", F.googleAndroid("state", "<b>"), "a character not allowed in a URI query"),
        Refusal("raw backslash", F.googleAndroid("state", "a\\b"), "a character not allowed in a URI query"),
        Refusal("raw hash", F.googleAndroid("state", "a#b"), "a character not allowed in a URI query"),
        Refusal("raw caret", F.googleAndroid("state", "a^b"), "a character not allowed in a URI query"),
        Refusal("raw pipe", F.googleAndroid("state", "a|b"), "a character not allowed in a URI query"),
        Refusal("raw brace", F.googleAndroid("state", "a{b}"), "a character not allowed in a URI query"),
        Refusal("raw non-ASCII", F.googleAndroid("client_id", "caf\u{E9}"), "a character not allowed in a URI query"),
        Refusal("raw U+FFFD (what lossy decoding leaves)", F.googleAndroid("client_id", "a\u{FFFD}"), "a character not allowed in a URI query"),
        // Field structure
        Refusal("empty field in the middle", F.googleAndroid("state", nil) + "&&state=" + F.state, "an empty field or name"),
        Refusal("leading &", "&" + F.googleAndroidQuery, "an empty field or name"),
        Refusal("trailing &", F.googleAndroidQuery + "&", "an empty field or name"),
        Refusal("empty name", F.googleAndroidQuery + "&=x", "an empty field or name"),
        Refusal("field without =", F.googleAndroidQuery + "&debug", "a field without '='"),
        // Verifier
        Refusal("verifier of 42", F.googleAndroid("code_verifier", String(repeating: "v", count: 42)),
                "`code_verifier` is shorter than 43 characters"),
        Refusal("verifier of 129", F.googleAndroid("code_verifier", longVerifier), "`code_verifier` exceeds 128 bytes"),
        Refusal("verifier with + (a space)", F.googleAndroid("code_verifier", String(repeating: "v", count: 42) + "+"),
                "`code_verifier` contains characters outside its allowed set"),
        Refusal("verifier with %2B", F.googleAndroid("code_verifier", String(repeating: "v", count: 42) + "%2B"),
                "`code_verifier` contains characters outside its allowed set"),
        Refusal("verifier with /", F.googleAndroid("code_verifier", String(repeating: "v", count: 42) + "/"),
                "`code_verifier` contains characters outside its allowed set"),
        Refusal("verifier with =", F.googleAndroid("code_verifier", String(repeating: "v", count: 42) + "="),
                "`code_verifier` contains characters outside its allowed set"),
        Refusal("verifier with non-ASCII", F.googleAndroid("code_verifier", String(repeating: "v", count: 42) + "%C3%A9"),
                "`code_verifier` contains characters outside its allowed set"),
        // Character sets
        Refusal("non-ASCII code", F.googleAndroid("code", "abc%C3%A9"), "`code` contains characters outside its allowed set"),
        Refusal("non-ASCII state", F.googleAndroid("state", "abc%C3%A9"), "`state` contains characters outside its allowed set"),
        Refusal("provider with a space", F.googleAndroid("provider", "goo+gle"), "`provider` contains characters outside its allowed set"),
        Refusal("provider with a slash", F.googleAndroid("provider", "google%2F.."), "`provider` contains characters outside its allowed set"),
        Refusal("non-ASCII platform", F.googleAndroid("platform", "i%C3%B6s"), "`platform` contains characters outside its allowed set"),
        // error= rules
        Refusal("error with code", F.googleAndroid("error", "access_denied"), "`error` and `code` are both present"),
        Refusal("error_description without error", F.googleAndroid("error_description", "x"), "`error_description` without `error`"),
    ]

    @Test(arguments: refusals)
    func refused(_ refusal: Refusal) throws {
        // The query really carries the secrets (unless the case removed them), so the
        // log-detail check below is not vacuous.
        let failure: CallbackFailure
        switch CallbackParameters.parse(query: refusal.query) {
        case .success(let p):
            Issue.record("accepted: \(p)")
            return
        case .failure(let f):
            failure = f
        }
        #expect(failure.source == .client)
        #expect(failure.code == "invalid_request")
        #expect(failure.status == 400)
        #expect(failure.logDetail.contains(refusal.reason), "\(failure.logDetail)")
        #expect(!failure.logDetail.contains("SECRET"), "\(failure.logDetail)")
        #expect(!failure.userMessage.contains("SECRET"))
        #expect(failure.userMessage != failure.logDetail)
    }

    @Test func theRefusalTableCarriesTheSecretsItChecksFor() {
        let carrying = Self.refusals.filter { $0.query.contains("SECRETCODE") || $0.query.contains("SECRETSTATE") }
        #expect(carrying.count > Self.refusals.count / 2)
    }

    // MARK: Never print secrets

    @Test func descriptionsRedactCodeStateAndVerifier() throws {
        let p = try parsed(F.googleAndroidQuery)
        var dumped = ""
        dump(p, to: &dumped)
        for text in ["\(p)", String(describing: p), String(reflecting: p), dumped] {
            #expect(!text.contains("SECRET"), "\(text)")
            #expect(text.contains("google"))
        }
    }
}

extension String {
    /// This failure callback without its `state` field.
    fileprivate func replacingState() -> String {
        split(separator: "&").filter { !$0.hasPrefix("state=") }.joined(separator: "&")
    }
}
