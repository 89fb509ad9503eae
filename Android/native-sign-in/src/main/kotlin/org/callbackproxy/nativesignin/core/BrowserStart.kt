package org.callbackproxy.nativesignin.core

/** What the flow asks the browser to run for one sign-in. */
class BrowserStart internal constructor(
    /** The sign-in's number (`s1`, `s2`, … on the wire), from 1 in the order started; completions name it. */
    val session: Int,
    /** Native: the native request's URL. Hand-back: the site's URL unchanged. */
    val url: String,
    val callback: BrowserCallback,
    val ephemeral: Boolean,
    val provider: String,
    val platform: Platform,
    /** The site's state, carried unchanged. */
    val state: String,
    /** The core's native request (the glue builds AppAuth's from it); null for a hand-back sign-in. */
    val native: AuthorizationRequest?
)

/** Where a browser session returns. */
sealed class BrowserCallback {
    /** A custom-scheme redirect (the native client's). */
    data class Scheme(val scheme: String) : BrowserCallback()

    /** An https redirect on a host and path (a browser that can catch one). */
    data class Https(val host: String, val path: String) : BrowserCallback()
}

/** A running browser session the flow may cancel (a newer sign-in, the app's cancel()). */
interface Cancellable {
    fun cancel()
}

/** The browser side of the flow; the Android glue implements it with AppAuth and an Intent. */
interface BrowserStarter {
    /**
     * Whether [start] can wait for an https callback. A Custom Tab cannot (AppAuth can only be
     * given the redirect by an activity the OS starts), so the Android glue answers false and a
     * hand-back returns as an App Link.
     */
    val supportsHttpsCallbacks: Boolean

    /**
     * Starts the session; null when it could not start. Its end is reported later through
     * [SignInFlow.browserCompleted]; a report during start() ends the sign-in then and there.
     */
    fun start(start: BrowserStart): Cancellable?

    /** Hand-back without https callbacks: opens the site's URL in the default browser; false when nothing could. */
    fun openExternally(start: BrowserStart): Boolean
}

/** The WebView side: the glue holds the WebView weakly, so it may be gone. */
interface WebViewLoader {
    /** Loads [url] as a full navigation; false when the WebView is gone (released, its activity destroyed). */
    fun load(url: String): Boolean
}
