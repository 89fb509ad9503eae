/// The parameters of one `/_oauth_callback` request, as the native wrapper sends them
/// (contract: seeds/003):
///
///     provider, platform, client_id, redirect_uri, state,
///     and either  code (+ code_verifier when the provider uses PKCE)
///     or          error (+ optional error_description), and then no code.
///
/// Parsing is strict (see `QueryDecoding`) and every refusal is a `CallbackFailure`
/// (`.client`, `invalid_request`) whose `logDetail` names the parameter and the reason, never
/// a value of `code`, `code_verifier` or `state`.
///
/// Decisions where the contract is silent:
/// - **Unknown parameters are refused**, not ignored: the contract is small and owned by us
///   and the wrapper apps, so an unexpected name means either a contract change we must notice
///   (failing loudly in testing beats silently dropping something the sender relies on), or a
///   URL crafted by someone else. The only optional extra accepted is `error_description`
///   (RFC 6749 §4.1.2.1), kept for the operator's log only.
/// - **No `nonce` parameter.** A nonce taken from the URL proves nothing: whoever forges the
///   URL chooses it too. The nonce an id_token must carry comes from the proxy's own session
///   (session mode) or is checked by the app (relay/params); see `CallbackPipeline.handle`.
/// - **A failure callback has the same shape** as a successful one minus `code`: `provider`
///   and `state` are needed to hand the failure to the app's own callback, and the contract
///   shows `…&error=…` on top of the usual parameters. A `code_verifier` on a failure callback
///   is validated and dropped (AppAuth may forward it regardless of the outcome).
/// - **Duplicates are refused** even with equal values: which copy a parser keeps differs
///   between stacks (first, last, joined), a classic source of parameter-pollution bugs.
public struct CallbackParameters: Sendable, Equatable {
    public var provider: String
    public var platform: String
    /// The native client id the app *claims* it used; only ever compared with configuration.
    public var clientID: String
    /// The redirect the app *claims* it used; only ever compared with configuration.
    public var redirectURI: String
    /// Echo of the web app's `state`; the app (or the session layer) verifies it.
    public var state: String
    public var response: Response

    public enum Response: Sendable, Equatable {
        /// An unconsumed authorization code, and the PKCE verifier when one was used.
        case code(String, verifier: String?)
        /// The sign-in failed before a code was issued (`error=`).
        case error(ProviderError)
    }

    /// What the app reported with `error=`.
    public struct ProviderError: Sendable, Equatable {
        /// OAuth error codes passed on to the app's callback as they are. Anything else
        /// (the contract allows a free-form description in `error`) becomes `sign_in_failed`,
        /// so the app never receives text it did not expect.
        public static let forwardedCodes: Set<String> = [
            "access_denied", "temporarily_unavailable", "server_error",
            "interaction_required", "login_required", "consent_required", "account_selection_required",
        ]
        public static let fallbackCode = "sign_in_failed"
        /// Words the wrapper app's library (NativeSignIn) reports for failures of its own. Named
        /// in the log, so the operator tells them apart; the app's callback gets `sign_in_failed`.
        public static let wrapperCodes: [String: String] = [
            "state_mismatch": "the browser's redirect carried another state than the one sent (another sign-in's answer)",
            "invalid_response": "the browser's redirect had neither code nor error, a parameter twice, or another redirect URI",
            "sign_in_failed": "the browser session failed, or the provider's error was not a plain OAuth word",
        ]
        /// Kept for logs only, at most this many characters.
        static let logLimit = 128

        /// An allowlisted OAuth error code, or `sign_in_failed`.
        public var code: String
        /// Whether `error` was an allowlisted code (false: a free-form description).
        public var recognised: Bool
        /// `error_description`, shortened for the log line. Never shown to the user.
        public var detailForLog: String?
        /// A `wrapperCodes` word the app reported (the log names it).
        public var wrapperCode: String?

        public init(reported: String, description: String?) {
            recognised = Self.forwardedCodes.contains(reported)
            code = recognised ? reported : Self.fallbackCode
            wrapperCode = Self.wrapperCodes[reported] == nil ? nil : reported
            detailForLog = description.map { shortened($0, to: Self.logLimit) }
        }

        /// The failed sign-in as a `CallbackFailure`, for the pipeline's "IdP error" step.
        public var failure: CallbackFailure {
            var detail = recognised ? "the app reported a failed sign-in: error=\(code)"
                : wrapperCode.map { "the app reported a failed sign-in: error=\($0) (\(Self.wrapperCodes[$0]!))" }
                ?? "the app reported a failed sign-in with an unrecognised error value"
            if let detailForLog { detail += "; error_description: \(detailForLog)" }
            let message = code == "access_denied" ? "Sign-in was cancelled or not allowed."
                                                  : "Sign-in did not complete. Please try again."
            return CallbackFailure(.client, code: code, userMessage: message, logDetail: detail,
                                   retryable: code == "temporarily_unavailable" || code == "server_error")
        }
    }

    public init(provider: String, platform: String, clientID: String, redirectURI: String, state: String,
                response: Response) {
        self.provider = provider
        self.platform = platform
        self.clientID = clientID
        self.redirectURI = redirectURI
        self.state = state
        self.response = response
    }

    public var code: String? {
        if case .code(let code, _) = response { return code }
        return nil
    }

    public var codeVerifier: String? {
        if case .code(_, let verifier) = response { return verifier }
        return nil
    }

    public var providerError: ProviderError? {
        if case .error(let error) = response { return error }
        return nil
    }
}

// MARK: - Parsing

extension CallbackParameters {
    /// Parses the raw query (the bytes after `?`, still encoded).
    public static func parse(query: String) -> Result<CallbackParameters, CallbackFailure> {
        switch QueryDecoding.decode(query) {
        case .success(let fields): return parse(fields: fields)
        case .failure(let failure): return .failure(decodingFailure(failure))
        }
    }

    public static func parse(query: [UInt8]) -> Result<CallbackParameters, CallbackFailure> {
        switch QueryDecoding.decode(query) {
        case .success(let fields): return parse(fields: fields)
        case .failure(let failure): return .failure(decodingFailure(failure))
        }
    }

    /// One documented parameter and its limits. Lengths count decoded UTF-8 bytes.
    enum Name: Int, CaseIterable, Sendable {
        case provider, platform, clientID, redirectURI, code, state, codeVerifier, error, errorDescription

        var wire: String {
            switch self {
            case .provider: return "provider"
            case .platform: return "platform"
            case .clientID: return "client_id"
            case .redirectURI: return "redirect_uri"
            case .code: return "code"
            case .state: return "state"
            case .codeVerifier: return "code_verifier"
            case .error: return "error"
            case .errorDescription: return "error_description"
            }
        }

        init?(wire: String) {
            guard let name = Name.allCases.first(where: { $0.wire.utf8.elementsEqual(wire.utf8) }) else { return nil }
            self = name
        }

        /// Provider and platform select configuration, so they are short tokens. Codes are
        /// opaque but bounded (Google's are ~100 bytes, Facebook's a few hundred); a verifier is
        /// exactly RFC 7636's 43–128 characters. The bounds keep a hostile URL from making us
        /// carry megabytes into a store key, a token request or a log line.
        var lengths: ClosedRange<Int> {
            switch self {
            case .provider: return 1...64
            case .platform: return 1...32
            case .clientID, .redirectURI: return 1...512
            case .code: return 1...2048
            case .state: return 1...1024
            case .codeVerifier: return 43...128
            case .error: return 1...1024
            case .errorDescription: return 0...1024
            }
        }

        var charset: Charset {
            switch self {
            case .provider, .platform: return .token
            // RFC 6749 Appendix A.4/A.5: code and state are 1*VSCHAR (%x20-7E).
            case .code, .state: return .visibleASCII
            // RFC 7636 §4.1: [A-Z] / [a-z] / [0-9] / "-" / "." / "_" / "~".
            case .codeVerifier: return .unreserved
            // Compared byte for byte with configuration, or free text for the log.
            case .clientID, .redirectURI, .error, .errorDescription: return .text
            }
        }
    }

    enum Charset: Sendable {
        /// `[A-Za-z0-9._-]`
        case token
        /// `%x20-7E`
        case visibleASCII
        /// RFC 3986 unreserved: `[A-Za-z0-9._~-]`
        case unreserved
        /// Any UTF-8 without control characters (already ensured by decoding).
        case text

        func admits(_ value: String) -> Bool {
            switch self {
            case .text:
                return true
            case .visibleASCII:
                return value.utf8.allSatisfy { (0x20...0x7E).contains($0) }
            case .token:
                return value.utf8.allSatisfy { isAlphanumeric($0) || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: "-") }
            case .unreserved:
                return value.utf8.allSatisfy {
                    isAlphanumeric($0) || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "_")
                        || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "~")
                }
            }
        }

        private func isAlphanumeric(_ b: UInt8) -> Bool {
            (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(b) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(b)
                || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(b)
        }
    }

    static func parse(fields: [QueryDecoding.Field]) -> Result<CallbackParameters, CallbackFailure> {
        var values = [String?](repeating: nil, count: Name.allCases.count)
        for field in fields {
            guard let name = Name(wire: field.name) else {
                return .failure(invalid("unknown parameter \(loggableUnknownName(field.name))"))
            }
            guard values[name.rawValue] == nil else {
                return .failure(invalid("duplicated parameter `\(name.wire)`"))
            }
            let length = field.value.utf8.count
            if length > name.lengths.upperBound {
                return .failure(invalid("`\(name.wire)` exceeds \(name.lengths.upperBound) bytes"))
            }
            if length < name.lengths.lowerBound {
                return .failure(invalid(name.lengths.lowerBound == 1
                    ? "`\(name.wire)` is empty"
                    : "`\(name.wire)` is shorter than \(name.lengths.lowerBound) characters"))
            }
            guard name.charset.admits(field.value) else {
                return .failure(invalid("`\(name.wire)` contains characters outside its allowed set"))
            }
            values[name.rawValue] = field.value
        }

        func value(_ name: Name) -> String? { values[name.rawValue] }

        let response: Response
        if let error = value(.error) {
            guard value(.code) == nil else { return .failure(invalid("`error` and `code` are both present")) }
            response = .error(ProviderError(reported: error, description: value(.errorDescription)))
        } else if let code = value(.code) {
            guard value(.errorDescription) == nil else {
                return .failure(invalid("`error_description` without `error`"))
            }
            response = .code(code, verifier: value(.codeVerifier))
        } else {
            return .failure(invalid("neither `code` nor `error` is present"))
        }

        for required in [Name.provider, .platform, .clientID, .redirectURI, .state] where value(required) == nil {
            return .failure(invalid("`\(required.wire)` is missing"))
        }
        return .success(CallbackParameters(provider: value(.provider)!, platform: value(.platform)!,
                                           clientID: value(.clientID)!, redirectURI: value(.redirectURI)!,
                                           state: value(.state)!, response: response))
    }

    static func decodingFailure(_ failure: QueryDecoding.Failure) -> CallbackFailure {
        let place: String
        if let name = failure.name {
            place = Name(wire: name).map { " in the value of `\($0.wire)`" } ?? " in the value of an unknown parameter"
        } else {
            place = failure.problem == .tooLong ? "" : " in a parameter name"
        }
        return invalid("\(failure.problem.reason)\(place)")
    }

    /// An unknown name is logged only when it looks like a parameter name: a long or odd one
    /// might be a code or token pasted in the wrong place.
    static func loggableUnknownName(_ name: String) -> String {
        let looksLikeName = name.utf8.count <= 32 && Charset.token.admits(name)
        return looksLikeName ? "`\(name)`" : "(name not shown: \(name.utf8.count) bytes)"
    }

    static func invalid(_ detail: String) -> CallbackFailure {
        CallbackFailure(.client, code: "invalid_request",
                        userMessage: "This sign-in link is not valid. Please start signing in again.",
                        logDetail: "callback query refused: \(detail)")
    }
}

// MARK: - Never print secrets

/// The code, verifier and state are single-use credentials or session-binding values: a
/// parameters value that lands in a log line, an assertion message or a debugger dump must
/// not carry them.
extension CallbackParameters: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public var description: String {
        let kind: String
        switch response {
        case .code(_, let verifier): kind = verifier == nil ? "code: <redacted>" : "code: <redacted>, code_verifier: <redacted>"
        case .error(let error): kind = "error: \(error.code)"
        }
        return "CallbackParameters(provider: \(provider), platform: \(platform), client_id: \(clientID), "
            + "redirect_uri: \(redirectURI), state: <redacted>, \(kind))"
    }

    public var debugDescription: String { description }

    public var customMirror: Mirror {
        Mirror(self, children: ["provider": provider, "platform": platform, "clientID": clientID,
                                "redirectURI": redirectURI, "state": "<redacted>",
                                "response": providerError.map { "error: \($0.code)" } ?? "code: <redacted>"])
    }
}

/// The first `limit` characters of `text`, with an ellipsis when shortened.
func shortened(_ text: String, to limit: Int) -> String {
    guard text.count > limit else { return text }
    return String(text.prefix(limit)) + "…"
}
