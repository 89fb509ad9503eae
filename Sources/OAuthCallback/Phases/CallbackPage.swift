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

    /// Session mode's provider chooser (`/_oauth/start` without `provider=` and more than one
    /// provider): one link per provider, in configuration order, each starting that sign-in.
    /// `choices` are (label, href), not yet escaped.
    static func chooser(_ choices: [(label: String, href: String)]) -> Response {
        let links = choices.map { "<a class=\"p\" href=\"\(escape($0.href))\">\(escape($0.label))</a>" }.joined()
        return page(status: 200, title: "Sign in", body: "Choose how to sign in:</p><p>" + links,
                    style: "a.p{display:block;margin:.6em 0;padding:.7em 1em;border:1px solid #888;border-radius:.4em;text-decoration:none;color:inherit}")
    }

    private static func page(status: Int, title: String, body: String, style: String = "",
                             extraHeaders: [(name: String, value: String)] = []) -> Response {
        let html = """
        <!doctype html><html><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">\
        <title>\(title)</title><style>body{font-family:system-ui,sans-serif;margin:3em auto;max-width:32em;padding:0 1em}\(style)</style>\
        </head><body><h1>\(title)</h1><p>\(body)</p></body></html>

        """
        return Response(status: status, headers: [("Content-Type", "text/html; charset=utf-8")] + securityHeaders + extraHeaders,
                        body: Array(html.utf8))
    }

    static func escape(_ s: String) -> String { HTML.escape(s) }
}
