/// The native client a callback is allowed to use, taken from configuration.
public struct PinnedClient: Sendable {
    public var provider: ProviderSettings
    public var platform: String
    /// The configured client: the exchange uses this, never the URL's claim. Its
    /// `redirectURI` is the resolved one (see `ClientPinning.expectedRedirect`).
    public var client: NativeClient
    /// Whether the exchange must carry a PKCE `code_verifier`.
    public var requiresPKCE: Bool
}

/// Maps (provider, platform) to the configured native client and checks that the callback's
/// `client_id` and `redirect_uri` are exactly that client's (DESIGN §5: never trust what the
/// URL claims). Runs before the store or any identity provider is touched, so a URL made up
/// for some other client costs us nothing and teaches the sender nothing about our codes.
///
/// Comparison is byte for byte on UTF-8, with no normalisation of any kind (case, trailing
/// slash, percent-encoding, Unicode): the IdP binds the code to the exact `redirect_uri` and
/// `client_id` it saw, and Swift's `String ==` would treat canonically equivalent but
/// different byte sequences as equal.
public struct ClientPinning: Sendable {
    public let settings: OAuthSettings

    public init(settings: OAuthSettings) {
        self.settings = settings
    }

    /// The configured provider of that name, or `unknown_client`.
    public func provider(named name: String) -> Result<ProviderSettings, CallbackFailure> {
        guard let provider = settings.providers[name] else {
            // The name passed the parser's token check, so it is safe to log.
            return .failure(unknownClient("no provider named `\(name)` is configured"))
        }
        return .success(provider)
    }

    public func pin(_ parameters: CallbackParameters) -> Result<PinnedClient, CallbackFailure> {
        let provider: ProviderSettings
        switch self.provider(named: parameters.provider) {
        case .success(let found): provider = found
        case .failure(let failure): return .failure(failure)
        }
        guard var client = provider.native[parameters.platform] else {
            return .failure(unknownClient(
                "provider `\(provider.name)` has no native client for platform `\(parameters.platform)`"))
        }
        guard Self.exactlyEqual(parameters.clientID, client.clientID) else {
            return .failure(mismatch("client_id", claimed: parameters.clientID, provider: provider.name,
                                     platform: parameters.platform))
        }
        let redirect = Self.expectedRedirect(kind: provider.kind, platform: parameters.platform, client: client)
        guard Self.exactlyEqual(parameters.redirectURI, redirect) else {
            return .failure(mismatch("redirect_uri", claimed: parameters.redirectURI, provider: provider.name,
                                     platform: parameters.platform))
        }
        let requiresPKCE = Self.requiresPKCE(kind: provider.kind, client: client)
        if requiresPKCE, case .code(_, verifier: nil) = parameters.response {
            // Refused here rather than left to the IdP: a public client's code without its
            // verifier cannot be redeemed, and sending it anyway would burn the code (and our
            // replay entry) for nothing.
            return .failure(CallbackFailure(
                .client, code: "invalid_request",
                userMessage: "This sign-in link is not valid. Please start signing in again.",
                logDetail: "`code_verifier` is missing but \(provider.name)/\(parameters.platform) is a public client (PKCE required)"))
        }
        client.redirectURI = redirect
        return .success(PinnedClient(provider: provider, platform: parameters.platform, client: client,
                                     requiresPKCE: requiresPKCE))
    }

    /// A public native client cannot authenticate itself, so PKCE is the only thing binding the
    /// code to the app that started the flow: Google native clients are always public; an
    /// OIDC native client is public unless a secret is configured for it. Facebook (app secret)
    /// and Apple (signed client secret) are confidential, so a verifier is optional there and
    /// passed on when present.
    public static func requiresPKCE(kind: ProviderKind, client: NativeClient) -> Bool {
        switch kind {
        case .google: return true
        case .oidc: return client.clientSecret == nil
        case .facebook, .apple: return false
        }
    }

    /// The configured redirect; for a Google iOS client configured without one, the redirect
    /// Google derives from the reversed client id (`NativeClient.googleIOSRedirect`).
    public static func expectedRedirect(kind: ProviderKind, platform: String, client: NativeClient) -> String {
        if client.redirectURI.isEmpty, kind == .google, platform == "ios",
           let derived = NativeClient.googleIOSRedirect(for: client.clientID) {
            return derived
        }
        return client.redirectURI
    }

    static func exactlyEqual(_ a: String, _ b: String) -> Bool {
        !a.isEmpty && a.utf8.elementsEqual(b.utf8)
    }

    private func unknownClient(_ detail: String) -> CallbackFailure {
        CallbackFailure(.client, code: "unknown_client",
                        userMessage: "This app is not set up to sign in here.",
                        logDetail: "callback refused: \(detail)")
    }

    /// Client ids and redirects are not secrets, and showing the claimed one (shortened, and
    /// free of control characters after decoding) is what lets an operator spot a typo in
    /// the configuration.
    private func mismatch(_ what: String, claimed: String, provider: String, platform: String) -> CallbackFailure {
        CallbackFailure(.client, code: "client_mismatch",
                        userMessage: "This app is not set up to sign in here.",
                        logDetail: "callback refused: \(what) \"\(shortened(claimed, to: 128))\" is not the one configured for \(provider)/\(platform)")
    }
}
