package org.callbackproxy.nativesignin.sim

import org.callbackproxy.nativesignin.core.BrowserCallback
import org.callbackproxy.nativesignin.core.BrowserStart
import org.callbackproxy.nativesignin.core.BrowserStarter
import org.callbackproxy.nativesignin.core.Cancellable
import org.callbackproxy.nativesignin.core.WebViewLoader

/** What the flow did, in order, as the protocol's events. */
class EventLog {
    val events = ArrayList<Map<String, Any?>>()

    fun take(): List<Map<String, Any?>> = ArrayList(events).also { events.clear() }

    companion object {
        fun session(number: Int?): String? = number?.let { "s$it" }
    }
}

/** The browser the flow starts: records each start, knows which sessions started, fails the next start when told. */
class SimBrowser(override val supportsHttpsCallbacks: Boolean, private val log: EventLog) : BrowserStarter {
    private var failNextStart: String? = null
    private val started = HashSet<Int>()

    fun failNext(reason: String) {
        failNextStart = reason
    }

    /** Whether session `s<number>` was started (only those have a completion to fire). */
    fun wasStarted(number: Int) = number in started

    override fun start(start: BrowserStart): Cancellable? {
        val id = EventLog.session(start.session)
        val reason = failNextStart
        if (reason != null) {
            failNextStart = null
            System.err.println("browser session $id did not start: $reason")
            return null
        }
        val callback = when (val c = start.callback) {
            is BrowserCallback.Scheme -> mapOf("scheme" to c.scheme)
            is BrowserCallback.Https -> mapOf("https" to mapOf("host" to c.host, "path" to c.path))
        }
        log.events.add(mapOf("event" to "browser_started", "session" to id, "url" to start.url, "callback" to callback,
            "ephemeral" to start.ephemeral, "provider" to start.provider, "platform" to start.platform.wireName,
            "client_id" to start.native?.clientId, "redirect_uri" to start.native?.redirectUri, "state" to start.state,
            "code_verifier" to start.native?.codeVerifier))
        started.add(start.session)
        return object : Cancellable {
            override fun cancel() {
                log.events.add(mapOf("event" to "browser_cancelled", "session" to id))
            }
        }
    }

    override fun openExternally(start: BrowserStart): Boolean {
        val reason = failNextStart
        if (reason != null) {
            failNextStart = null
            System.err.println("the default browser did not open: $reason")
            return false
        }
        log.events.add(mapOf("event" to "external_browser_opened", "url" to start.url))
        return true
    }
}

/** The app's WebView until `webview_gone` lets it go. */
class SimWebView(private val log: EventLog) : WebViewLoader {
    var gone = false

    override fun load(url: String): Boolean {
        if (gone) return false
        log.events.add(mapOf("event" to "load", "url" to url))
        return true
    }
}
