/// Why a callback did not produce a verified identity. What the user sees (`userMessage`)
/// is kept apart from what the operator logs (`logDetail`); neither ever holds a code,
/// verifier, token or secret.
public struct CallbackFailure: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Source: String, Sendable {
        /// The request itself is wrong (bad parameters, unknown client, replay, error= from the app).
        case client
        /// The identity provider refused, failed, or returned something that did not verify.
        case idp
        /// Our side (store unreachable, an internal error).
        case `internal`
        /// A setting is wrong (the IdP's CA, its issuer): permanent until the operator acts, who
        /// is told which setting (`setting`) at error level, not a transient IdP outage.
        case config
        /// The user signed in and is who they say, but the operator's access rules keep them out
        /// (session mode): 403, never a sign-in loop.
        case policy
    }

    public var source: Source
    /// A short machine-readable reason, e.g. `invalid_request`, `unknown_client`, `replayed_code`,
    /// `access_denied`, `exchange_failed`, `invalid_id_token`, `idp_unavailable`, `store_unavailable`.
    /// In relay/params mode it is what the app's callback receives as `error=`.
    public var code: String
    /// What the person in front of the WebView is told.
    public var userMessage: String
    /// What the operator's log line says.
    public var logDetail: String
    /// Whether trying again later may help (IdP or store outage).
    public var retryable: Bool
    /// `config` failures: the key path of the setting to fix (`oauth.ca_file`).
    public var setting: String?

    public init(_ source: Source, code: String, userMessage: String, logDetail: String, retryable: Bool = false,
                setting: String? = nil) {
        self.source = source
        self.code = code
        self.userMessage = userMessage
        self.logDetail = logDetail
        self.retryable = retryable
        self.setting = setting
    }

    /// The HTTP status of the proxy's own error page: 400 for the client's mistakes, 502 when
    /// the IdP failed us or could not be used as configured, 503 when something of ours is
    /// unavailable.
    public var status: Int {
        switch source {
        case .client: return 400
        case .policy: return 403
        case .idp, .config: return 502
        case .internal: return retryable ? 503 : 500
        }
    }

    public var description: String { "\(source.rawValue)/\(code): \(logDetail)" }
}
