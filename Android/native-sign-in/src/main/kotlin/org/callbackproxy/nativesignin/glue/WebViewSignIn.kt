// NOT RUN OR TESTED IN THIS REPOSITORY. It needs the Android SDK (android.webkit, androidx.activity)
// and AppAuth (net.openid:appauth), which cannot be installed here (Debian has neither, and no Gradle or
// Maven downloads are possible). scripts/test-android compiles it against declaration-only stubs of the
// members it calls (Android/glue-stubs): that checks names, types and nullability as the stubs copy them
// from the libraries' references, not behaviour. Kotlin 1.3 syntax, for that compiler. It is kept thin on purpose: every decision — what is intercepted, the
// native request, the callback, which sign-in is current, what a late or repeated result does — is
// SignInFlow's and the core's (package ..core), which scripts/test-android compiles and tests on the JVM;
// so are the lifecycle's: which launch a result belongs to, what is saved across recreation, what a
// restarted process does with a result, whether close() ends the sign-in.
// This file only maps Android calls onto SignInFlow. API names checked against AppAuth-Android 0.11
// (AuthorizationManagementActivity puts the redirect Uri into the result Intent's data for successes,
// provider errors and state mismatches alike, and AuthorizationResponse.toIntent's extra carries the
// request with its code verifier; a cancel carries only AuthorizationException's extra) and the Android
// reference (WebResourceRequest.isForMainFrame, Activity.isChangingConfigurations);
// ephemeral tabs against androidx.browser 1.9 (CustomTabsIntent.Builder.setEphemeralBrowsingEnabled).
package org.callbackproxy.nativesignin.glue

import android.content.ActivityNotFoundException
import android.content.Intent
import android.net.Uri
import android.os.Bundle
import android.webkit.WebResourceRequest
import android.webkit.WebView
import androidx.activity.ComponentActivity
import androidx.activity.result.ActivityResult
import androidx.activity.result.ActivityResultLauncher
import androidx.activity.result.contract.ActivityResultContracts
import androidx.browser.customtabs.ExperimentalEphemeralBrowsing
import net.openid.appauth.AuthorizationException
import net.openid.appauth.AuthorizationRequest
import net.openid.appauth.AuthorizationResponse
import net.openid.appauth.AuthorizationService
import net.openid.appauth.AuthorizationServiceConfiguration
import net.openid.appauth.ResponseTypeValues
import org.callbackproxy.nativesignin.core.BrowserResult
import org.callbackproxy.nativesignin.core.BrowserStart
import org.callbackproxy.nativesignin.core.BrowserStarter
import org.callbackproxy.nativesignin.core.Cancellable
import org.callbackproxy.nativesignin.core.FlowSettings
import org.callbackproxy.nativesignin.core.LaunchResult
import org.callbackproxy.nativesignin.core.Navigation
import org.callbackproxy.nativesignin.core.Pkce
import org.callbackproxy.nativesignin.core.ReturnedRequest
import org.callbackproxy.nativesignin.core.SavedSignIn
import org.callbackproxy.nativesignin.core.SignInFlow
import org.callbackproxy.nativesignin.core.SignInInterceptor
import org.callbackproxy.nativesignin.core.SignInOutcome
import org.callbackproxy.nativesignin.core.WebViewLoader
import java.lang.ref.WeakReference

/**
 * Native sign-in for one activity's WebView. Create it in `onCreate` with its `savedInstanceState`
 * (registerForActivityResult must run there, before the activity is STARTED, so that a result for
 * the previous instance reaches this one), call the hooks from your own WebViewClient, your popups'
 * first navigation, onNewIntent and onSaveInstanceState, and [close] it in `onDestroy` — also on a
 * rotation: the sign-in then carries on in the next instance. Main thread only, as SignInFlow requires.
 * It never touches your WebChromeClient or the WebView's settings.
 */
class WebViewSignIn(
    private val activity: ComponentActivity,
    webView: WebView,
    private val interceptor: SignInInterceptor,
    settings: FlowSettings,
    savedInstanceState: Bundle?,
    onOutcome: (SignInOutcome) -> Unit = {}
) : BrowserStarter, WebViewLoader {
    private val webView = WeakReference(webView)
    /** One per activity, disposed in [close]: it holds a Custom Tabs service connection. */
    private val service = AuthorizationService(activity)
    val flow = SignInFlow(interceptor, settings, this, this,
        SavedSignIn.decode(savedInstanceState?.getString(SavedSignIn.KEY)), onOutcome)
    private val launcher: ActivityResultLauncher<Intent> =
        activity.registerForActivityResult(ActivityResultContracts.StartActivityForResult()) { onResult(it) }

    // WebViewClient.shouldOverrideUrlLoading(view, request): `if (signIn.shouldOverrideUrlLoading(request)) return true`.
    fun shouldOverrideUrlLoading(request: WebResourceRequest): Boolean {
        val target = if (request.isForMainFrame) Navigation.Target.MAIN_FRAME else Navigation.Target.SUBFRAME
        return flow.decide(Navigation(request.url.toString(), target)) == SignInFlow.Policy.CANCEL
    }

    /**
     * Only for an app that opens popups itself (`setSupportMultipleWindows(true)` and its own
     * `onCreateWindow`): its popup's first navigation — the popup's shouldOverrideUrlLoading, or
     * onPageStarted where a WebView version starts a new window's first load without asking. True:
     * a sign-in, which the flow has taken (started, or refused as unsafe); close that popup. False:
     * the popup is the app's, `window.opener` and all. onCreateWindow itself is given no URL, and a
     * WebView handed back through WebViewTransport already is the popup, so the question cannot be
     * asked any earlier. Without popups of its own the app leaves multiple windows off (the
     * default): Android then loads `window.open` and `target=_blank` in the WebView itself, where
     * [shouldOverrideUrlLoading] sees them.
     */
    fun takePopup(url: String): Boolean {
        if (!interceptor.isSignIn(url)) return false
        flow.decide(Navigation(url, Navigation.Target.POPUP))
        return true
    }

    // onNewIntent / onCreate with an App Link (hand-back): `if (signIn.onNewIntent(intent)) return`.
    fun onNewIntent(intent: Intent): Boolean {
        val data = intent.data ?: return false
        return intent.action == Intent.ACTION_VIEW && flow.openLink(data.toString())
    }

    // onSaveInstanceState(outState): `signIn.onSaveInstanceState(outState)`.
    fun onSaveInstanceState(outState: Bundle) {
        outState.putString(SavedSignIn.KEY, flow.saved().encoded)
    }

    // onDestroy: the flow decides whether the sign-in ends (only when the activity is finishing for good).
    fun close() {
        flow.close(activity.isFinishing, activity.isChangingConfigurations)
        service.dispose()
    }

    // BrowserStarter: AppAuth for the native request; a Custom Tab cannot catch an https redirect.
    override val supportsHttpsCallbacks: Boolean get() = false

    // androidx.browser 1.9 marks ephemeral browsing experimental (checked by lint, not kotlinc).
    @androidx.annotation.OptIn(markerClass = [ExperimentalEphemeralBrowsing::class])
    override fun start(start: BrowserStart): Cancellable? {
        val native = start.native ?: return null
        // The endpoint without the site's query: AppAuth appends its parameters with buildUpon().
        val endpoint = Uri.parse(native.endpoint)
        val pkce: Pkce? = native.pkce
        // AppAuth refuses "" for these (checkNullOrNotEmpty); an empty hint means none.
        fun kept(name: String) = native.parameter(name)?.takeIf { it.isNotEmpty() }
        val request = AuthorizationRequest.Builder(AuthorizationServiceConfiguration(endpoint, endpoint),
            native.clientId, ResponseTypeValues.CODE, Uri.parse(native.redirectUri))
            .setState(native.state)
            .setScope(kept("scope"))
            .setNonce(kept("nonce"))                // null too: AppAuth would otherwise invent one
            .setPrompt(kept("prompt"))
            .setLoginHint(kept("login_hint"))
            .setCodeVerifier(pkce?.verifier, pkce?.challenge, pkce?.let { Pkce.METHOD })   // null: no PKCE (Facebook)
            .setAdditionalParameters(listOf("access_type", "include_granted_scopes", "hd")
                .mapNotNull { name -> kept(name)?.let { name to it } }.toMap())
            .build()
        // An Ephemeral Custom Tab (Chrome 136+) shares no cookies with the browser; a browser without
        // them ignores the extra and opens an ordinary Custom Tab, which is all it can do.
        val tab = service.createCustomTabsIntentBuilder().setEphemeralBrowsingEnabled(start.ephemeral).build()
        return try {
            launcher.launch(service.getAuthorizationRequestIntent(request, tab))
            object : Cancellable {
                // A Custom Tab cannot be closed from outside; bringing this activity back to the top
                // finishes AppAuth's activity, whose (cancel) result the flow then ignores.
                override fun cancel() {
                    activity.startActivity(Intent(activity, activity.javaClass)
                        .addFlags(Intent.FLAG_ACTIVITY_CLEAR_TOP or Intent.FLAG_ACTIVITY_SINGLE_TOP))
                }
            }
        } catch (e: ActivityNotFoundException) {
            null
        }
    }

    override fun openExternally(start: BrowserStart): Boolean = try {
        activity.startActivity(Intent(Intent.ACTION_VIEW, Uri.parse(start.url)).addCategory(Intent.CATEGORY_BROWSABLE))
        true
    } catch (e: ActivityNotFoundException) {
        false
    }

    /**
     * The raw redirect goes to the core, not AppAuth's reading of it: AppAuth reads the first of a
     * duplicated parameter, the core refuses the response (invalid_response). AppAuth's response is
     * read for its request only — the state sent, which names the launch, and the code verifier,
     * which this instance may never have held. No data at all: AppAuth's activity was finished from
     * outside (a newer launch brought this activity back to the top).
     */
    private fun onResult(result: ActivityResult) {
        val data: Intent? = result.data
        val redirect: Uri? = data?.data
        val browserResult = when {
            redirect != null -> BrowserResult.Redirect(redirect.toString())
            data == null -> BrowserResult.Failed("AppAuth's activity finished without a result")
            else -> {
                val error = AuthorizationException.fromIntent(data)
                if (error == AuthorizationException.GeneralErrors.USER_CANCELED_AUTH_FLOW) BrowserResult.Cancelled
                else BrowserResult.Failed(error?.errorDescription ?: "AppAuth error")
            }
        }
        val sent = data?.let { AuthorizationResponse.fromIntent(it) }?.request
        flow.activityResult(LaunchResult(browserResult, sent?.let {
            ReturnedRequest(it.state, it.clientId, it.redirectUri.toString(), it.codeVerifier)
        }))
    }

    // WebViewLoader: a released WebView (or a destroyed activity) is "gone".
    override fun load(url: String): Boolean {
        val view = webView.get() ?: return false
        if (activity.isDestroyed) return false
        view.loadUrl(url)
        return true
    }
}
