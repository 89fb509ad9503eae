/// The proxy's own error answers (a 502 for an upstream that cannot be reached, a 504, a 413, a
/// 400 for a malformed request…) in the form the client can use:
///
/// - **HTML** for a client that asks for it (every browser and WebView navigating): a small page
///   that says what happened in words, with the request id to quote. For 502, 503 and 504 it
///   tries again by itself after `retrySeconds` (a GET or HEAD only: reloading cannot repeat a
///   form) and has a link to try at once — inside a WebView there is no address bar or reload
///   button, and a dead end there is a dead app. The operator may replace it (`ErrorPageSettings`).
/// - **JSON** for a client that asks for that rather than HTML (`Accept: application/json`):
///   `{"error": {"status", "title", "message", "request_id"}}`.
/// - **Text** otherwise (`*/*`, no Accept: curl, scripts, health checkers), as before.
///
/// 5xx answers never carry the inside reason (upstream addresses, errno texts): that goes to the
/// log under the same request id. 502, 503 and 504 carry `Retry-After`.
enum ErrorPage {
    enum Form: Equatable {
        case html, json, text
    }

    static let retrySeconds = 5

    /// The form for a request whose Accept value is `accept` (nil: none sent). Only types the
    /// client names count: `*/*` alone is text.
    static func form(accept: UnsafeRawBufferPointer?) -> Form {
        guard let accept else { return .text }
        var html = 0, json = 0
        WeightedList.forEach(accept) { type, q in
            if WeightedList.equalsLowercase(type, "text/html") || WeightedList.equalsLowercase(type, "application/xhtml+xml") {
                html = max(html, q)
            } else if WeightedList.equalsLowercase(type, "application/json")
                        || WeightedList.equalsLowercase(type, "application/problem+json") {
                json = max(json, q)
            }
        }
        if html > 0 && html >= json { return .html }
        if json > 0 { return .json }
        return .text
    }

    /// Whether the answer tells the client to try again by itself.
    static func retries(_ status: Int) -> Bool { status == 502 || status == 503 || status == 504 }

    /// The answer's Content-Type and body. `reason` is shown for a 4xx only.
    static func body(status: Int, reason: String, requestID: String, form: Form, method: HTTPMethod,
                     settings: ErrorPageSettings) -> (contentType: String, body: String) {
        let title = "\(status) \(HTTPStatus.reason(status))"
        let message = status >= 500 ? Self.message(status) : reason.prefix(1).uppercased() + reason.dropFirst() + "."
        switch form {
        case .text:
            let text = status >= 500 ? "\(title) (request id \(requestID))\n" : "\(title): \(reason)\n"
            return ("text/plain; charset=utf-8", text)
        case .json:
            let json = "{\"error\":{\"status\":\(status),\"title\":\(JSON.quote(HTTPStatus.reason(status))),"
                + "\"message\":\(JSON.quote(message)),\"request_id\":\(JSON.quote(requestID))}}\n"
            return ("application/json", json)
        case .html:
            let refresh = retries(status) && (method == .get || method == .head)
            if let template = settings.template(for: status) {
                return ("text/html; charset=utf-8", fill(template, status: status, title: title, message: message, requestID: requestID))
            }
            return ("text/html; charset=utf-8", page(status: status, title: title, message: message, requestID: requestID,
                                                     refresh: refresh))
        }
    }

    private static func message(_ status: Int) -> String {
        switch status {
        case 502: return "The site could not be reached just now. This usually lasts only moments."
        case 503: return "The site is busy or being updated. This usually lasts only moments."
        case 504: return "The site took too long to answer. This usually lasts only moments."
        default: return "Something went wrong on the way to the site."
        }
    }

    private static func page(status: Int, title: String, message: String, requestID: String, refresh: Bool) -> String {
        let retry = retries(status)
        return """
        <!doctype html><html><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">\
        \(refresh ? "<meta http-equiv=\"refresh\" content=\"\(retrySeconds)\">" : "")\
        <title>\(HTML.escape(title))</title><style>body{font-family:system-ui,sans-serif;margin:3em auto;max-width:32em;\
        padding:0 1em;line-height:1.5}a.retry{display:inline-block;margin:.5em 0;padding:.6em 1.2em;border:1px solid #888;\
        border-radius:.4em;text-decoration:none;color:inherit}.id{color:#777;font-size:.85em}</style></head><body>\
        <h1>\(retry ? "Temporarily unavailable" : "This request could not be handled")</h1><p>\(HTML.escape(message))</p>\
        \(refresh ? "<p>This page tries again by itself in a few seconds.</p>" : "")\
        \(retry ? "<p><a class=\"retry\" href=\"\">Try again</a></p>" : "")\
        <p class="id">\(HTML.escape(title)) · request id \(HTML.escape(requestID))</p></body></html>

        """
    }

    private static func fill(_ template: String, status: Int, title: String, message: String, requestID: String) -> String {
        template.replacing("{{status}}", with: String(status))
            .replacing("{{title}}", with: HTML.escape(title))
            .replacing("{{message}}", with: HTML.escape(message))
            .replacing("{{request_id}}", with: HTML.escape(requestID))
    }
}
