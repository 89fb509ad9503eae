import ProxyCore

/// The pages the proxy itself answers on the callback path. Small, self-contained HTML; never
/// a code, verifier, state or token. Every one is uncacheable and sends no Referer onwards
/// (the URL that led here carried a code).
enum CallbackPage {
    static let securityHeaders: [(name: String, value: String)] = [
        ("Cache-Control", "no-store"),
        ("Pragma", "no-cache"),
        ("Referrer-Policy", "no-referrer"),
        ("X-Content-Type-Options", "nosniff"),
        ("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'"),
    ]

    /// `handoff: verify`: the sign-in was verified and the site is not told; the page says so
    /// honestly and shows nothing that identifies the tokens.
    static func verified(_ identity: VerifiedIdentity) -> Response {
        page(status: 200, title: "Signed in",
             body: "Your \(escape(identity.provider)) sign-in was verified. The site has not been told: this provider is set to verify only.")
    }

    static func error(status: Int, message: String, title: String = "Sign-in failed",
                      extraHeaders: [(name: String, value: String)] = []) -> Response {
        page(status: status, title: escape(title), body: escape(message), extraHeaders: extraHeaders)
    }

    private static func page(status: Int, title: String, body: String,
                             extraHeaders: [(name: String, value: String)] = []) -> Response {
        let html = """
        <!doctype html><html><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">\
        <title>\(title)</title><style>body{font-family:system-ui,sans-serif;margin:3em auto;max-width:32em;padding:0 1em}</style>\
        </head><body><h1>\(title)</h1><p>\(body)</p></body></html>

        """
        return Response(status: status, headers: [("Content-Type", "text/html; charset=utf-8")] + securityHeaders + extraHeaders,
                        body: Array(html.utf8))
    }

    static func escape(_ s: String) -> String {
        var out = ""
        for c in s.unicodeScalars {
            switch c {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default: out.unicodeScalars.append(c)
            }
        }
        return out
    }
}
