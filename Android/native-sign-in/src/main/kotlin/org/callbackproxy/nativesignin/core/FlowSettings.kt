package org.callbackproxy.nativesignin.core

/**
 * How the app runs its sign-ins (IntegrationTests/e2e/sim-protocol.md, `configure`).
 *
 * @property initialUrl the site the WebView shows; callbacks are built on its origin and
 *   hand-back links judged by it. Must be an http(s) URL with a host and no user info.
 * @property ephemeral passed to the browser as asked (iOS's `prefersEphemeralWebBrowserSession`;
 *   on Android an Ephemeral Custom Tab, where the browser has them: Chrome 136 and later).
 */
class FlowSettings(
    val initialUrl: String,
    val strategy: Strategy = Strategy.Native,
    val ephemeral: Boolean = false
) {
    init {
        if (SiteOrigin.of(initialUrl) == null) {
            throw NativeSignInError(NativeSignInError.Kind.INITIAL_URL, null, "initialURL",
                "the callback needs an http(s) URL with a host: $initialUrl")
        }
        val strategy = this.strategy
        if (strategy is Strategy.HandBack && (strategy.linkPaths.isEmpty() || !strategy.linkPaths.all { it.startsWith("/") })) {
            throw NativeSignInError.configuration("linkPaths",
                "the hand-back strategy needs the site's callback paths (\"/users/auth/…/callback\")")
        }
    }

    /** How a recognised sign-in leaves the WebView and comes back. */
    sealed class Strategy {
        /**
         * The app's own native client: the core's request (native `client_id`, custom-scheme
         * redirect, PKCE) through AppAuth, handed back through `/_oauth_callback`.
         */
        object Native : Strategy() {
            override fun toString() = "Native"
        }

        /**
         * No native client: the site's own provider URL, unchanged, in the browser, and the
         * provider's redirect to the site's own callback loaded back into the WebView. On Android
         * it returns as a verified App Link ([SignInFlow.openLink]); [linkPaths] are the site's
         * callback paths the app claims (`/users/auth/google_oauth2/callback`).
         */
        data class HandBack(val linkPaths: Set<String>) : Strategy()
    }
}
