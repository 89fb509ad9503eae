package org.callbackproxy.nativesignin.core

/**
 * One native sign-in under way: what the browser opens, and what the hand-back to
 * `/_oauth_callback` needs from it. Built by [SignInInterceptor.decide]; keep it until the browser
 * returns (it holds the PKCE verifier, which never leaves the app except in the callback to the
 * site's own origin).
 */
class AuthorizationRequest internal constructor(
    /** `provider=` of the callback (the proxy's provider key). */
    val provider: String,
    val platform: Platform,
    /** The native client id sent, echoed as `client_id=`. */
    val clientId: String,
    /** The redirect sent, echoed as `redirect_uri=` (the exchange must repeat it exactly). */
    val redirectUri: String,
    /** The scheme the redirect comes back on. */
    val callbackScheme: String,
    /**
     * The provider's endpoint as the site wrote it, without the site's query and fragment: what
     * AppAuth's `AuthorizationServiceConfiguration` takes. AppAuth builds its URL with
     * `buildUpon()`, which would keep a query left on the endpoint.
     */
    val endpoint: String,
    /** The native request's parameters, in order (what [url] carries). */
    val parameters: List<QueryString.Field>,
    /** The site's state, as sent; the redirect must carry it back unchanged. */
    val state: String,
    /** The PKCE pair, when the provider uses PKCE. */
    val pkce: Pkce?,
    /** The site's URL that started this sign-in, unchanged (the hand-back strategy opens it). */
    val siteUrl: String,
    internal val callbackPath: String
) {
    /** The native authorization URL: [endpoint] with [parameters]. */
    val url: String get() = endpoint + "?" + QueryString.encode(parameters)

    /** The PKCE verifier, when the provider uses PKCE. */
    val codeVerifier: String? get() = pkce?.verifier

    /** One kept parameter's value (`scope`, `nonce`, `prompt`, …), null when the site had none. */
    fun parameter(name: String): String? = parameters.firstOrNull { it.name == name }?.value

    override fun toString() = "AuthorizationRequest($provider, $platform, $clientId)"
}
