package org.callbackproxy.nativesignin.core

/**
 * The app's sign-in settings, read from its generated `BuildConfig` fields (and nothing else).
 * Every problem is a thrown [NativeSignInError] naming the field: a setting that silently
 * disabled interception would leave users at the provider's refusal of embedded browsers with
 * nothing in any log. Call [fromBuildConfig] at start-up and let a debug build crash on it.
 *
 * | BuildConfig field | type | default | meaning |
 * |---|---|---|---|
 * | `OAUTH_ENABLED` | boolean | false | interception on; off means nothing else is read |
 * | `GOOGLE_CLIENT_ID` | String | empty: no Google | the *Android* client, `….apps.googleusercontent.com`; redirect `<reversed id>:/oauth2redirect`, PKCE |
 * | `OAUTH_REDIRECT_SCHEME` | String | empty: derived | the scheme in AppAuth's `appAuthRedirectScheme` placeholder; with Google it must be the reversed client id, without Google the scheme of a configured provider |
 * | `FACEBOOK_APP_ID` | String of digits | empty: no Facebook | the app id; redirect `fb<appid>://authorize`, no PKCE |
 *
 * A String field that still holds a placeholder — `${…}`, `$(…)`, or the text `null` that Groovy
 * interpolates for a missing property — is an error, not "empty". A field of the wrong type, or a
 * name that is none of the four (a misspelt `OAUTH_ENABLE` would otherwise switch sign-in off
 * silently), is an error. Other OpenID providers have no fields: pass them as `extraProviders`.
 * Sign in with Apple is not intercepted: a provider at appleid.apple.com cannot even be made
 * ([Provider] explains why).
 */
class NativeSignInConfiguration(val enabled: Boolean, val providers: List<Provider>) {

    /** The interceptor for this configuration, or null when `OAUTH_ENABLED` is off. */
    fun interceptor(platform: Platform = Platform.ANDROID,
                    callbackPath: String = SignInInterceptor.DEFAULT_CALLBACK_PATH): SignInInterceptor? =
        if (enabled) SignInInterceptor(providers, platform, callbackPath) else null

    override fun equals(other: Any?) = other is NativeSignInConfiguration && other.enabled == enabled && other.providers == providers
    override fun hashCode() = providers.hashCode() * 2 + (if (enabled) 1 else 0)
    override fun toString() = "NativeSignInConfiguration(enabled=$enabled, $providers)"

    companion object {
        const val FILE = "BuildConfig"
        const val OAUTH_ENABLED = "OAUTH_ENABLED"
        const val OAUTH_REDIRECT_SCHEME = "OAUTH_REDIRECT_SCHEME"
        const val GOOGLE_CLIENT_ID = "GOOGLE_CLIENT_ID"
        const val FACEBOOK_APP_ID = "FACEBOOK_APP_ID"
        val KEYS = listOf(OAUTH_ENABLED, OAUTH_REDIRECT_SCHEME, GOOGLE_CLIENT_ID, FACEBOOK_APP_ID)

        private const val GOOGLE_SUFFIX = ".apps.googleusercontent.com"

        /**
         * From the BuildConfig values by field name: `mapOf("OAUTH_ENABLED" to BuildConfig.OAUTH_ENABLED, …)`.
         * An absent or null entry is "not set".
         */
        fun fromBuildConfig(values: Map<String, Any?>, extraProviders: List<Provider> = emptyList()): NativeSignInConfiguration {
            val unknown = values.keys.sorted().firstOrNull { it !in KEYS }
            if (unknown != null) {
                throw problem(unknown, "is not a native sign-in setting (${KEYS.joinToString(", ")})")
            }
            val enabled = when (val value = values[OAUTH_ENABLED]) {
                null -> false
                is Boolean -> value
                else -> throw problem(OAUTH_ENABLED, "must be a boolean buildConfigField (true or false), not ${describe(value)}")
            }
            if (!enabled) return NativeSignInConfiguration(false, emptyList())

            val providers = ArrayList<Provider>()
            val googleClientId = string(values, GOOGLE_CLIENT_ID)
            val redirectScheme = string(values, OAUTH_REDIRECT_SCHEME)
            if (googleClientId != null) {
                if (!googleClientId.endsWith(GOOGLE_SUFFIX) || googleClientId.length == GOOGLE_SUFFIX.length ||
                    !googleClientId.all { it in 'a'..'z' || it in 'A'..'Z' || it in '0'..'9' || it == '-' || it == '.' }) {
                    throw problem(GOOGLE_CLIENT_ID, "is not a Google client id (….apps.googleusercontent.com): \"$googleClientId\"")
                }
                // Google derives the redirect scheme from the client id; a different scheme in the
                // manifest placeholder means the two come from different clients, and the redirect
                // would never reach the app after the user signed in.
                val expected = Provider.reversedGoogleClientId(googleClientId)
                if (redirectScheme != null && redirectScheme != expected) {
                    throw problem(OAUTH_REDIRECT_SCHEME, "is \"$redirectScheme\", but GOOGLE_CLIENT_ID reversed is \"$expected\"")
                }
                providers.add(Provider.google(googleClientId, expected))
            }
            val appId = string(values, FACEBOOK_APP_ID)
            if (appId != null) {
                if (!Ascii.isDigits(appId)) {
                    throw problem(FACEBOOK_APP_ID, "a Facebook app id is digits only, not \"$appId\" (is FACEBOOK_APP_ID set?)")
                }
                providers.add(Provider.facebook(appId))
            }
            providers.addAll(extraProviders)
            if (providers.isEmpty()) {
                throw problem(OAUTH_ENABLED, "sign-in is enabled but no provider is configured " +
                    "(GOOGLE_CLIENT_ID and FACEBOOK_APP_ID empty, no extra provider)")
            }
            if (googleClientId == null && redirectScheme != null && providers.none { it.callbackScheme == redirectScheme }) {
                throw problem(OAUTH_REDIRECT_SCHEME, "is \"$redirectScheme\", which is the redirect scheme of no configured provider " +
                    "(${providers.joinToString(", ") { it.callbackScheme }})")
            }
            val names = providers.map { it.name }
            val twice = names.firstOrNull { name -> names.count { it == name } > 1 }
            if (twice != null) throw NativeSignInError.configuration(twice, "the provider $twice is configured twice")
            return NativeSignInConfiguration(true, providers)
        }

        /** A String field: null when absent, null or empty; an error for another type or a placeholder. */
        private fun string(values: Map<String, Any?>, key: String): String? {
            val value = values[key] ?: return null
            if (value !is String) throw problem(key, "must be a String buildConfigField, not ${describe(value)}")
            if (value.isEmpty()) return null
            if (value.contains("\${") || value.contains("$(") || value == "null") {
                throw problem(key, "is \"$value\", a placeholder that was never substituted (is $key set for this build?)")
            }
            return value
        }

        private fun describe(value: Any): String = if (value is String) "\"$value\"" else value.toString()

        private fun problem(key: String, detail: String) = NativeSignInError.configuration(key, detail, FILE)
    }
}
