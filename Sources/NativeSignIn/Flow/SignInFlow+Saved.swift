import Foundation

/// What outlives the process (iOS). `ASWebAuthenticationSession` runs in the app's own process:
/// when iOS ends it (the user swipes the app away, memory pressure, a crash) while the browser
/// sheet is up, the session ends with it and its completion handler never runs. Without a trace
/// the next launch would show the site as if nothing had happened. The flow therefore reports a
/// small string each time a sign-in starts or ends (`onSaved`); the next process hands it to
/// `restore(_:)`, which names what happened.
///
/// The string holds the sign-in's number and the site's provider URL that started it (its
/// `state` is in it) — never a code or a PKCE verifier.
extension SignInFlow {
    private enum Key {
        static let version = "v"
        static let running = "running"
        static let site = "site"
        static let external = "external"
    }

    private static let version = "1"

    /// The running sign-in as `onSaved` reports it; nil when none runs.
    public var saved: String? {
        guard let running else { return nil }
        var fields = [QueryString.Field(name: Key.version, value: Self.version),
                      QueryString.Field(name: Key.running, value: String(running.number)),
                      QueryString.Field(name: Key.site, value: running.siteURL.absoluteString)]
        if running.external { fields.append(QueryString.Field(name: Key.external, value: "1")) }
        return QueryString.encode(fields)
    }

    /// At launch, after the first load of the WebView: what the previous process saved (nil,
    /// or something unreadable: nothing happens). Its sign-in's browser session ended with that
    /// process, except a hand-back through the default browser, which runs outside the app:
    /// - **a browser session** (native, or hand-back waiting for the https callback): its result
    ///   can never arrive. The site's callback is loaded with `error=sign_in_failed` and the
    ///   saved state — the site's failure page — and the outcome is `failed` /
    ///   `process_ended`; `lost` / `process_ended` with nothing loaded when this configuration
    ///   no longer recognises the sign-in.
    /// - **hand-back through the default browser**: still under way; the sign-in runs again
    ///   (no events), and its universal link, when it comes, is taken by `open(link:)`.
    /// Numbers continue after the saved one.
    public func restore(_ saved: String?) {
        guard running == nil, let saved else { return }
        var values: [String: String] = [:]
        for field in QueryString.fields(saved) {
            guard let value = field.value, values.updateValue(value, forKey: field.name) == nil else { return }
        }
        guard values[Key.version] == Self.version, let numberText = values[Key.running], let number = Int(numberText),
              number > 0, let siteText = values[Key.site], let siteURL = URL(string: siteText) else { return }
        let external = values[Key.external] == "1"
        started = max(started, number)

        // Reported over: the app's copy must not name it to yet another launch.
        defer { if running == nil { onSaved?(nil) } }
        guard case .startNativeSignIn(let request) = interceptor.decide(Navigation(url: siteURL, target: .mainFrame)),
              let route = try? route(siteURL: siteURL, request: request, external: external) else {
            return report(SignInOutcome(.lost, signIn: number, reason: SignInOutcome.Reason.processEnded))
        }
        let restored = Running(number: number, siteURL: siteURL, state: request.state, route: route,
                               external: external, session: nil)
        if external, case .handBack = route {
            running = restored
            return
        }
        finish(restored, .browserFailed, reason: SignInOutcome.Reason.processEnded, redirect: nil)
    }
}
