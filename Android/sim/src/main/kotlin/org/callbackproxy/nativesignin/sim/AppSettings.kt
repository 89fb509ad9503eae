package org.callbackproxy.nativesignin.sim

import org.callbackproxy.nativesignin.core.AuthorizationEndpoint
import org.callbackproxy.nativesignin.core.FlowSettings
import org.callbackproxy.nativesignin.core.NativeSignInConfiguration
import org.callbackproxy.nativesignin.core.Provider

/**
 * `configure`'s fields: the app's BuildConfig values, read by
 * [NativeSignInConfiguration.fromBuildConfig] as the app reads them at start-up, the OpenID
 * providers that have no fields, endpoint overrides for a local IdP, and the flow's settings.
 */
class AppSettings(request: Request) {
    val callbackPath: String
    val configuration: NativeSignInConfiguration
    /** Null without `initial_url`: then there is no flow (decide/callback only). */
    val flow: FlowSettings?
    val httpsCallbacks: Boolean

    init {
        request.only("op", "platform", "build_config", "google_authorization_endpoint", "facebook_authorization_endpoint",
            "providers", "callback_path", "initial_url", "strategy", "ephemeral", "https_callbacks", "link_paths")
        val platform = request.string("platform")
        if (platform != "android") throw SimError("this is the Android app: platform is android, not \"$platform\"")
        callbackPath = request.optionalString("callback_path") ?: "/_oauth_callback"
        val extra = request.objects("providers").map { oidcProvider(it) }
        var configuration = NativeSignInConfiguration.fromBuildConfig(request.map("build_config"), extra)
        val google = request.optionalString("google_authorization_endpoint")
        val facebook = request.optionalString("facebook_authorization_endpoint")
        if (google != null || facebook != null) {
            configuration = NativeSignInConfiguration(configuration.enabled, configuration.providers.map { p ->
                when {
                    google != null && p.endpoint == AuthorizationEndpoint.GOOGLE -> p.withEndpoint(AuthorizationEndpoint.at(google))
                    facebook != null && p.endpoint == AuthorizationEndpoint.FACEBOOK -> p.withEndpoint(AuthorizationEndpoint.at(facebook))
                    else -> p
                }
            })
        }
        this.configuration = configuration

        val initialUrl = request.optionalString("initial_url")
        val ephemeral = request.optionalBool("ephemeral") ?: false
        // The glue hands a hand-back sign-in to the default browser and takes the App Link back; no
        // Android browser catches an https redirect for the app, so the default is the glue's.
        httpsCallbacks = request.optionalBool("https_callbacks") ?: false
        val linkPaths = request.strings("link_paths")
        val strategy = when (val name = request.optionalString("strategy") ?: "native") {
            "native" -> {
                if (linkPaths.isNotEmpty()) throw SimError("link_paths is for the hand_back strategy")
                FlowSettings.Strategy.Native
            }
            "hand_back" -> FlowSettings.Strategy.HandBack(linkPaths.toSet())
            else -> throw SimError("strategy is native or hand_back, not \"$name\"")
        }
        flow = if (initialUrl != null && configuration.enabled) FlowSettings(initialUrl, strategy, ephemeral) else null
    }

    private fun oidcProvider(fields: Request): Provider {
        fields.only("name", "authorization_endpoint", "client_id", "redirect_uri", "pkce")
        return Provider.oidc(fields.string("name"), fields.string("authorization_endpoint"), fields.string("client_id"),
            fields.string("redirect_uri"), fields.bool("pkce"))
    }
}
