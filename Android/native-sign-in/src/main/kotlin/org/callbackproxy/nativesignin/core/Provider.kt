package org.callbackproxy.nativesignin.core

/**
 * One identity provider as the app signs in with it: where the site's authorization URL goes (to
 * recognise it), and the native client the app uses instead of the site's.
 *
 * The [name] is the `provider=` value of `/_oauth_callback`, so it must equal the provider's key
 * in the proxy's configuration (`providers.<name>`).
 */
class Provider(
    val name: String,
    val endpoint: AuthorizationEndpoint,
    /** The native (Android) client id, never the site's web client. */
    val clientId: String,
    /** The custom-scheme redirect registered for the native client, sent as `redirect_uri`. */
    val redirectUri: String,
    /** Whether a PKCE challenge is sent (and the verifier handed to `/_oauth_callback`). */
    val usesPkce: Boolean
) {
    /** The scheme RedirectUriReceiverActivity's intent filter must list for this provider. */
    val callbackScheme: String

    init {
        // The proxy accepts `provider` as a short token; anything else would be refused there.
        if (name.length !in 1..64 || !name.all { Ascii.isUnreserved(it) && it != '~' }) {
            throw NativeSignInError.configuration("name", "a provider name is 1 to 64 of A-Z a-z 0-9 . _ -, not \"$name\"")
        }
        if (clientId.isEmpty()) {
            throw NativeSignInError.configuration("client_id", "the native client id of $name is empty")
        }
        val scheme = UrlParts.parse(redirectUri)?.scheme
        if (scheme == null || scheme.isEmpty()) {
            throw NativeSignInError.configuration("redirect_uri", "the redirect of $name has no scheme: \"$redirectUri\"")
        }
        // Apple answers with response_mode=form_post when the site asks for name or email — a POST
        // no browser session returns to an app — and redirects to an https URL. Its web sign-in works
        // inside a WebView, so the site's own flow is left alone there. (The message is the Swift
        // library's, word for word: both simulators must answer alike.)
        if (endpoint.hosts.any { it in AuthorizationEndpoint.APPLE.hosts }) {
            throw NativeSignInError.configuration(name,
                "Sign in with Apple (appleid.apple.com) is not intercepted natively: remove the " +
                    "provider $name and let the site's web flow run in the WebView, where Apple " +
                    "allows it (or use the hand-back strategy for a site that asks for no name or email)")
        }
        callbackScheme = scheme
    }

    fun withEndpoint(endpoint: AuthorizationEndpoint) = Provider(name, endpoint, clientId, redirectUri, usesPkce)

    override fun equals(other: Any?) = other is Provider && other.name == name && other.endpoint == endpoint &&
        other.clientId == clientId && other.redirectUri == redirectUri && other.usesPkce == usesPkce

    override fun hashCode() = name.hashCode() * 31 + clientId.hashCode()
    override fun toString() = "Provider($name, $clientId, $redirectUri, pkce=$usesPkce)"

    companion object {
        /**
         * Google with the app's Android client. The redirect is the one Google gives native
         * clients, `<reversed client id>:/oauth2redirect`; Google's native clients are public, so
         * PKCE is what protects the code.
         */
        fun google(clientId: String, reversedClientId: String) =
            Provider("google", AuthorizationEndpoint.GOOGLE, clientId, "$reversedClientId:/oauth2redirect", true)

        /**
         * Facebook with the app id. Facebook's client is confidential (the proxy exchanges with
         * the app secret), so no PKCE; the redirect is the one Facebook registers for apps,
         * `fb<appid>://authorize`.
         */
        fun facebook(appId: String) =
            Provider("facebook", AuthorizationEndpoint.FACEBOOK, appId, "fb$appId://authorize", false)

        /** Any OpenID provider: its `authorization_endpoint` and the native client registered there. */
        fun oidc(name: String, authorizationEndpoint: String, clientId: String, redirectUri: String, usesPkce: Boolean = true) =
            Provider(name, AuthorizationEndpoint.at(authorizationEndpoint), clientId, redirectUri, usesPkce)

        /** `123-and.apps.googleusercontent.com` → `com.googleusercontent.apps.123-and`. */
        fun reversedGoogleClientId(clientId: String) = clientId.split('.').reversed().joinToString(".")
    }
}
