package org.callbackproxy.nativesignin.core

/**
 * The decision core of the app: recognises the site's authorization URL and builds the native
 * request that replaces it. Pure: no WebView, no browser, no clock — the glue only asks.
 *
 * [pkce] makes the verifier injectable so that the shared contract vectors can fix it; apps
 * use the default, a fresh [Pkce.generate] per sign-in.
 */
class SignInInterceptor(
    val providers: List<Provider>,
    val platform: Platform,
    callbackPath: String = DEFAULT_CALLBACK_PATH,
    private val pkce: () -> Pkce = { Pkce.generate() }
) {
    /** The proxy's `oauth.callback_path`, always absolute. */
    val callbackPath: String = if (callbackPath.startsWith("/")) callbackPath else "/$callbackPath"

    /**
     * Everything else in the site's URL is dropped: the outbound URL is only a trigger. The web
     * client's `client_id`, `redirect_uri` and PKCE challenge mean nothing to the native client,
     * and any other parameter passed along would let the site steer the native client —
     * `response_type`, `response_mode`, `request`/`request_uri`, `claims` — in ways its
     * registration never agreed to.
     *
     * A provider URL without `state` is refused rather than signed in: `/_oauth_callback`
     * requires `state`, and the site's callback is the one that checks it (login-CSRF
     * protection). The same holds for a `state` the proxy cannot carry (longer than 1024 bytes,
     * not visible ASCII) and for a kept parameter that appears twice (which copy a provider reads
     * differs between stacks).
     */
    fun decide(navigation: Navigation): NavigationDecision {
        if (navigation.target == Navigation.Target.SUBFRAME) return NavigationDecision.Allow
        return decide(navigation, providers.firstOrNull { it.endpoint.matches(navigation.url) } ?: return NavigationDecision.Allow)
    }

    /**
     * Whether a popup opening [url] is a sign-in the flow takes (started, or refused as unsafe):
     * the question an app's own WebChromeClient asks of its popup's first navigation, since
     * `onCreateWindow` itself is given no URL. Nothing is started or remembered.
     */
    fun isSignIn(url: String): Boolean = providers.any { it.endpoint.matches(url) }

    private fun decide(navigation: Navigation, provider: Provider): NavigationDecision {
        // matches() parsed it already.
        val parts = UrlParts.parse(navigation.url)!!

        val carried = HashMap<String, String>()
        for (field in QueryString.fields(parts.query)) {
            if (field.name !in KEPT_PARAMETERS && field.name !in ALLOWLISTED_PARAMETERS) continue
            if (carried.containsKey(field.name)) {
                return refuse(field.name, "appears twice in ${provider.name}'s authorization URL")
            }
            val value = field.value ?: return refuse(field.name, "is not valid percent-encoded UTF-8")
            carried[field.name] = value
        }
        val state = carried["state"]
        if (state == null || state.isEmpty()) {
            return refuse("state", "the site's ${provider.name} authorization URL has no state; " +
                "a sign-in without one cannot be checked by the site's callback")
        }
        if (state.length > MAX_STATE_BYTES || !state.all { it in ' '..'~' }) {
            return refuse("state", "is longer than 1024 bytes or not visible ASCII; " +
                "/_oauth_callback could not carry it back")
        }

        val pair = if (provider.usesPkce) pkce() else null
        val fields = ArrayList<QueryString.Field>()
        fields.add(QueryString.Field("client_id", provider.clientId))
        fields.add(QueryString.Field("redirect_uri", provider.redirectUri))
        fields.add(QueryString.Field("response_type", "code"))
        for (name in KEPT_PARAMETERS + ALLOWLISTED_PARAMETERS) {
            val value = carried[name]
            if (value != null) fields.add(QueryString.Field(name, value))
        }
        if (pair != null) {
            fields.add(QueryString.Field("code_challenge", pair.challenge))
            fields.add(QueryString.Field("code_challenge_method", Pkce.METHOD))
        }
        return NavigationDecision.StartNativeSignIn(AuthorizationRequest(
            provider = provider.name, platform = platform, clientId = provider.clientId,
            redirectUri = provider.redirectUri, callbackScheme = provider.callbackScheme,
            endpoint = parts.withoutQuery, parameters = fields, state = state, pkce = pair,
            siteUrl = navigation.url, callbackPath = callbackPath))
    }

    /**
     * The native request of a sign-in this instance did not start, rebuilt for its callback from
     * the provider's configuration, the [state] sent and the [verifier] the platform returned (a
     * malformed one counts as none). It has no URL to open: the browser already ran.
     */
    internal fun returnedRequest(provider: Provider, state: String, verifier: String?): AuthorizationRequest {
        val pair = if (provider.usesPkce && verifier != null) {
            try { Pkce(verifier) } catch (e: NativeSignInError) { null }
        } else null
        return AuthorizationRequest(
            provider = provider.name, platform = platform, clientId = provider.clientId,
            redirectUri = provider.redirectUri, callbackScheme = provider.callbackScheme,
            endpoint = "", parameters = emptyList(), state = state, pkce = pair,
            siteUrl = "", callbackPath = callbackPath)
    }

    private fun refuse(key: String, detail: String) = NavigationDecision.Refuse(NativeSignInError.navigation(key, detail))

    companion object {
        const val DEFAULT_CALLBACK_PATH = "/_oauth_callback"

        /** `scope` and `state` are the sign-in the site asked for. */
        val KEPT_PARAMETERS = listOf("scope", "state")

        /** Standard hints a site may set and the provider honours for any client. */
        val ALLOWLISTED_PARAMETERS = listOf("access_type", "prompt", "login_hint", "include_granted_scopes", "nonce", "hd")

        /** RFC 6749 A.5: state is 1*VSCHAR; the proxy takes at most 1024 bytes of it. */
        const val MAX_STATE_BYTES = 1024
    }
}
