/// The request target the proxy forwards to the app's own OAuth callback, per hand-off mode.
/// The app sees exactly what an IdP redirect would have given it.
enum HandoffTarget {
    /// relay: `<app_callback>?code=<relay code>&state=<state>` — the app redeems the code at the
    /// relay token endpoint.
    static func relay(_ appCallback: String, code: String, state: String) -> String {
        appCallback + "?" + FormEncoding.encode([("code", code), ("state", state)])
    }

    /// params: the tokens themselves (e.g. omniauth-google-oauth2 with `authorized_client_ids`).
    static func params(_ appCallback: String, tokens: TokenResponse, state: String) -> String {
        var fields = [("access_token", tokens.accessToken), ("token_type", tokens.tokenType)]
        if let id = tokens.idToken { fields.append(("id_token", id)) }
        if let e = tokens.expiresIn { fields.append(("expires_in", String(e))) }
        fields.append(("state", state))
        return appCallback + "?" + FormEncoding.encode(fields)
    }

    /// A failed sign-in, in the form an IdP reports one: the app runs its own failure flow.
    static func failure(_ appCallback: String, error: String, state: String) -> String {
        appCallback + "?" + FormEncoding.encode([("error", error), ("state", state)])
    }
}
