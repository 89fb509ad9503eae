package org.callbackproxy.nativesignin.sim

import org.callbackproxy.nativesignin.core.AuthorizationRequest
import org.callbackproxy.nativesignin.core.BrowserResult
import org.callbackproxy.nativesignin.core.LaunchResult
import org.callbackproxy.nativesignin.core.NativeSignInError
import org.callbackproxy.nativesignin.core.Navigation
import org.callbackproxy.nativesignin.core.NavigationDecision
import org.callbackproxy.nativesignin.core.Platform
import org.callbackproxy.nativesignin.core.ReturnedRequest
import org.callbackproxy.nativesignin.core.SavedSignIn
import org.callbackproxy.nativesignin.core.SignInFlow
import org.callbackproxy.nativesignin.core.SignInInterceptor
import org.callbackproxy.nativesignin.core.callbackUrl

/**
 * One Android app: its interceptor once configured, the sign-ins under way by id (`decide` /
 * `callback`, the core's pure functions), and its one [SignInFlow] over a fake browser and a fake
 * WebView (`navigate`, `browser_complete`, …). Every decision is the core's; this only translates
 * JSON to its calls and back. The protocol: IntegrationTests/e2e/sim-protocol.md. The Android-only
 * lifecycle ops replace the flow as the platform would: `activity_recreated` with a new one restored
 * from the old one's saved state (as a string, as a Bundle carries it), `process_restarted` with one
 * that knows nothing; the browser and the WebView stay (the platform's).
 *
 * Anything else, or a request the core throws on, is answered `{"error": message}` and changes nothing.
 */
class Session {
    private var configured = false
    /** Null when OAUTH_ENABLED is off: the app then lets the WebView load everything. */
    private var interceptor: SignInInterceptor? = null
    private val requests = HashMap<String, AuthorizationRequest>()
    private var issued = 0
    private val log = EventLog()
    private var flow: SignInFlow? = null
    private var newFlow: ((SavedSignIn?) -> SignInFlow)? = null
    private var browser: SimBrowser? = null
    private var webView: SimWebView? = null

    fun handle(line: String): Map<String, Any?> = try {
        val request = Request.parse(line)
        when (val op = request.string("op")) {
            "configure" -> configure(request)
            "decide" -> decide(request)
            "callback" -> callback(request)
            "navigate" -> navigate(request)
            "browser_complete" -> browserComplete(request)
            "fail_next_start" -> failNextStart(request)
            "cancel" -> flowOp(request) { it.cancel() }
            "webview_gone" -> flowOp(request) { webView?.gone = true }
            "open_link" -> openLink(request)
            "activity_result" -> activityResult(request)
            "activity_recreated" -> replaceFlow(request, recreated = true)
            "process_restarted" -> replaceFlow(request, recreated = false)
            "activity_finished" -> activityFinished(request)
            else -> throw SimError("unknown op \"$op\"")
        }
    } catch (e: SimError) {
        mapOf("error" to e.message)
    } catch (e: NativeSignInError) {
        mapOf("error" to e.toString())
    }

    private fun configure(request: Request): Map<String, Any?> {
        if (configured) throw SimError("configure comes once")
        val app = AppSettings(request)
        val interceptor = app.configuration.interceptor(Platform.ANDROID, app.callbackPath)
        val settings = app.flow
        if (interceptor != null && settings != null) {
            val browser = SimBrowser(app.httpsCallbacks, log)
            val webView = SimWebView(log)
            val newFlow = { restored: SavedSignIn? ->
                SignInFlow(interceptor, settings, browser, webView, restored) { outcome ->
                    log.events.add(mapOf("event" to "outcome", "session" to EventLog.session(outcome.session),
                        "outcome" to outcome.kind.wireName, "reason" to outcome.reason))
                }
            }
            flow = newFlow(null)
            this.newFlow = newFlow
            this.browser = browser
            this.webView = webView
        }
        this.interceptor = interceptor
        configured = true
        return mapOf("enabled" to app.configuration.enabled, "providers" to app.configuration.providers.map {
            mapOf("name" to it.name, "client_id" to it.clientId, "redirect_uri" to it.redirectUri,
                "callback_scheme" to it.callbackScheme, "pkce" to it.usesPkce)
        })
    }

    private fun decide(request: Request): Map<String, Any?> {
        request.only("op", "url", "target")
        if (!configured) throw SimError("decide before configure")
        val navigation = Navigation(request.string("url"), target(request.string("target")))
        val interceptor = this.interceptor ?: return mapOf("decision" to "allow")
        return when (val decision = interceptor.decide(navigation)) {
            is NavigationDecision.Allow -> mapOf("decision" to "allow")
            is NavigationDecision.Refuse -> mapOf("decision" to "refuse", "error" to decision.error.toString(), "key" to decision.error.key)
            is NavigationDecision.StartNativeSignIn -> {
                val started = decision.request
                issued += 1
                val id = "r$issued"
                requests[id] = started
                mapOf("decision" to "start", "id" to id, "url" to started.url, "provider" to started.provider,
                    "platform" to started.platform.wireName, "client_id" to started.clientId, "redirect_uri" to started.redirectUri,
                    "callback_scheme" to started.callbackScheme, "state" to started.state, "code_verifier" to started.codeVerifier)
            }
        }
    }

    private fun callback(request: Request): Map<String, Any?> {
        request.only("op", "id", "initial_url", "result")
        val id = request.string("id")
        val started = requests[id] ?: throw SimError("no sign-in under way with id \"$id\"")
        val result = when (val value = request.value("result")) {
            "cancelled" -> BrowserResult.Cancelled
            "failed" -> BrowserResult.Failed("failed")
            null -> throw SimError("result is {\"redirect\": URL}, \"cancelled\" or \"failed\"")
            else -> redirect(value)
        }
        val url = started.callbackUrl(request.string("initial_url"), result)
        requests.remove(id)
        return mapOf("url" to url)
    }

    // The flow.

    /** The flow, or null when OAUTH_ENABLED is off (the app then lets everything through). */
    private fun configuredFlow(): SignInFlow? {
        if (!configured) throw SimError("a flow op before configure")
        if (interceptor == null) return null
        return flow ?: throw SimError("the flow ops need configure's initial_url")
    }

    private fun flowOp(request: Request, action: (SignInFlow) -> Unit): Map<String, Any?> {
        request.only("op")
        configuredFlow()?.let(action)
        return mapOf("events" to log.take())
    }

    private fun navigate(request: Request): Map<String, Any?> {
        request.only("op", "url", "target")
        val navigation = Navigation(request.string("url"), target(request.string("target")))
        val flow = configuredFlow() ?: return mapOf("policy" to "allow", "events" to emptyList<Any>())
        val policy = flow.decide(navigation)
        return mapOf("policy" to policy.wireName, "events" to log.take())
    }

    private fun browserComplete(request: Request): Map<String, Any?> {
        request.only("op", "session", "result")
        val id = request.string("session")
        val result = when (val value = request.value("result")) {
            "cancelled" -> BrowserResult.Cancelled
            null -> throw SimError("result is {\"redirect\": URL}, \"cancelled\" or {\"failed\": reason}")
            else -> {
                val fields = Request.of(value, "result")
                val reason = fields.optionalString("failed")
                if (reason != null) {
                    fields.only("failed")
                    System.err.println("browser session $id failed: $reason")
                    BrowserResult.Failed(reason)
                } else {
                    redirect(value)
                }
            }
        }
        val flow = configuredFlow()
        val number = if (id.startsWith("s")) id.substring(1).toIntOrNull() else null
        val browser = this.browser
        if (flow == null || browser == null || number == null || !browser.wasStarted(number)) {
            throw SimError("no browser session \"$id\" was started")
        }
        flow.browserCompleted(number, result)
        return mapOf("events" to log.take())
    }

    private fun failNextStart(request: Request): Map<String, Any?> {
        request.only("op", "reason")
        val reason = request.string("reason")
        if (configuredFlow() != null) browser?.failNext(reason)
        return mapOf("events" to log.take())
    }

    private fun openLink(request: Request): Map<String, Any?> {
        request.only("op", "url")
        val url = request.string("url")
        val flow = configuredFlow() ?: return mapOf("handled" to false, "events" to emptyList<Any>())
        val handled = flow.openLink(url)
        return mapOf("handled" to handled, "events" to log.take())
    }

    private fun activityResult(request: Request): Map<String, Any?> {
        request.only("op", "result", "request")
        val result = when (val value = request.value("result")) {
            "cancelled" -> BrowserResult.Cancelled
            // AppAuth's activity finished from outside (a newer launch): RESULT_CANCELED without data.
            "finished" -> BrowserResult.Failed("finished without a result")
            null -> throw SimError("result is {\"redirect\": URL}, \"cancelled\", \"finished\" or {\"failed\": reason}")
            else -> {
                val fields = Request.of(value, "result")
                val reason = fields.optionalString("failed")
                if (reason != null) {
                    fields.only("failed")
                    BrowserResult.Failed(reason)
                } else {
                    redirect(value)
                }
            }
        }
        val returned = request.value("request")?.let {
            val fields = Request.of(it, "request")
            fields.only("state", "client_id", "redirect_uri", "code_verifier")
            ReturnedRequest(fields.optionalString("state"), fields.string("client_id"), fields.string("redirect_uri"),
                fields.optionalString("code_verifier"))
        }
        configuredFlow()?.activityResult(LaunchResult(result, returned))
        return mapOf("events" to log.take())
    }

    private fun replaceFlow(request: Request, recreated: Boolean): Map<String, Any?> {
        request.only("op")
        val old = configuredFlow() ?: return mapOf("events" to emptyList<Any>())
        val saved = old.saved().encoded
        // A killed process gets no onDestroy: only a recreated activity is closed.
        if (recreated) old.close(activityFinishing = false, changingConfigurations = true)
        flow = newFlow!!(if (recreated) SavedSignIn.decode(saved) else null)
        return mapOf("events" to log.take(), "saved" to if (recreated) saved else null)
    }

    private fun activityFinished(request: Request): Map<String, Any?> {
        request.only("op")
        val close = configuredFlow()?.close(activityFinishing = true, changingConfigurations = false)
        return mapOf("events" to log.take(), "close" to close?.wireName)
    }

    private fun redirect(value: Any): BrowserResult {
        val fields = Request.of(value, "result")
        fields.only("redirect")
        return BrowserResult.Redirect(fields.string("redirect"))
    }

    private fun target(name: String): Navigation.Target =
        Navigation.Target.fromWireName(name) ?: throw SimError("target is mainFrame, popup or subframe, not \"$name\"")
}
