/// Where a provider's token endpoint comes from, as configuration alone can tell: a URL, or the
/// discovery document an `oidc` provider reads it from. The relay token endpoint passes an
/// ordinary (non-relay) code to the token endpoint of the provider whose app client sent it, so
/// two providers that share an app client id must agree on this value, or that choice would be
/// a guess (`ConfigLoader` refuses such a configuration).
extension ProviderSettings {
    public var tokenEndpointSource: String {
        switch kind {
        case .google: return endpoints.token ?? GoogleProvider.defaultTokenEndpoint
        case .apple: return endpoints.token ?? AppleProvider.defaultTokenEndpoint
        case .facebook:
            return ProviderSupport.trimmingTrailingSlashes(endpoints.graph ?? FacebookProvider.defaultGraph) + "/oauth/access_token"
        case .oidc:
            if let token = endpoints.token { return token }
            return "discovered from " + (OIDCProvider.discoveryURL(self) ?? "(no issuer)")
        }
    }
}

extension OAuthSettings {
    /// The providers whose app client is `clientID`, in name order (dictionary order differs
    /// per process: a choice made from it would differ between restarts).
    public func providersSharing(appClientID clientID: String) -> [ProviderSettings] {
        providers.values.filter { $0.appClient?.clientID == clientID }.sorted { $0.name < $1.name }
    }
}
