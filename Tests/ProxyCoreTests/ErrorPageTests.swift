import Testing
@testable import ProxyCore

/// The proxy's own error answers: which form a client gets, what each form says, and the
/// operator's templates.
@Suite struct ErrorPageTests {
    func form(_ accept: String?) -> ErrorPage.Form {
        guard let accept else { return ErrorPage.form(accept: nil) }
        return Array(accept.utf8).withUnsafeBytes { ErrorPage.form(accept: $0) }
    }

    @Test func browsersGetHTMLAPIClientsJSONAndEveryoneElseText() {
        // Chromium's (and Android WebView's) navigation Accept.
        #expect(form("text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8") == .html)
        // Safari / WKWebView.
        #expect(form("text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8") == .html)
        #expect(form("application/json") == .json)
        #expect(form("application/json, text/plain, */*") == .json)  // axios
        #expect(form("application/problem+json") == .json)
        #expect(form("text/html;q=0.5, application/json") == .json)
        #expect(form("TEXT/HTML") == .html)
        #expect(form("*/*") == .text)  // curl, fetch()
        #expect(form(nil) == .text)
        #expect(form("text/html;q=0") == .text)
        #expect(form("image/png") == .text)
    }

    func body(_ status: Int, _ form: ErrorPage.Form, reason: String = "upstream unreachable (connect: refused 10.0.0.5:3000)",
              method: HTTPMethod = .get, settings: ErrorPageSettings = ErrorPageSettings()) -> (String, String) {
        ErrorPage.body(status: status, reason: reason, requestID: "abc123", form: form, method: method, settings: settings)
    }

    @Test func aGatewayErrorPageRetriesByItselfAndNeverShowsTheInsideReason() {
        for status in [502, 503, 504] {
            let (type, html) = body(status, .html)
            #expect(type == "text/html; charset=utf-8")
            #expect(html.contains("<meta http-equiv=\"refresh\" content=\"5\">"), "status \(status)")
            #expect(html.contains("href=\"\">Try again</a>"))
            #expect(html.contains("abc123"))
            #expect(html.contains("<meta name=\"viewport\""))
            #expect(!html.contains("10.0.0.5") && !html.contains("refused"))
            #expect(ErrorPage.retries(status))
        }
        // A form's POST is not repeated by a refresh (it would come back as a GET).
        let (_, post) = body(502, .html, method: .post)
        #expect(!post.contains("http-equiv=\"refresh\""))
        #expect(post.contains("Try again"))
    }

    @Test func aRefusalSaysWhatWasWrongAndDoesNotRetry() {
        let (_, html) = body(413, .html, reason: "request body larger than <100> bytes")
        #expect(html.contains("Request body larger than &lt;100&gt; bytes."))
        #expect(!html.contains("refresh") && !html.contains("Try again"))
        #expect(!ErrorPage.retries(413))
        let (type, text) = body(413, .text, reason: "request body larger than 100 bytes")
        #expect(type == "text/plain; charset=utf-8")
        #expect(text == "413 Content Too Large: request body larger than 100 bytes\n")
    }

    @Test func jsonAndTextForms() {
        let (type, json) = body(504, .json)
        #expect(type == "application/json")
        #expect(json == "{\"error\":{\"status\":504,\"title\":\"Gateway Timeout\",\"message\":\"The site took too long to answer. This usually lasts only moments.\",\"request_id\":\"abc123\"}}\n")
        #expect(body(502, .text).1 == "502 Bad Gateway (request id abc123)\n")
        let (_, quoted) = body(400, .json, reason: "bad \"header\"\n")
        #expect(quoted.contains("\"message\":\"Bad \\\"header\\\"\\n.\""))
    }

    @Test func theOperatorsTemplateReplacesThePageMostSpecificFirst() {
        var settings = ErrorPageSettings()
        settings.templates = ["5xx": "<h1>{{title}}</h1><p>{{message}}</p><i>{{request_id}}</i><b>{{status}}</b>",
                              "502": "<p>down: {{request_id}}</p>"]
        #expect(body(502, .html, settings: settings).1 == "<p>down: abc123</p>")
        let (_, page) = body(504, .html, settings: settings)
        #expect(page == "<h1>504 Gateway Timeout</h1><p>The site took too long to answer. This usually lasts only moments.</p><i>abc123</i><b>504</b>")
        // Not for JSON or text, and not for a class it was not given for.
        #expect(body(502, .json, settings: settings).1.hasPrefix("{"))
        #expect(body(413, .html, settings: settings).1.contains("This request could not be handled"))
        #expect(ErrorPageSettings.isKey("4xx") && ErrorPageSettings.isKey("599") && !ErrorPageSettings.isKey("302")
                && !ErrorPageSettings.isKey("6xx") && !ErrorPageSettings.isKey("default"))
    }

    @Test func htmlEscapesEverythingThatCouldEndAnElementOrAttribute() {
        #expect(HTML.escape("<a href=\"x\">'&'</a>") == "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;")
    }
}
