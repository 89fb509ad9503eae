package org.callbackproxy.nativesignin.core

/**
 * The app's one sign-in flow: what the WebView's navigations start, which browser session is
 * current, and what is loaded back into the WebView when it ends. Every decision the Android glue
 * would otherwise make is here, behind [BrowserStarter] and [WebViewLoader], so that it is tested
 * without Android; the glue only maps OS calls onto it. The same policies as the Swift library's
 * `SignInFlow` (IntegrationTests/e2e/sim-protocol.md holds both to them):
 *
 * - **Latest sign-in wins.** A navigation that starts a sign-in while another runs cancels the old
 *   session (the site already stored the newer `state`, so the old one could only fail) and reports
 *   it `superseded`; the old session's late completion is ignored.
 * - **Exactly once.** Each sign-in ends with one outcome and at most one WebView load; a second
 *   completion, or one after cancel() or supersession, does nothing.
 * - **The same navigation twice** (a popup seen by onCreateWindow's throw-away WebView and again
 *   as a main-frame load) while its sign-in runs is cancelled and starts nothing.
 * - **A browser that does not start** loads the callback with `error=sign_in_failed` (the site
 *   shows its failure page) and ends `failed` / `browser_did_not_start`.
 * - **Hand-back**: the site's own URL, unchanged; only a link on the site's origin with a
 *   configured path, while a hand-back sign-in runs, is taken back, once.
 *
 * Single-threaded by contract: the glue calls it on the main thread (where WebView callbacks and
 * activity results arrive), so it holds no locks.
 */
class SignInFlow(
    val interceptor: SignInInterceptor,
    val settings: FlowSettings,
    private val browser: BrowserStarter,
    private val webView: WebViewLoader,
    /** Told how each sign-in ended, once per sign-in. */
    private val onOutcome: (SignInOutcome) -> Unit
) {
    enum class Policy(val wireName: String) {
        ALLOW("allow"),
        /** The flow took it (a sign-in started, was already running, or was refused). */
        CANCEL("cancel")
    }

    private sealed class Route {
        class Native(val request: AuthorizationRequest) : Route()
        /** The site's own callback (its `redirect_uri`), where the result is loaded. */
        class HandBack(val site: SiteCallback) : Route()
    }

    private class Running(val number: Int, val siteUrl: String, val state: String, val route: Route) {
        var session: Cancellable? = null
    }

    private var running: Running? = null
    private var started = 0

    /** Whether a sign-in is under way. */
    val isRunning: Boolean get() = running != null

    /** The WebView asks about a navigation (shouldOverrideUrlLoading, onCreateWindow). */
    fun decide(navigation: Navigation): Policy {
        val decision = interceptor.decide(navigation)
        val request = when (decision) {
            is NavigationDecision.Allow -> return Policy.ALLOW
            is NavigationDecision.Refuse -> {
                onOutcome(SignInOutcome(null, SignInOutcome.Kind.REFUSED, decision.error.toString()))
                return Policy.CANCEL
            }
            is NavigationDecision.StartNativeSignIn -> decision.request
        }
        val current = running
        if (current != null && current.siteUrl == navigation.url && current.state == request.state) return Policy.CANCEL

        val strategy = settings.strategy
        val route: Route = when (strategy) {
            is FlowSettings.Strategy.Native -> Route.Native(request)
            is FlowSettings.Strategy.HandBack -> try {
                Route.HandBack(SiteCallback.of(navigation.url, settings.initialUrl,
                    if (browser.supportsHttpsCallbacks) null else strategy.linkPaths))
            } catch (e: NativeSignInError) {
                onOutcome(SignInOutcome(null, SignInOutcome.Kind.REFUSED, e.toString()))
                return Policy.CANCEL
            }
        }
        if (current != null) {
            running = null
            current.session?.cancel()
            onOutcome(SignInOutcome(current.number, SignInOutcome.Kind.SUPERSEDED, null))
        }
        start(navigation.url, request, route)
        return Policy.CANCEL
    }

    /** Ends the running sign-in, if any: its session is cancelled and nothing is loaded. */
    fun cancel() {
        val current = running ?: return
        running = null
        current.session?.cancel()
        onOutcome(SignInOutcome(current.number, SignInOutcome.Kind.CANCELLED, null))
    }

    /**
     * The browser session [session] ended. Ignored unless it belongs to the running sign-in: a
     * superseded or cancelled session, or a second report, does nothing.
     */
    fun browserCompleted(session: Int, result: BrowserResult) {
        val ended = running
        if (ended == null || ended.number != session) return
        running = null
        val route = ended.route
        when (route) {
            is Route.Native -> finish(ended, route.request.outcome(result), null, null)
            is Route.HandBack -> when (result) {
                is BrowserResult.Cancelled ->
                    finish(ended, CallbackOutcome.error(CallbackError.CANCELLED, CallbackOutcome.Cause.USER_CANCELLED), null, null)
                is BrowserResult.Failed ->
                    finish(ended, CallbackOutcome.error(CallbackError.SIGN_IN_FAILED, CallbackOutcome.Cause.BROWSER_FAILED), null, null)
                is BrowserResult.Redirect -> if (!route.site.isRedirect(result.url)) {
                    finish(ended, CallbackOutcome.error(CallbackError.INVALID_RESPONSE, CallbackOutcome.Cause.INVALID_RESPONSE), null, null)
                } else {
                    finish(ended, CallbackOutcome.ofRedirectQuery(UrlParts.parse(result.url)?.query, ended.state), null, result.url)
                }
            }
        }
    }

    /**
     * An App Link that reached the app. Taken only while a hand-back sign-in runs, only on the
     * site's origin with one of the configured paths, and only once; then loaded into the WebView
     * (a code) or turned into the site's callback with the error. False: not ours, let the app
     * handle it otherwise.
     */
    fun openLink(url: String): Boolean {
        val strategy = settings.strategy as? FlowSettings.Strategy.HandBack ?: return false
        val ended = running ?: return false
        val route = ended.route as? Route.HandBack ?: return false
        val parts = UrlParts.parse(url) ?: return false
        if (SiteOrigin.of(parts) != route.site.origin || parts.path !in strategy.linkPaths) return false
        running = null
        // The link finished it; a browser session still on screen has nothing left to do.
        ended.session?.cancel()
        finish(ended, CallbackOutcome.ofRedirectQuery(parts.query, ended.state), null, url)
        return true
    }

    private fun start(siteUrl: String, request: AuthorizationRequest, route: Route) {
        started += 1
        val number = started
        val start = when (route) {
            is Route.Native -> BrowserStart(number, request.url,
                SiteCallback.httpsCallback(request.redirectUri) ?: BrowserCallback.Scheme(request.callbackScheme),
                settings.ephemeral, request.provider, request.platform, request.state, request)
            is Route.HandBack -> BrowserStart(number, siteUrl, BrowserCallback.Https(route.site.host, route.site.path),
                settings.ephemeral, request.provider, request.platform, request.state, null)
        }
        val signIn = Running(number, siteUrl, request.state, route)
        running = signIn

        if (route is Route.HandBack && !browser.supportsHttpsCallbacks) {
            // The default browser, then an App Link (openLink): nothing to cancel.
            if (browser.openExternally(start)) return
        } else {
            val session = browser.start(start)
            if (session != null) {
                // A completion reported during start() has already ended the sign-in.
                if (running === signIn) signIn.session = session
                return
            }
        }
        if (running !== signIn) return
        running = null
        finish(signIn, CallbackOutcome.error(CallbackError.SIGN_IN_FAILED, CallbackOutcome.Cause.BROWSER_FAILED),
            SignInOutcome.BROWSER_DID_NOT_START, null)
    }

    /**
     * Loads the result into the WebView (if it is still there) and reports the outcome.
     * [redirect]: the hand-back redirect, loaded unchanged when it carries the code.
     */
    private fun finish(ended: Running, outcome: CallbackOutcome, reason: String?, redirect: String?) {
        val route = ended.route
        val load = when (route) {
            is Route.Native -> route.request.callbackUrl(settings.initialUrl, outcome)
            is Route.HandBack -> if (outcome.code != null && redirect != null) redirect else route.site.url(ended.state, outcome.error!!)
        }
        if (!webView.load(load)) {
            onOutcome(SignInOutcome(ended.number, SignInOutcome.Kind.WEBVIEW_GONE, null))
            return
        }
        onOutcome(when (outcome.cause) {
            CallbackOutcome.Cause.COMPLETED -> SignInOutcome(ended.number, SignInOutcome.Kind.COMPLETED, null)
            CallbackOutcome.Cause.USER_CANCELLED -> SignInOutcome(ended.number, SignInOutcome.Kind.USER_CANCELLED, null)
            CallbackOutcome.Cause.PROVIDER_ERROR -> SignInOutcome(ended.number, SignInOutcome.Kind.PROVIDER_ERROR, outcome.error)
            CallbackOutcome.Cause.BROWSER_FAILED ->
                SignInOutcome(ended.number, SignInOutcome.Kind.FAILED, reason ?: SignInOutcome.BROWSER_FAILED)
            CallbackOutcome.Cause.INVALID_RESPONSE -> SignInOutcome(ended.number, SignInOutcome.Kind.FAILED, SignInOutcome.INVALID_RESPONSE)
            CallbackOutcome.Cause.STATE_MISMATCH -> SignInOutcome(ended.number, SignInOutcome.Kind.FAILED, SignInOutcome.STATE_MISMATCH)
        })
    }
}
