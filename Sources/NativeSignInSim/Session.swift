import Foundation
import NativeSignIn

/// One wrapper app: its interceptor once configured, and the sign-ins under way by id. Every
/// decision is the library's; this only translates JSON to its calls and back.
///
///     {"op":"configure","platform":"ios"|"android","info_plist":PATH,
///      "google_service_info":PATH?,"google_authorization_endpoint":URL?,
///      "providers":[{"name","authorization_endpoint","client_id","redirect_uri","pkce"}]?,
///      "callback_path":"/_oauth_callback"?}
///       → {"enabled":true|false,"providers":[{"name","client_id","redirect_uri","callback_scheme","pkce"}]}
///     {"op":"decide","url":URL,"target":"mainFrame"|"popup"|"subframe"}
///       → {"decision":"allow"}
///       | {"decision":"start","id","url","provider","platform","client_id","redirect_uri",
///          "callback_scheme","state","code_verifier"|null}
///       | {"decision":"refuse","error","key"|null}
///     {"op":"callback","id","initial_url":URL,"result":{"redirect":URL}|"cancelled"|"failed"}
///       → {"url":URL}    (the id is then spent)
///
/// Anything else, or a request the library throws on, is answered `{"error":message}`.
final class Session {
    private var configured = false
    /// nil when `OAuthEnabled` is off: the app then lets the WebView load everything.
    private var interceptor: SignInInterceptor?
    private var requests: [String: AuthorizationRequest] = [:]
    private var issued = 0

    func handle(_ line: String) -> [String: Any] {
        do {
            let request = try JSONLine(line)
            switch try request.string("op") {
            case "configure": return try configure(request)
            case "decide": return try decide(request)
            case "callback": return try callback(request)
            case let op: throw SimError("unknown op \"\(op)\"")
            }
        } catch {
            return ["error": "\(error)"]
        }
    }

    private func configure(_ request: JSONLine) throws -> [String: Any] {
        guard !configured else { throw SimError("configure comes once") }
        let app = try AppSettings(request)
        configured = true
        interceptor = app.configuration.interceptor(platform: app.platform, callbackPath: app.callbackPath)
        return ["enabled": app.configuration.enabled,
                "providers": app.configuration.providers.map { provider -> [String: Any] in
                    ["name": provider.name, "client_id": provider.clientID, "redirect_uri": provider.redirectURI,
                     "callback_scheme": provider.callbackScheme, "pkce": provider.usesPKCE]
                }]
    }

    private func decide(_ request: JSONLine) throws -> [String: Any] {
        try request.only(["op", "url", "target"])
        guard configured else { throw SimError("decide before configure") }
        let navigation = Navigation(url: try request.url("url"), target: try Self.target(request.string("target")))
        guard let interceptor else { return ["decision": "allow"] }
        switch interceptor.decide(navigation) {
        case .allow:
            return ["decision": "allow"]
        case .refuse(let error):
            return ["decision": "refuse", "error": error.description, "key": error.key ?? NSNull()]
        case .startNativeSignIn(let started):
            issued += 1
            let id = "r\(issued)"
            requests[id] = started
            return ["decision": "start", "id": id, "url": started.url.absoluteString,
                    "provider": started.provider, "platform": started.platform.rawValue,
                    "client_id": started.clientID, "redirect_uri": started.redirectURI,
                    "callback_scheme": started.callbackScheme, "state": started.state,
                    "code_verifier": started.codeVerifier ?? NSNull()]
        }
    }

    private func callback(_ request: JSONLine) throws -> [String: Any] {
        try request.only(["op", "id", "initial_url", "result"])
        let id = try request.string("id")
        guard let started = requests[id] else { throw SimError("no sign-in under way with id \"\(id)\"") }
        let url = try started.callbackURL(initialURL: request.url("initial_url"),
                                          result: Self.result(request.value("result")))
        requests[id] = nil
        return ["url": url.absoluteString]
    }

    private static func target(_ name: String) throws -> Navigation.Target {
        switch name {
        case "mainFrame": return .mainFrame
        case "popup": return .popup
        case "subframe": return .subframe
        default: throw SimError("target is mainFrame, popup or subframe, not \"\(name)\"")
        }
    }

    private static func result(_ value: Any?) throws -> BrowserResult {
        switch value {
        case let word as String where word == "cancelled": return .cancelled
        case let word as String where word == "failed": return .failed
        case let object?:
            let redirect = try JSONLine(object: object, field: "result")
            try redirect.only(["redirect"])
            return .redirect(try redirect.url("redirect"))
        case nil:
            throw SimError("result is {\"redirect\": URL}, \"cancelled\" or \"failed\"")
        }
    }
}
