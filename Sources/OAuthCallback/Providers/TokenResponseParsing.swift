/// Reads a token endpoint's answer (RFC 6749 §5.1 / §5.2) strictly, and turns everything that
/// is not a usable token response into a `CallbackFailure` whose `logDetail` says what happened
/// — status, the provider's error *code* — without ever holding the body, a token or a secret.
///
/// `context` names the call in log details, e.g. `google token endpoint`; callers pass only
/// configuration-derived names and URL *paths*, never a URL with a query.
public enum TokenResponseParsing {
    /// Token responses are a few KiB (an id_token is the bulk of it); anything past this is
    /// not a token response.
    public static let maximumBodySize = 64 * 1024

    /// A fetch outcome at a token endpoint: the transport error, or the response parsed.
    public static func parse(_ result: Result<OutboundResponse, OutboundError>, context: String,
                             hiding secrets: [String] = []) -> Result<TokenResponse, CallbackFailure> {
        switch result {
        case .failure(let error): return .failure(transportFailure(error, context: context, hiding: secrets))
        case .success(let response): return parse(response, context: context)
        }
    }

    public static func parse(_ response: OutboundResponse, context: String) -> Result<TokenResponse, CallbackFailure> {
        let object: [String: JSONValue]
        switch jsonObject(response, context: context) {
        case .failure(let failure): return .failure(failure)
        case .success(let o): object = o
        }
        return tokenResponse(object, raw: response.body, status: response.status, context: context)
    }

    /// The members of a 2xx JSON answer, or the failure for anything else (transport-level
    /// status, size, syntax, or an OAuth / Graph error body). Shared by every JSON call a
    /// provider makes (token, Graph, discovery).
    public static func jsonObject(_ response: OutboundResponse, context: String) -> Result<[String: JSONValue], CallbackFailure> {
        let status = response.status
        let parsed: JSONValue? = response.body.count <= maximumBodySize ? try? JSONParser.parse(response.body) : nil
        let summary = parsed.flatMap(errorSummary)
        let because = summary.map { " \($0)" } ?? ""

        // 5xx and 429: the IdP is failing or shedding load — the user may try again.
        if status >= 500 || status == 429 {
            return .failure(CallbackFailure(.idp, code: "idp_unavailable", userMessage: ProviderText.unavailable,
                                            logDetail: "\(context): HTTP \(status)\(because)", retryable: true))
        }
        guard (200...299).contains(status) else {
            let what = summary == nil ? " with no OAuth error in the body" : because
            return .failure(exchangeFailed("\(context): HTTP \(status)\(what)"))
        }
        guard response.body.count <= maximumBodySize else {
            return .failure(exchangeFailed("\(context): HTTP \(status) body exceeds \(maximumBodySize) bytes"))
        }
        guard case .object(let object)? = parsed else {
            return .failure(exchangeFailed("\(context): HTTP \(status) body is not a JSON object"))
        }
        // Some servers answer 200 with an error body; it is still an error.
        if object["error"] != nil {
            return .failure(exchangeFailed("\(context): HTTP \(status)\(summary.map { " \($0)" } ?? " error")"))
        }
        return .success(object)
    }

    /// RFC 6749 §5.1 members, type-checked. JSON `null` counts as absent for optional members.
    static func tokenResponse(_ object: [String: JSONValue], raw: [UInt8], status: Int,
                              context: String) -> Result<TokenResponse, CallbackFailure> {
        func wrongType(_ member: String) -> Result<TokenResponse, CallbackFailure> {
            .failure(exchangeFailed("\(context): HTTP \(status) token response \(member) is missing or has the wrong type"))
        }
        func optionalString(_ name: String) -> String?? {
            switch object[name] {
            case nil, .null?: return .some(nil)
            case .string(let s)?: return .some(s)
            default: return nil
            }
        }
        guard let accessToken = object["access_token"]?.stringValue, !accessToken.isEmpty else {
            return wrongType("access_token")
        }
        guard let tokenType = optionalString("token_type") else { return wrongType("token_type") }
        guard let idToken = optionalString("id_token") else { return wrongType("id_token") }
        guard let refreshToken = optionalString("refresh_token") else { return wrongType("refresh_token") }
        guard let scope = optionalString("scope") else { return wrongType("scope") }
        var expiresIn: Int64? = nil
        switch object["expires_in"] {
        case nil, .null?: break
        case .number(let text)?:
            // Whole seconds only: a fraction or exponent is not what RFC 6749 §5.1 describes.
            guard let value = Int64(text) else { return wrongType("expires_in") }
            expiresIn = value
        case .string(let text)?:
            // Some servers (older Azure AD, some Facebook versions) send it as a string.
            guard !text.isEmpty, text.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }),
                  let value = Int64(text) else { return wrongType("expires_in") }
            expiresIn = value
        default: return wrongType("expires_in")
        }
        if let expiresIn, expiresIn < 0 { return wrongType("expires_in") }
        if let idToken, idToken.isEmpty { return wrongType("id_token") }
        return .success(TokenResponse(accessToken: accessToken, tokenType: tokenType ?? "Bearer", idToken: idToken,
                                      refreshToken: refreshToken, expiresIn: expiresIn, scope: scope, raw: raw))
    }

    /// The provider's error from an error body, safe to log: RFC 6749 `error` strings
    /// (`error=invalid_grant`) and Graph API error objects
    /// (`error=OAuthException code=100 subcode=36007`), then the `error_description`, which is
    /// what tells the operator which setting to fix ("client authentication failed: use
    /// client_secret_basic"). It is free text an IdP may fill with anything, including what we
    /// sent it, so it passes `describable`: token-like words are cut out, and it is shortened.
    static func errorSummary(_ value: JSONValue) -> String? {
        switch value["error"] {
        case .string(let code)?:
            var out = "error=\(loggable(code))"
            if let text = value["error_description"]?.stringValue, let d = describable(text) {
                out += " error_description=\"\(d)\""
            }
            return out
        case .object(let graph)?:
            var parts = ["error=\(graph["type"]?.stringValue.map(loggable) ?? "unknown")"]
            if case .number(let code)? = graph["code"], Int64(code) != nil { parts.append("code=\(code)") }
            if case .number(let sub)? = graph["error_subcode"], Int64(sub) != nil { parts.append("subcode=\(sub)") }
            return parts.joined(separator: " ")
        default:
            return nil
        }
    }

    /// A description as it may appear in a log line: printable ASCII only (`"` and `\` become
    /// `'` and `/`, anything else `?`), every word of 16 characters or more that holds a digit —
    /// the shape of codes, tokens and secrets, never of English — replaced by `<redacted>`, and
    /// at most 200 characters. nil when nothing is left.
    static func describable(_ text: String) -> String? {
        let words = text.split(separator: " ", omittingEmptySubsequences: false).map { word -> String in
            word.utf8.count >= 16 && word.contains(where: \.isNumber) ? "<redacted>" : String(word)
        }
        var out = ""
        for scalar in words.joined(separator: " ").unicodeScalars {
            if out.utf8.count >= 200 { out += "…"; break }
            switch scalar.value {
            case 0x22: out += "'"
            case 0x5C: out += "/"
            case 0x20...0x7E: out.unicodeScalars.append(scalar)
            default: out += "?"
            }
        }
        return out.isEmpty ? nil : out
    }

    /// An error code as it may appear in a log line: RFC 6749 codes are short ASCII words;
    /// anything else is replaced rather than echoed.
    static func loggable(_ code: String) -> String {
        let ok = !code.isEmpty && code.utf8.count <= 64 && code.utf8.allSatisfy { b in
            (b >= UInt8(ascii: "a") && b <= UInt8(ascii: "z")) || (b >= UInt8(ascii: "A") && b <= UInt8(ascii: "Z"))
                || (b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9")) || b == UInt8(ascii: "_")
                || b == UInt8(ascii: "-") || b == UInt8(ascii: ".")
        }
        return ok ? code : "<unprintable>"
    }

    /// A fetcher error: the IdP could not be reached or did not answer in time. Retryable —
    /// except our own internal failures, which are not the IdP's.
    ///
    /// `secrets` are values that must not reach a log line even if a fetcher put them in its
    /// detail (app secrets, tokens sent in a query); the detail is also cut at any `?`.
    public static func transportFailure(_ error: OutboundError, context: String,
                                        hiding secrets: [String] = []) -> CallbackFailure {
        let detail = ProviderText.redact(ProviderText.withoutQuery(error.detail), hiding: secrets)
        if error.kind == .internalError {
            return CallbackFailure(.internal, code: "internal_error", userMessage: ProviderText.unavailable,
                                   logDetail: "\(context): \(error.kind.rawValue): \(detail)")
        }
        if error.kind == .certificate {
            // A certificate the configured trust does not accept stays refused until someone
            // changes the trust (or the IdP its certificate): a setting, not an outage.
            return CallbackFailure(.config, code: "idp_unavailable", userMessage: ProviderText.unavailable,
                                   logDetail: "\(context): \(error.kind.rawValue): \(detail) (the IdP's certificate is "
                                       + "verified against oauth.ca_file, or the system store without it)",
                                   setting: "oauth.ca_file")
        }
        return CallbackFailure(.idp, code: "idp_unavailable", userMessage: ProviderText.unavailable,
                               logDetail: "\(context): \(error.kind.rawValue): \(detail)", retryable: true)
    }

    static func exchangeFailed(_ detail: String) -> CallbackFailure {
        CallbackFailure(.idp, code: "exchange_failed", userMessage: ProviderText.exchangeFailed, logDetail: detail)
    }
}

/// What users are told, and log-hygiene helpers shared by the providers.
enum ProviderText {
    static let exchangeFailed = "Sign-in could not be completed. Please try signing in again."
    static let notVerified = "Your sign-in could not be verified. Please try signing in again."
    static let unavailable = "The sign-in service is not available right now. Please try again in a moment."
    static let misconfigured = "Sign-in is not available right now."

    /// `url` without its query and fragment: what a log line may show of a request.
    static func withoutQuery(_ url: String) -> String {
        guard let cut = url.firstIndex(where: { $0 == "?" || $0 == "#" }) else { return url }
        return String(url[..<cut])
    }

    /// `text` with every non-empty `secret` replaced.
    static func redact(_ text: String, hiding secrets: [String]) -> String {
        var out = text
        for secret in secrets where !secret.isEmpty {
            out = out.replacingAll(secret, with: "<redacted>")
        }
        return out
    }
}

private extension String {
    /// Replaces every occurrence of `target` (no Foundation on purpose: this module avoids it).
    func replacingAll(_ target: String, with replacement: String) -> String {
        let t = Array(target.utf8)
        let s = Array(utf8)
        guard !t.isEmpty, s.count >= t.count else { return self }
        var out: [UInt8] = []
        var i = 0
        while i < s.count {
            if i + t.count <= s.count, s[i..<(i + t.count)].elementsEqual(t) {
                out.append(contentsOf: replacement.utf8)
                i += t.count
            } else {
                out.append(s[i])
                i += 1
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}
