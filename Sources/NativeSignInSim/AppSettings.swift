import Foundation
import NativeSignIn

/// `configure`'s fields: the app's plists, read by `NativeSignInConfiguration.load` as the app
/// reads its bundle, and the providers that have no plist keys (its `extraProviders`).
struct AppSettings {
    let platform: Platform
    let callbackPath: String
    let configuration: NativeSignInConfiguration
    /// The flow's settings; without `initial_url` there is no flow (decide/callback only).
    let initialURL: URL?
    let strategy: SignInStrategy
    let ephemeral: Bool
    let httpsCallbacks: Bool

    init(_ request: JSONLine) throws {
        try request.only(["op", "platform", "info_plist", "google_service_info",
                          "google_authorization_endpoint", "providers", "callback_path",
                          "initial_url", "strategy", "ephemeral", "https_callbacks", "link_paths"])
        let name = try request.string("platform")
        guard let platform = Platform(rawValue: name) else { throw SimError("platform is ios or android, not \"\(name)\"") }
        self.platform = platform
        callbackPath = try request.optionalString("callback_path") ?? "/_oauth_callback"
        let extra = try request.objects("providers").map(Self.oidcProvider)
        var configuration = try NativeSignInConfiguration.load(
            infoPlist: URL(fileURLWithPath: request.string("info_plist")),
            googleServiceInfo: request.optionalString("google_service_info").map { URL(fileURLWithPath: $0) },
            extraProviders: extra)
        if let endpoint = try request.optionalURL("google_authorization_endpoint") {
            configuration.providers = try configuration.providers.map { try Self.moving($0, to: endpoint) }
        }
        self.configuration = configuration
        initialURL = try request.optionalURL("initial_url")
        ephemeral = try request.optionalBool("ephemeral") ?? false
        httpsCallbacks = try request.optionalBool("https_callbacks") ?? true
        let linkPaths = try request.strings("link_paths")
        switch try request.optionalString("strategy") ?? "native" {
        case "native":
            guard linkPaths.isEmpty else { throw SimError("link_paths is for the hand_back strategy") }
            strategy = .native
        case "hand_back":
            strategy = .handBack(linkPaths: Set(linkPaths))
        case let other:
            throw SimError("strategy is native or hand_back, not \"\(other)\"")
        }
    }

    private static func oidcProvider(_ fields: JSONLine) throws -> Provider {
        try fields.only(["name", "authorization_endpoint", "client_id", "redirect_uri", "pkce"])
        return try Provider.oidc(name: fields.string("name"), authorizationEndpoint: fields.url("authorization_endpoint"),
                                 clientID: fields.string("client_id"), redirectURI: fields.string("redirect_uri"),
                                 usesPKCE: fields.bool("pkce"))
    }

    /// A local IdP stands in for accounts.google.com: the Google provider read from
    /// GoogleService-Info.plist keeps its name, client, derived redirect and PKCE, and is
    /// recognised at `endpoint` instead. Other providers are left as they are.
    private static func moving(_ provider: Provider, to endpoint: URL) throws -> Provider {
        guard provider.endpoint == .google else { return provider }
        return try Provider(name: provider.name, endpoint: AuthorizationEndpoint(endpoint), clientID: provider.clientID,
                            redirectURI: provider.redirectURI, usesPKCE: provider.usesPKCE)
    }
}
