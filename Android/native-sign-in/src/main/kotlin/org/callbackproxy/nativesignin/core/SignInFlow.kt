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
 * - **The same navigation twice** (a popup's first navigation seen by both shouldOverrideUrlLoading
 *   and onPageStarted, or again as a main-frame load) while its sign-in runs is cancelled and starts nothing.
 * - **A browser that does not start** loads the callback with `error=sign_in_failed` (the site
 *   shows its failure page) and ends `failed` / `browser_did_not_start`.
 * - **Hand-back**: the site's own URL, unchanged; only a link on the site's origin with a
 *   configured path, while a hand-back sign-in runs, is taken back, once.
 * - **The phone's lifecycle** (Android): a result the platform returns without our number
 *   ([activityResult]) is matched to its launch by its state, else to the oldest launch still
 *   out, so a superseded launch's late cancel is that launch's and is ignored; [saved] and the
 *   `restored` parameter carry the sign-in across the activity's recreation; a result that finds
 *   no sign-in at all (the process was restarted) completes from what it carries; [close]
 *   ends nothing when the activity comes back.
 *
 * Single-threaded by contract: the glue calls it on the main thread (where WebView callbacks and
 * activity results arrive), so it holds no locks.
 */
class SignInFlow(
    val interceptor: SignInInterceptor,
    val settings: FlowSettings,
    private val browser: BrowserStarter,
    private val webView: WebViewLoader,
    /** What the previous instance of the activity saved ([saved]); null: nothing was. */
    restored: SavedSignIn? = null,
    /** Told how each sign-in ended, once per sign-in. */
    private val onOutcome: (SignInOutcome) -> Unit
) {
    enum class Policy(val wireName: String) {
        ALLOW("allow"),
        /** The flow took it (a sign-in started, was already running, or was refused). */
        CANCEL("cancel")
    }

    private sealed class Route {
        /**
         * [returned]: a sign-in known only from saved state or from its result, whose [request] is
         * rebuilt from the provider's configuration without a verifier; the platform returns that
         * with the result.
         */
        class Native(val request: AuthorizationRequest, val returned: Boolean = false) : Route()
        /** The site's own callback (its `redirect_uri`), where the result is loaded. */
        class HandBack(val site: SiteCallback) : Route()
    }

    /** [number] is null for a sign-in met only through its result (it was started by an earlier process). */
    private class Running(val number: Int?, val siteUrl: String, val state: String, val route: Route) {
        var session: Cancellable? = null
    }

    private class Launch(val number: Int, val state: String)

    private var running: Running? = null
    private var started = 0
    /**
     * Browser sessions whose platform result has not arrived, oldest first, superseded and
     * cancelled ones included: each launch gets exactly one result, and the platform delivers
     * them in the order the launches ended.
     */
    private val launches = ArrayList<Launch>()
    /**
     * Whether this flow knows every launch whose result may still come: it started one, took
     * one's result, or was restored. Only a flow that knows none takes a result for which it has
     * no launch as a sign-in of an earlier process; any other such result is a second delivery.
     */
    private var knowsItsLaunches = restored != null

    init {
        if (restored != null) {
            started = restored.started
            for (launch in restored.launches) launches.add(Launch(launch.number, launch.state))
            restored.running?.let { was -> running = restoredRunning(was) }
        }
    }

    /**
     * Null when the sign-in cannot be finished by this configuration (its provider or the
     * hand-back strategy is gone): its launch's result, or its link, is then ignored.
     */
    private fun restoredRunning(was: SavedSignIn.Running): Running? {
        val site = was.site
        if (site != null) {
            val strategy = settings.strategy as? FlowSettings.Strategy.HandBack ?: return null
            val callback = try {
                SiteCallback.of(site, settings.initialUrl, if (browser.supportsHttpsCallbacks) null else strategy.linkPaths)
            } catch (e: NativeSignInError) {
                return null
            }
            return Running(was.number, site, was.state, Route.HandBack(callback))
        }
        val provider = interceptor.providers.firstOrNull { it.name == was.provider } ?: return null
        return Running(was.number, "", was.state, Route.Native(interceptor.returnedRequest(provider, was.state, null), true))
    }

    /** Whether a sign-in is under way. */
    val isRunning: Boolean get() = running != null

    /** The WebView asks about a navigation (shouldOverrideUrlLoading, a popup's first navigation). */
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
        end(cancelBrowser = true)
    }

    private fun end(cancelBrowser: Boolean) {
        val current = running ?: return
        running = null
        if (cancelBrowser) current.session?.cancel()
        onOutcome(SignInOutcome(current.number, SignInOutcome.Kind.CANCELLED, null))
    }

    /** What [close] did. */
    enum class Close(val wireName: String) {
        /** The activity comes back (a configuration change, or the system reclaiming it): save [saved]. */
        KEPT("kept"),
        /** The activity is gone for good: the running sign-in, if any, ended `cancelled`. */
        ENDED("ended")
    }

    /**
     * The activity that holds the WebView is being destroyed. Only an activity that is finishing
     * and not being recreated ends the sign-in: a rotation, a dark-mode switch or a resize
     * destroys it too, and the result is then delivered to the new instance. The browser is not
     * told: starting an activity from one being destroyed would bring the app back.
     */
    fun close(activityFinishing: Boolean, changingConfigurations: Boolean): Close {
        if (!activityFinishing || changingConfigurations) return Close.KEPT
        end(cancelBrowser = false)
        return Close.ENDED
    }

    /** What the activity's saved state must hold for [SignInFlow]'s `restored` in its next instance. */
    fun saved(): SavedSignIn {
        val current = running
        val was = current?.number?.let { number ->
            when (val route = current.route) {
                is Route.Native -> SavedSignIn.Running(number, current.state, route.request.provider, null)
                is Route.HandBack -> SavedSignIn.Running(number, current.state, null, current.siteUrl)
            }
        }
        return SavedSignIn(started, was, launches.map { SavedSignIn.Launch(it.number, it.state) })
    }

    /**
     * A browser launch's result as the platform returns it, without our number. It belongs to the
     * launch whose state it carries, else to the oldest launch still out (a cancel carries no
     * state). A superseded or cancelled launch's result is ignored, and so is one that finds no
     * launch (a second delivery). Only in a flow that knows no launch at all — the process was
     * restarted and nothing was saved — the first result completes from what it carries (provider,
     * state, verifier); when it carries too little, the sign-in ends `lost` and nothing is loaded.
     */
    fun activityResult(result: LaunchResult) {
        val state = result.state
        val launch = (if (state != null) launches.lastOrNull { it.state == state } else null) ?: launches.firstOrNull()
        if (launch != null) {
            launches.remove(launch)
            complete(launch.number, result.result, result.request)
            return
        }
        if (knowsItsLaunches) return
        knowsItsLaunches = true
        resume(result, state)
    }

    private fun resume(result: LaunchResult, state: String?) {
        val returned = result.request
        val provider = if (returned != null) {
            interceptor.providers.firstOrNull { it.clientId == returned.clientId && it.redirectUri == returned.redirectUri }
        } else {
            (result.result as? BrowserResult.Redirect)?.let { providerOfRedirect(it.url) }
        }
        if (state == null || provider == null) {
            onOutcome(SignInOutcome(null, SignInOutcome.Kind.LOST,
                if (state == null) SignInOutcome.NO_STATE else SignInOutcome.UNKNOWN_PROVIDER))
            return
        }
        running = Running(null, "", state, Route.Native(interceptor.returnedRequest(provider, state, null), true))
        complete(null, result.result, returned)
    }

    private fun providerOfRedirect(url: String): Provider? {
        val parts = UrlParts.parse(url) ?: return null
        return interceptor.providers.firstOrNull { provider ->
            val sent = UrlParts.parse(provider.redirectUri)
            sent != null && parts.path == sent.path &&
                parts.scheme?.let { Ascii.lower(it) } == sent.scheme?.let { Ascii.lower(it) } &&
                parts.host?.let { Ascii.lower(it) } == sent.host?.let { Ascii.lower(it) }
        }
    }

    /**
     * The browser session [session] ended. Ignored unless it belongs to the running sign-in: a
     * superseded or cancelled session, or a second report, does nothing.
     */
    fun browserCompleted(session: Int, result: BrowserResult) {
        launches.removeAll { it.number == session }
        complete(session, result, null)
    }

    private fun complete(session: Int?, result: BrowserResult, returned: ReturnedRequest?) {
        val ended = running
        if (ended == null || ended.number != session) return
        running = null
        val route = ended.route
        when (route) {
            is Route.Native -> if (!route.returned) {
                finish(ended, route.request.outcome(result), null, null)
            } else {
                val verifier = returned?.codeVerifier?.takeIf { returned.state == null || returned.state == ended.state }
                val provider = interceptor.providers.first { it.name == route.request.provider }
                val request = interceptor.returnedRequest(provider, ended.state, verifier)
                val rebuilt = Running(ended.number, ended.siteUrl, ended.state, Route.Native(request))
                val outcome = request.outcome(result)
                if (outcome.code != null && provider.usesPkce && request.codeVerifier == null) {
                    // A code is worthless to the site without the verifier its challenge was made from.
                    finish(rebuilt, CallbackOutcome.error(CallbackError.SIGN_IN_FAILED, CallbackOutcome.Cause.BROWSER_FAILED),
                        SignInOutcome.VERIFIER_LOST, null)
                } else {
                    finish(rebuilt, outcome, null, null)
                }
            }
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
        val launch = Launch(number, request.state)
        knowsItsLaunches = true

        if (route is Route.HandBack && !browser.supportsHttpsCallbacks) {
            // The default browser, then an App Link (openLink): nothing to cancel.
            if (browser.openExternally(start)) return
        } else {
            // Listed before start(): a result reported during start() must find it.
            launches.add(launch)
            val session = browser.start(start)
            if (session == null) launches.remove(launch)
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
