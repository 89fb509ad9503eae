import Testing
@testable import OAuthCallback

@Suite struct RedirectValidatorTests {
    static let allowedHosts = ["good.com", ".apps.example.org", "admin.good.com:8443", "http://legacy.internal"]
    let validator = RedirectValidator(allowedHosts: allowedHosts)

    // MARK: Hostile targets — every one must be refused

    /// Protocol-relative, extra slashes, backslashes and their encodings.
    static let slashTricks = [
        "//evil.com", "//evil.com/", "//evil.com/%2f..", "///evil.com", "////evil.com", "/////evil.com/",
        "/\\evil.com", "\\/evil.com", "\\\\evil.com", "\\evil.com", "/\\/evil.com", "/\\\\evil.com",
        "\\/\\/evil.com", "/\\", "/\\.evil.com", "//\\evil.com", "//good.com", "//good.com/path",
        "/%2f%2fevil.com", "/%2F%2Fevil.com", "/%2fevil.com", "/%2Fevil.com", "/%2f/evil.com",
        "%2f%2fevil.com", "%2fevil.com", "/%5cevil.com", "/%5Cevil.com", "/%5c%5cevil.com",
        "/%5c/evil.com", "/%5C%2Fevil.com", "/%2f%5cevil.com", "/%252f%252fevil.com", "/%252F/evil.com",
        "/%25252f%25252fevil.com", "/%255cevil.com", "/%2525252f%2525252fevil.com",
        "/%2e%2e//evil.com", "/..//evil.com", "/.%2f%2fevil.com", "/%2e/%2fevil.com", "/foo/../..//evil.com",
        "/foo/%2e%2e/%2e%2e//evil.com", "/x/..\\evil.com",
        // A URL as a later path segment (oauth2-proxy's corpus): `//` anywhere in the path.
        "/http://evil.com", "/https://evil.com/", "/https://good.com@evil.com/", "/<>//evil.com",
        "/%68%74%74%70%3a%2f%2f%65%76%69%6c%2e%63%6f%6d", "https://good.com/https://evil.com/", "/a//b",
    ]

    /// Whitespace and control characters, raw and percent-encoded, including CRLF injection.
    static let whitespaceAndControls = [
        " /evil", " //evil.com", "\t//evil.com", "\n//evil.com", "\r//evil.com", "\u{0B}//evil.com",
        "\u{0C}//evil.com", "%09//evil.com", "%0a//evil.com", "%0d//evil.com", "%20//evil.com",
        "%00//evil.com", "%2509//evil.com", "/\t/evil.com", "/\n/evil.com", "/\r\n/evil.com", "/ /evil.com",
        "/%09/evil.com", "/%0a/evil.com", "/%0d/evil.com", "/%20/evil.com", "/%0D%0A/evil.com",
        "/%250a/evil.com", "/foo%0d%0aSet-Cookie:%20x=y", "/foo?x=%0d%0aLocation:%20https://evil.com",
        "/\r\nLocation: https://evil.com", "/foo#%0aevil", "/foo\u{0}", "/%00", "/foo?%00", "/\u{7F}",
        "/%7f", "/path with space", "/tab\there", "\u{00A0}//evil.com", "\u{3000}//evil.com",
        "\u{FEFF}/evil", "\u{2028}//evil.com", "https://good.com ", " https://good.com",
        "https://good.com/%0a", "https://good.com/?q=%0d%0a", "https://good.com#\u{0}",
    ]

    /// Schemes other than https (and http where not allowed), malformed https, control
    /// characters inside the scheme, and mixed-case schemes aimed at hostile hosts.
    static let schemeTricks = [
        "javascript:alert(1)", "JaVaScRiPt:alert(1)", "javascript://%0aalert(1)", "javascript://good.com/%0aalert(1)",
        "java\tscript:alert(1)", "java\nscript:alert(1)", "java%09script:alert(1)", "java%0ascript:alert(1)",
        "%6aavascript:alert(1)", " javascript:alert(1)", "data:text/html,<script>alert(1)</script>",
        "data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==", "DATA:text/html,x", "vbscript:msgbox(1)",
        "file:///etc/passwd", "ftp://good.com/", "ws://good.com", "wss://good.com", "blob:https://good.com/x",
        "http://good.com/", "http://evil.com", "hTtP://good.com", "HTTPS://evil.com", "HtTpS://evil.com",
        "https:evil.com", "https:/evil.com", "https:///evil.com", "https:////evil.com", "https:\\\\evil.com",
        "https:/\\evil.com", "https:\\/evil.com", "https:good.com", "https:/good.com", "https:///good.com",
        "h\tttps://evil.com", "ht\ntps://good.com", "https\t://good.com", "https ://good.com",
        "https//evil.com", "https:%2f%2fevil.com", "https%3a//evil.com", "https%3A%2F%2Fevil.com",
        "//https://evil.com", "/https://evil.com/%2f%2f..",
    ]

    /// Userinfo and authority-confusion tricks.
    static let userinfoTricks = [
        "https://good.com@evil.com", "https://good.com:pass@evil.com", "https://good.com:443@evil.com",
        "https://user@good.com", "https://user:pass@good.com/", "https://@good.com", "https://:@good.com",
        "https://good.com%40evil.com", "https://evil.com\\@good.com", "https://evil.com%5c@good.com",
        "https://evil.com%5C@good.com", "https://evil.com#@good.com", "https://evil.com?@good.com",
        "https://evil.com/good.com", "https://evil.com/?good.com", "https://evil.com#good.com",
        "https://good.com%2f@evil.com", "https://evil.com%23@good.com", "https://good.com&@evil.com",
        "https://good.com;@evil.com", "https://good.com\\.evil.com", "https://good.com%00.evil.com",
        "https://good.com%2eevil.com", "https://good.com%09.evil.com", "https://%67ood.com", "https://good%2ecom",
        "https://good.com:80:443", "https://good.com::443",
    ]

    /// Hosts that look like an allowed one, numeric and IP-literal hosts, and wrong ports.
    static let lookAlikeHosts = [
        "https://evil.com", "https://evil.com/", "https://good.com.evil.com", "https://good.com.evil.com/",
        "https://evilgood.com", "https://evil-good.com", "https://good.com.", "https://good.com./",
        "https://good.com..", "https://.good.com", "https://good..com", "https://good.co", "https://good.comm",
        "https://goodxcom", "https://good_com", "https://-good.com", "https://sub.good.com",
        "https://apps.example.org.evil.com", "https://evil-apps.example.org", "https://xapps.example.org",
        "https://example.org", "https://apps.example.org.", "https://admin.good.com", "https://admin.good.com:443",
        "https://good.com:8443", "https://good.com:444", "https://good.com:0", "https://good.com:65536",
        "https://good.com:", "https://good.com:443abc", "https://good.com:0443", "https://good.com:-443",
        "https://good.com:+443", "https://g\u{043E}\u{043E}d.com", "https://xn--gd-gmcb.com",
        "https://xn--good-com.evil.com", "https://good\u{3002}com", "https://good\u{FF0E}com",
        "https://\u{FF47}\u{FF4F}\u{FF4F}\u{FF44}.com", "https://good.com\u{200B}", "https://good.com%E3%80%82evil.com",
        "https://2130706433", "https://0x7f000001", "https://0177.0.0.1", "https://127.0.0.1", "https://127.1",
        "https://0x7f.0.0.1", "https://0", "https://3232235521/", "https://017700000001", "https://[::1]",
        "https://[::ffff:127.0.0.1]", "https://[0:0:0:0:0:ffff:7f00:1]", "https://[::ffff:7f00:1]/",
        "http://legacy.internal.evil.com", "http://evil.legacy.internal", "http://legacy.internal:8080",
        "https://legacy.internal.", "/\u{FF0F}evil.com", "\u{FF0F}\u{FF0F}evil.com", "/%c0%afevil.com",
        "/%c0%ae%c0%ae//evil.com", "/%e3%80%82evil.com", "/%ef%bc%8f%ef%bc%8fevil.com",
    ]

    /// Not a path at all: fragments, queries, bare hosts, relative references, empty input.
    static let notAPath = [
        "", " ", "#", "#//evil.com", "#https://evil.com", "?", "?next=//evil.com", "evil.com", "good.com",
        "good.com/path", "evil.com/good.com", "./evil", "../evil", ".//evil.com", "@evil.com", ":evil.com",
        "%2e%2e/evil", "~/evil", "%", "/%", "/%zz", "/%2", "/foo%", "/foo?x=%g0",
    ]

    static let hostile = slashTricks + whitespaceAndControls + schemeTricks + userinfoTricks + lookAlikeHosts + notAPath

    @Test func theHostileCorpusIsLarge() {
        #expect(Self.hostile.count >= 100)
        #expect(Set(Self.hostile).count == Self.hostile.count, "duplicate vectors")
    }

    @Test(arguments: hostile)
    func hostileTargetIsRefused(target: String) {
        #expect(validator.validate(target) == nil)
    }

    @Test func overLongTargetsAreRefused() {
        let limit = "/" + String(repeating: "a", count: RedirectValidator.maximumLength - 1)
        #expect(validator.validate(limit) == limit)
        #expect(validator.validate(limit + "a") == nil)
        #expect(validator.validate("https://good.com/" + String(repeating: "a", count: 4096)) == nil)
    }

    // MARK: Legitimate targets — returned unchanged

    static let legitimate = [
        "/", "/dashboard", "/a/b/c", "/a/b/c?x=1&y=2#section", "/search?q=a%20b", "/search?q=a+b",
        "/search?next=%2Fhome", "/search?next=//elsewhere", "/files/a%2fb", "/100%25off", "/#top", "/?x=1",
        "/path;param=1", "/~user/", "/a:b", "/a@b", "/a.b/c..d/.e", "/trailing/", "/a?b=%5c",
        "/users/42/edit?return=%2Fusers%2F42#form",
        "https://good.com", "https://good.com/", "https://GOOD.com/x", "https://Good.Com/x", "HTTPS://good.com/x",
        "https://good.com:443/x", "https://good.com/path?q=1#frag", "https://good.com?q=1", "https://good.com#frag",
        "https://admin.good.com:8443/console", "https://apps.example.org/", "https://team.apps.example.org/board?id=7",
        "https://a.b.apps.example.org", "https://xn--bcher-kva.apps.example.org/", "https://0x7f.apps.example.org/",
        "http://legacy.internal/home", "https://legacy.internal/home", "http://legacy.internal:80/",
        "http://LEGACY.internal/?a=b",
    ]

    @Test(arguments: legitimate)
    func legitimateTargetIsReturnedUnchanged(target: String) {
        #expect(validator.validate(target) == target)
    }

    // MARK: The allowlist

    @Test func withoutAnAllowlistOnlyLocalPathsAreAccepted() {
        let local = RedirectValidator(allowedHosts: [])
        #expect(local.validate("/home?x=1") == "/home?x=1")
        #expect(local.validate("https://good.com/") == nil)
    }

    @Test func aWildcardEntryAcceptsTheDomainAndItsSubdomains() {
        let wildcard = RedirectValidator(allowedHosts: ["*.good.com"])
        #expect(wildcard.validate("https://good.com/") == "https://good.com/")
        #expect(wildcard.validate("https://a.good.com/") == "https://a.good.com/")
        #expect(wildcard.validate("https://agood.com/") == nil)
    }

    @Test func anyPortEntryAcceptsEveryPortButNoOtherHost() {
        let anyPort = RedirectValidator(allowedHosts: ["good.com:*"])
        #expect(anyPort.validate("https://good.com:9000/") == "https://good.com:9000/")
        #expect(anyPort.validate("https://good.com/") == "https://good.com/")
        #expect(anyPort.validate("https://evil.com:9000/") == nil)
    }

    @Test func anHTTPSEntryWithSchemeAndSlashIsTheBareHost() {
        let v = RedirectValidator(allowedHosts: ["https://Good.com/"])
        #expect(v.validate("https://good.com/x") == "https://good.com/x")
        #expect(v.validate("http://good.com/x") == nil)
    }

    static let invalidEntries = ["", "http://", ".", "*.", "good.com:abc", "good.com:0", "[::1]", "good..com",
                                 "good.com.", "user@good.com", "good.com/path", "g\u{00F6}\u{00F6}d.com", " good.com"]

    @Test(arguments: invalidEntries)
    func malformedEntryIsReportedAndIgnored(entry: String) {
        #expect(!RedirectValidator.isValidEntry(entry))
        #expect(RedirectValidator(allowedHosts: [entry]).validate("https://good.com/") == nil)
    }

    @Test(arguments: ["good.com", ".good.com", "*.good.com", "good.com:8443", "good.com:*", "http://good.com",
                      "https://good.com", "https://good.com/", "xn--bcher-kva.example", "localhost"])
    func wellFormedEntryIsValid(entry: String) {
        #expect(RedirectValidator.isValidEntry(entry))
    }
}
