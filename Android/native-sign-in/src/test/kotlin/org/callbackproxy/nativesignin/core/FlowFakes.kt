package org.callbackproxy.nativesignin.core

/** What the flow did, in order, as short lines the tests compare. */
class FlowLog {
    val lines = ArrayList<String>()

    fun take(): List<String> = ArrayList(lines).also { lines.clear() }
}

/** A browser that records starts and cancels, and fails the next start when told. */
class FakeBrowser(private val log: FlowLog, override val supportsHttpsCallbacks: Boolean = false) : BrowserStarter {
    val starts = ArrayList<BrowserStart>()
    var failNext = false

    override fun start(start: BrowserStart): Cancellable? {
        if (failNext) { failNext = false; return null }
        starts.add(start)
        log.lines.add("started s${start.session} ${start.url}")
        return object : Cancellable {
            override fun cancel() { log.lines.add("cancelled s${start.session}") }
        }
    }

    override fun openExternally(start: BrowserStart): Boolean {
        if (failNext) { failNext = false; return false }
        starts.add(start)
        log.lines.add("external ${start.url}")
        return true
    }
}

/** A WebView that records loads until the app lets it go. */
class FakeWebView(private val log: FlowLog) : WebViewLoader {
    var gone = false

    override fun load(url: String): Boolean {
        if (gone) return false
        log.lines.add("load $url")
        return true
    }
}

/** One app: the vectors' providers, a fake browser and WebView, outcomes logged as lines. */
class FlowHarness(strategy: FlowSettings.Strategy = FlowSettings.Strategy.Native, httpsCallbacks: Boolean = false,
                  initialUrl: String = "https://site.example/app") {
    val log = FlowLog()
    val browser = FakeBrowser(log, httpsCallbacks)
    val webView = FakeWebView(log)
    private val settings = FlowSettings(initialUrl, strategy)
    var flow = newFlow(null)
        private set

    private fun newFlow(restored: SavedSignIn?) = SignInFlow(Vectors.interceptor(), settings, browser, webView, restored) { o ->
        log.lines.add("outcome ${o.session?.let { "s$it" }} ${o.kind.wireName} ${o.reason}")
    }

    /**
     * The activity is recreated: the old instance's flow is closed as a configuration change closes
     * it, and the new one starts from what it saved, passed through its string form as a Bundle
     * would carry it. Returns what the close decided.
     */
    fun recreateActivity(): SignInFlow.Close {
        val saved = flow.saved().encoded
        val close = flow.close(activityFinishing = false, changingConfigurations = true)
        flow = newFlow(SavedSignIn.decode(saved))
        return close
    }

    /** The process is restarted: a new flow with nothing, only what the platform returns with a result. */
    fun restartProcess() {
        flow = newFlow(null)
    }

    fun navigate(url: String, target: Navigation.Target = Navigation.Target.MAIN_FRAME) = flow.decide(Navigation(url, target))

    companion object {
        const val GOOGLE = "https://accounts.google.com/o/oauth2/v2/auth"
        const val REDIRECT = "com.googleusercontent.apps.123-and:/oauth2redirect"
        const val HEAD = "https://site.example/_oauth_callback?provider=google&platform=android" +
            "&client_id=123-and.apps.googleusercontent.com&redirect_uri=com.googleusercontent.apps.123-and%3A%2Foauth2redirect"
    }
}
